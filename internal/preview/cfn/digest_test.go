package cfn

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/captf/captf/internal/preview"
	"github.com/captf/captf/internal/preview/previewtest"
	"github.com/captf/captf/pkg/changeset"
)

// TestMemberDigest: the digest is the same for the same step and moves with
// each thing it covers. prepare makes no call to CloudFormation.
func TestMemberDigest(t *testing.T) {
	body := "Parameters:\n  Secret:\n    Type: String\n    NoEcho: true\n  Stage:\n    Type: String\n    Default: dev\nResources:\n  Q:\n    Type: AWS::SQS::Queue\n"
	base := func(t *testing.T) preview.Request {
		req := request(t, "digest", body, map[string]any{"Secret": canary, "Stage": "prod"})
		req.Missing = []string{"network"}
		return req
	}
	digest := func(t *testing.T, req preview.Request) string {
		t.Helper()
		m, err := testDeploy().prepareDigest(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(m.document.PlanDigest, "cfn1:") {
			t.Fatalf("digest %q has no cfn1: prefix", m.document.PlanDigest)
		}
		return m.document.PlanDigest
	}
	want := digest(t, base(t))
	if again := digest(t, base(t)); again != want {
		t.Fatalf("the same step digests as %s, then %s (other root and work dir)", want, again)
	}
	cases := []struct {
		reason string
		change func(*preview.Request)
	}{
		{"environment", func(r *preview.Request) { r.Environment = "prod" }},
		{"stack", func(r *preview.Request) { r.Inputs["stack"] = "other" }},
		{"template bytes", func(r *preview.Request) { writeTemplate(t, r.Root, body+"  R:\n    Type: AWS::SNS::Topic\n") }},
		{"template path", func(r *preview.Request) {
			writeTemplate(t, r.Root, body)
			r.Inputs["template"] = "infra/../infra/./template.yaml" // the same file: no move
		}},
		{"a parameter's value", func(r *preview.Request) { r.Inputs["parameters"] = map[string]any{"Secret": canary, "Stage": "test"} }},
		{"a NoEcho parameter's value (through the keyed digest)", func(r *preview.Request) {
			r.Inputs["parameters"] = map[string]any{"Secret": canary + "x", "Stage": "prod"}
		}},
		{"the preview key", func(r *preview.Request) { r.Key = previewtest.OtherKey() }},
		{"a parameter left to its default", func(r *preview.Request) { r.Inputs["parameters"] = map[string]any{"Secret": canary} }},
		{"missing components", func(r *preview.Request) { r.Missing = []string{"network", "dns"} }},
		{"region", func(r *preview.Request) { r.Inputs["region"] = "eu-west-1" }},
		{"onReplace", func(r *preview.Request) { r.Inputs["onReplace"] = "allow" }},
		{"endpoint", func(r *preview.Request) { r.Inputs["endpoint"] = "http://127.0.0.1:2" }},
	}
	for _, c := range cases {
		t.Run(c.reason, func(t *testing.T) {
			req := base(t)
			c.change(&req)
			got := digest(t, req)
			same := c.reason == "template path"
			if (got == want) != same {
				t.Errorf("digest %s against %s: moved=%v, want moved=%v", got, want, got != want, !same)
			}
		})
	}
	t.Run("different file at another path", func(t *testing.T) {
		req := base(t)
		writeTemplate(t, req.Root, body)
		req.Inputs["template"] = "infra/template.yaml"
		a := digest(t, req)
		if err := copyFile(req.Root+"/infra/template.yaml", req.Root+"/infra/copy.yaml"); err != nil {
			t.Fatal(err)
		}
		req.Inputs["template"] = "infra/copy.yaml"
		if b := digest(t, req); a == b {
			t.Error("the same bytes at another path digest alike")
		}
	})
}

func TestHoles(t *testing.T) {
	cases := []struct {
		missing []string
		want    []changeset.Hole
	}{
		{nil, nil},
		{[]string{"dns", "network"}, []changeset.Hole{{Reason: "inputs from dns; re-checked on apply"}, {Reason: "inputs from network; re-checked on apply"}}},
		{[]string{"network", "network"}, []changeset.Hole{{Reason: "inputs from network; re-checked on apply"}}},
	}
	for _, c := range cases {
		if diff := cmp.Diff(c.want, holes(c.missing)); diff != "" {
			t.Errorf("holes(%v) (-want +got):\n%s", c.missing, diff)
		}
	}
}

func TestRedactor(t *testing.T) {
	r := newRedactor(map[string]string{"Secret": canary, "Short": "abc", "Inner": "canary-5d1f"})
	got := r.text("Parameter 'Secret' value " + canary + " is invalid; abc stays")
	want := "Parameter 'Secret' value (redacted) is invalid; abc stays"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestChangesDigest(t *testing.T) {
	a := []change{{Address: "A", Action: "Add", ResourceType: "AWS::SNS::Topic"}, {Address: "B", Action: "Modify", Replacement: "False"}}
	b := []change{{Address: "A", Action: "Add", ResourceType: "AWS::SNS::Topic"}, {Address: "B", Action: "Modify", Replacement: "True"}}
	da, _ := changesDigest(a)
	db, _ := changesDigest(b)
	empty, _ := changesDigest(nil)
	if da == db || da == empty || !strings.HasPrefix(da, "cfnc1:") {
		t.Errorf("changes digests %s, %s, %s: want three distinct cfnc1: digests", da, db, empty)
	}
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}

func TestChangesDigestIgnoresListingOrder(t *testing.T) {
	d1 := detail{Attribute: "Properties", Name: "A", ChangeSource: "DirectModification", Evaluation: "Static"}
	d2 := detail{Attribute: "Properties", Name: "A", ChangeSource: "ParameterReference", Evaluation: "Dynamic", CausingEntity: "P"}
	d3 := detail{Attribute: "Tags"}
	a := []change{
		{Address: "X", Action: "Add"},
		{Address: "Y", Action: "Modify", Scope: []string{"Properties", "Tags"}, Details: []detail{d1, d2, d3}},
	}
	b := []change{
		{Address: "Y", Action: "Modify", Scope: []string{"Tags", "Properties"}, Details: []detail{d3, d2, d1}},
		{Address: "X", Action: "Add"},
	}
	sortChanges(a)
	sortChanges(b)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("the same changes listed in another order (-a +b):\n%s", diff)
	}
	da, _ := changesDigest(a)
	db, _ := changesDigest(b)
	if da != db {
		t.Errorf("digests %s and %s of the same changes", da, db)
	}
}

func TestWithoutSensitive(t *testing.T) {
	tmpl, err := parseTemplate([]byte(`Parameters:
  Secret: {Type: String, NoEcho: true}
  Short: {Type: String, NoEcho: true}
  Stage: {Type: String}
Outputs:
  Direct: {Value: !Ref Secret}
  InSub: {Value: !Sub "${Stage}:${Secret}"}
  Plain: {Value: !Ref Stage}
`))
	if err != nil {
		t.Fatal(err)
	}
	m := &member{tmpl: tmpl, in: inputs{Parameters: map[string]string{"Secret": canary, "Short": "ab", "Stage": "prod"}}}
	out := preview.Outputs{
		"Direct":    json.RawMessage(`"x"`),
		"InSub":     json.RawMessage(`"x"`),
		"Plain":     json.RawMessage(`"prod"`),
		"Copied":    json.RawMessage(`"prefix-` + canary + `"`),
		"ShortSame": json.RawMessage(`"ab"`),
		"ShortIn":   json.RawMessage(`"tab"`),
		"Other":     json.RawMessage(`"vpc-1"`),
	}
	want := preview.Outputs{
		"Plain":   json.RawMessage(`"prod"`),
		"ShortIn": json.RawMessage(`"tab"`),
		"Other":   json.RawMessage(`"vpc-1"`),
	}
	if diff := cmp.Diff(want, m.withoutSensitive(out)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
