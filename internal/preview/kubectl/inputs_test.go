package kubectl

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseInputs(t *testing.T) {
	cases := []struct {
		reason  string
		in      map[string]any
		want    config
		wantErr string
	}{{
		reason: "defaults: the component is the stack, delete never",
		in:     map[string]any{"manifest": "k8s"},
		want:   config{Manifest: "k8s", Stack: "web", Delete: DeleteNever},
	}, {
		reason: "every input",
		in: map[string]any{"manifest": "k8s/app.yaml", "stack": "api", "kubeconfig": "kc", "context": "prod", "namespace": "team",
			"delete": "owned-only", "outputs": map[string]any{"host": map[string]any{"object": "Service/prod/web", "field": "status.loadBalancer.ingress.0.hostname"}}},
		want: config{Manifest: "k8s/app.yaml", Stack: "api", Kubeconfig: "kc", Context: "prod", Namespace: "team", Delete: DeleteOwnedOnly,
			Outputs: map[string]outputRef{"host": {Object: "Service/prod/web", Kind: "Service", Field: path{"status", "loadBalancer", "ingress", "0", "hostname"}, FieldText: "status.loadBalancer.ingress.0.hostname"}}},
	}, {
		reason:  "no manifest",
		in:      map[string]any{},
		wantErr: "inputs: manifest is required (a file or directory of YAML, relative to the repository root)",
	}, {
		reason:  "a typo in an input name",
		in:      map[string]any{"manifest": "k8s", "namespce": "x"},
		wantErr: `inputs: unknown input "namespce" (known: manifest, stack, kubeconfig, context, namespace, delete, outputs)`,
	}, {
		reason:  "a delete mode that does not exist",
		in:      map[string]any{"manifest": "k8s", "delete": "all"},
		wantErr: `inputs: delete must be "never" or "owned-only", not "all"`,
	}, {
		reason:  "a manifest that is not a string",
		in:      map[string]any{"manifest": 3},
		wantErr: "inputs: manifest must be a string, not int",
	}, {
		reason:  "a stack that cannot be a label value",
		in:      map[string]any{"manifest": "k8s", "stack": "a/b"},
		wantErr: `inputs: stack "a/b" is not a valid label value`,
	}, {
		reason:  "a namespace that cannot be one",
		in:      map[string]any{"manifest": "k8s", "namespace": "Team_A"},
		wantErr: `inputs: namespace "Team_A" is not a valid namespace name`,
	}, {
		reason:  "an output object without a name",
		in:      map[string]any{"manifest": "k8s", "outputs": map[string]any{"x": map[string]any{"object": "Service", "field": "spec"}}},
		wantErr: `inputs: outputs.x.object "Service" must be Kind/namespace/name, or Kind/name for a cluster-scoped object`,
	}, {
		reason:  "an output without a field",
		in:      map[string]any{"manifest": "k8s", "outputs": map[string]any{"x": map[string]any{"object": "Service/a/b"}}},
		wantErr: "inputs: outputs.x needs object (Kind/namespace/name) and field (e.g. status.loadBalancer.ingress.0.hostname) as strings",
	}, {
		reason:  "an output with an unknown key",
		in:      map[string]any{"manifest": "k8s", "outputs": map[string]any{"x": map[string]any{"object": "Service/a/b", "field": "spec", "path": "y"}}},
		wantErr: `inputs: outputs.x: unknown key "path" (known: object, field)`,
	}, {
		reason:  "a Secret's data as an output",
		in:      map[string]any{"manifest": "k8s", "outputs": map[string]any{"pw": map[string]any{"object": "Secret/a/creds", "field": "data.password"}}},
		wantErr: "inputs: outputs.pw.field data.password of a Secret is sensitive and cannot be an output",
	}, {
		reason:  "a bad output field path",
		in:      map[string]any{"manifest": "k8s", "outputs": map[string]any{"x": map[string]any{"object": "Service/a/b", "field": "spec..x"}}},
		wantErr: `inputs: outputs.x.field: field path "spec..x": empty segment`,
	}}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			got, err := parseInputs("web", tc.in)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if tc.wantErr != "" {
				if len(gotErr) < len(tc.wantErr) || gotErr[:len(tc.wantErr)] != tc.wantErr {
					t.Errorf("error %q, want it to start with %q", gotErr, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
