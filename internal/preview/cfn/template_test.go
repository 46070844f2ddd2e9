package cfn

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestOutputReferences(t *testing.T) {
	cases := []struct {
		reason string
		tmpl   string
		want   reads
	}{
		{"a literal reads nothing", `{"Outputs": {"O": {"Value": "fixed"}}}`, reads{Names: []string{}, Attributes: []string{}}},
		{"Ref in JSON", `{"Outputs": {"O": {"Value": {"Ref": "Bucket"}}}}`, reads{Names: []string{"Bucket"}, Attributes: []string{}}},
		{"GetAtt list in JSON", `{"Outputs": {"O": {"Value": {"Fn::GetAtt": ["Db", "Endpoint.Address"]}}}}`, reads{Names: []string{"Db"}, Attributes: []string{"Db"}}},
		{"short Ref", "Outputs:\n  O:\n    Value: !Ref Bucket\n", reads{Names: []string{"Bucket"}, Attributes: []string{}}},
		{"short GetAtt with a dotted attribute", "Outputs:\n  O:\n    Value: !GetAtt Db.Endpoint.Address\n", reads{Names: []string{"Db"}, Attributes: []string{"Db"}}},
		{"short Sub: resources, attributes, pseudo parameters, no literals", "Outputs:\n  O:\n    Value: !Sub '${AWS::Region}-${Bucket}-${Db.Endpoint.Port}-${!Literal}'\n",
			reads{Names: []string{"AWS::Region", "Bucket", "Db"}, Attributes: []string{"Db"}}},
		{"Sub with a variable map", "Outputs:\n  O:\n    Value: !Sub\n      - '${Name}-${Stage}'\n      - Name: !GetAtt Topic.TopicName\n",
			reads{Names: []string{"Stage", "Topic"}, Attributes: []string{"Topic"}}},
		{"Join over Refs", "Outputs:\n  O:\n    Value: !Join [',', [!Ref A, !Ref B]]\n", reads{Names: []string{"A", "B"}, Attributes: []string{}}},
		{"ImportValue is opaque", "Outputs:\n  O:\n    Value: !ImportValue shared\n", reads{Opaque: true, Names: []string{}, Attributes: []string{}}},
		{"long ImportValue in Sub", `{"Outputs": {"O": {"Value": {"Fn::Join": ["", [{"Fn::ImportValue": "x"}, {"Ref": "A"}]]}}}}`, reads{Opaque: true, Names: []string{"A"}, Attributes: []string{}}},
	}
	for _, c := range cases {
		t.Run(c.reason, func(t *testing.T) {
			tmpl, err := parseTemplate([]byte(c.tmpl))
			if err != nil {
				t.Fatal(err)
			}
			got := references(tmpl.Outputs["O"].Value)
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseTemplateParameters(t *testing.T) {
	tmpl, err := parseTemplate([]byte("Parameters:\n  A:\n    Type: String\n    NoEcho: true\n  B:\n    Type: Number\n    Default: 5\n  C:\n    Type: String\n    NoEcho: 'true'\n    Default: ''\n"))
	if err != nil {
		t.Fatal(err)
	}
	five, empty := "5", ""
	want := map[string]templateParameter{"A": {NoEcho: true}, "B": {Default: &five}, "C": {NoEcho: true, Default: &empty}}
	if diff := cmp.Diff(want, tmpl.Parameters); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestEvaluateLiteralOutputs(t *testing.T) {
	tmpl, err := parseTemplate([]byte(`Parameters:
  Stage: {Type: String, Default: dev}
  Secret: {Type: String, NoEcho: true}
Outputs:
  Lit: {Value: fixed}
  Sub: {Value: !Sub '${AWS::StackName}-${Stage}-${!Keep}'}
  Vars: {Value: !Sub ['${X}.${AWS::Region}', {X: !Ref Stage}]}
  Join: {Value: !Join ['/', [a, !Ref Stage]]}
  Secret: {Value: !Ref Secret}
  Account: {Value: !Ref AWS::AccountId}
`))
	if err != nil {
		t.Fatal(err)
	}
	ev := evaluator{tmpl: tmpl, params: map[string]string{"Stage": "prod", "Secret": canary}, region: "eu-west-1", stack: "web"}
	want := map[string]string{"Lit": "fixed", "Sub": "web-prod-${Keep}", "Vars": "prod.eu-west-1", "Join": "a/prod"}
	got := map[string]string{}
	for name, o := range tmpl.Outputs {
		if v, ok := ev.eval(o.Value); ok {
			got[name] = v
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
