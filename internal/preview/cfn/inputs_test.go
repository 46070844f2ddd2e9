package cfn

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/captf/captf/internal/preview"
)

func TestParseInputs(t *testing.T) {
	cases := []struct {
		reason string
		raw    map[string]any
		want   inputs
		err    string
	}{
		{
			reason: "stack defaults to the component, onReplace to block",
			raw:    map[string]any{"template": "./infra//web.yaml"},
			want:   inputs{Template: "infra/web.yaml", Stack: "app", OnReplace: "block", Parameters: map[string]string{}},
		},
		{
			reason: "parameters become strings: numbers as written, booleans, lists joined, resolved outputs unquoted",
			raw: map[string]any{"template": "t.json", "stack": "web-2", "onReplace": "allow", "region": "eu-west-1", "endpoint": "http://127.0.0.1:1", "capabilities": []any{"CAPABILITY_IAM"},
				"parameters": map[string]any{"Count": 3, "Ratio": 0.25, "Big": json.Number("9007199254740993"), "On": true, "Subnets": []any{"a", "b"}, "Upstream": json.RawMessage(`"vpc-1"`), "UpNum": json.RawMessage(`12.50`)}},
			want: inputs{Template: "t.json", Stack: "web-2", OnReplace: "allow", Region: "eu-west-1", Endpoint: "http://127.0.0.1:1", Capabilities: []string{"CAPABILITY_IAM"},
				Parameters: map[string]string{"Count": "3", "Ratio": "0.25", "Big": "9007199254740993", "On": "true", "Subnets": "a,b", "Upstream": "vpc-1", "UpNum": "12.50"}},
		},
		{reason: "template is required", raw: map[string]any{}, err: "input template: missing"},
		{reason: "template outside the repository", raw: map[string]any{"template": "../x.yaml"}, err: `input template: "../x.yaml" is not a path inside the repository`},
		{reason: "absolute template", raw: map[string]any{"template": "/etc/x.yaml"}, err: `input template: "/etc/x.yaml" is not a path inside the repository`},
		{reason: "typo in a key", raw: map[string]any{"template": "t", "params": map[string]any{}}, err: "input params: unknown input (known: template, stack, parameters, onReplace, region, endpoint, capabilities)"},
		{reason: "onReplace", raw: map[string]any{"template": "t", "onReplace": "never"}, err: `input onReplace: must be "block" or "allow"`},
		{reason: "stack name", raw: map[string]any{"template": "t", "stack": "web_1"}, err: `input stack: "web_1" is not a CloudFormation stack name (a letter, then letters, digits and hyphens, at most 128)`},
		{reason: "parameters not a map", raw: map[string]any{"template": "t", "parameters": []any{"a"}}, err: "input parameters: must be a map of parameter names to values, not a list"},
		{reason: "a map value names its kind, not its content", raw: map[string]any{"template": "t", "parameters": map[string]any{"P": map[string]any{canary: 1}}}, err: "input parameters: P: a map, not a string, number, boolean or list of them"},
		{reason: "null parameter", raw: map[string]any{"template": "t", "parameters": map[string]any{"P": nil}}, err: "input parameters: P: null (leave the parameter out to use its Default)"},
		{reason: "template not a string", raw: map[string]any{"template": 3}, err: "input template: must be a string, not a number"},
	}
	for _, c := range cases {
		t.Run(c.reason, func(t *testing.T) {
			got, err := parseInputs("app", c.raw)
			if c.err != "" {
				if err == nil || err.Error() != c.err {
					t.Fatalf("error %v, want %s", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, got, cmp.AllowUnexported(inputs{})); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestPlanRefusesBadInput: each bad input fails the plan with an error that
// names the file and field, before any call to CloudFormation (the endpoint
// answers nothing), and never shows a parameter's value.
func TestPlanRefusesBadInput(t *testing.T) {
	good := "Parameters:\n  Secret:\n    Type: String\n    NoEcho: true\nResources:\n  Q:\n    Type: AWS::SQS::Queue\n"
	cases := []struct {
		reason   string
		template string
		params   map[string]any
		extra    map[string]any
		err      string
	}{
		{reason: "template file missing", template: "", err: "input template: infra/absent.yaml does not exist in the repository"},
		{reason: "not YAML", template: "Resources: [", params: map[string]any{"Secret": canary}, err: "template infra/template.yaml: not JSON or YAML: yaml: line 1:"},
		{reason: "resource without type", template: "Resources:\n  Q:\n    Properties: {}\n", err: "template infra/template.yaml: field Resources.Q.Type: missing or not a string"},
		{reason: "undeclared parameter", template: good, params: map[string]any{"Secret": canary, "Other": canary}, err: "input parameters.Other: template infra/template.yaml declares no parameter Other"},
		{reason: "parameter with no value and no default", template: good, err: "input parameters.Secret: missing, and template infra/template.yaml gives parameter Secret no Default"},
		{reason: "template too large", template: good + "# " + strings.Repeat("x", maxTemplateBody), params: map[string]any{"Secret": canary}, err: " bytes, more than the 51200 CloudFormation takes inline"},
		{reason: "output without value", template: "Resources: {}\nOutputs:\n  O:\n    Export: {Name: x}\n", err: "template infra/template.yaml: field Outputs.O.Value: missing"},
	}
	for _, c := range cases {
		t.Run(c.reason, func(t *testing.T) {
			req := request(t, "bad", c.template, c.params)
			req.Inputs["endpoint"] = "http://127.0.0.1:9" // nothing listens: no call may be needed
			if c.template == "" {
				req.Inputs["template"] = "infra/absent.yaml"
			}
			_, err := testDeploy().Plan(context.Background(), req)
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("error %v, want it to contain %q", err, c.err)
			}
			if strings.Contains(err.Error(), canary) {
				t.Error("the error holds the NoEcho value")
			}
			if errors.Is(err, preview.ErrMoved) {
				t.Error("bad input reads as a moved plan")
			}
		})
	}
}

func TestStackDefaultsToAValidComponentName(t *testing.T) {
	_, err := parseInputs("my_app", map[string]any{"template": "t.yaml"})
	want := `input stack: not set, and the component's name "my_app" is not a CloudFormation stack name (a letter, then letters, digits and hyphens, at most 128)`
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}
