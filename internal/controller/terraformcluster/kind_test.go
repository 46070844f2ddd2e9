package terraformcluster

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/controller/terraformmachine"
	"github.com/captf/captf/internal/controller/terraformmachinepool"
	"github.com/captf/captf/internal/runner"
	"github.com/captf/captf/internal/tfstate"
)

// TestApplied: what a cluster's successful apply publishes — the failure
// domains in the status, the endpoint through a step of its own — and
// nothing when the module declares neither.
func TestApplied(t *testing.T) {
	tests := []struct {
		name    string
		msg     runner.Message
		domains []infrav1.FailureDomain
		steps   []engine.Step
	}{{
		name: "endpoint and failure domains",
		msg: runner.Message{Outcome: runner.OutcomeApplied, Endpoint: &runner.Endpoint{Host: "10.0.0.1", Port: 6443},
			FailureDomains: []runner.FailureDomain{{Name: "a", ControlPlane: true}, {Name: "b", Attributes: map[string]string{"k": "v"}}}},
		domains: []infrav1.FailureDomain{{Name: "a", ControlPlane: ptr.To(true)}, {Name: "b", ControlPlane: ptr.To(false), Attributes: map[string]string{"k": "v"}}},
		steps:   []engine.Step{publishEndpoint{Host: "10.0.0.1", Port: 6443}},
	}, {
		name: "neither",
		msg:  runner.Message{Outcome: runner.OutcomeNoChanges},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			view := &infrav1.TerraformCluster{Status: infrav1.TerraformClusterStatus{FailureDomains: []infrav1.FailureDomain{{Name: "gone"}}}}
			steps := Kind.Applied(view, &tt.msg)
			if diff := cmp.Diff(tt.steps, steps); diff != "" {
				t.Errorf("steps (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.domains, view.Status.FailureDomains); diff != "" {
				t.Errorf("failure domains (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFromState: the exports output reaches status.exports as canonical
// JSON when it is an object that is not sensitive and fits; otherwise
// status.exports is unset and ExportsPublished says why, never with a
// value.
func TestFromState(t *testing.T) {
	const canary = "CANARY-EXPORTS-91"
	big := `{"k":"` + strings.Repeat("x", infrav1.MaxExportsBytes) + `"}`
	tests := []struct {
		name    string
		out     tfstate.Output
		err     error
		exports string
		status  metav1.ConditionStatus
		reason  string
	}{
		{name: "published, canonical", out: tfstate.Output{Found: true, Value: json.RawMessage(`{"subnets": ["a", "b"], "network": "n-1", "mtu": 1.50}`)},
			exports: `{"mtu":1.50,"network":"n-1","subnets":["a","b"]}`, status: metav1.ConditionTrue, reason: infrav1.ReasonExportsPublished},
		{name: "none declared", status: metav1.ConditionTrue, reason: infrav1.ReasonNoExports},
		{name: "sensitive", out: tfstate.Output{Found: true, Sensitive: true, Value: json.RawMessage(`{"token":"` + canary + `"}`)},
			status: metav1.ConditionFalse, reason: infrav1.ReasonExportsSensitive},
		{name: "not an object", out: tfstate.Output{Found: true, Value: json.RawMessage(`"` + canary + `"`)},
			status: metav1.ConditionFalse, reason: infrav1.ReasonExportsNotAnObject},
		{name: "too large", out: tfstate.Output{Found: true, Value: json.RawMessage(big)},
			status: metav1.ConditionFalse, reason: infrav1.ReasonExportsTooLarge},
		{name: "unreadable", err: fmt.Errorf("%w: not JSON at byte 7", tfstate.ErrCorrupt),
			status: metav1.ConditionFalse, reason: infrav1.ReasonExportsUnreadable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tc := &infrav1.TerraformCluster{Status: infrav1.TerraformClusterStatus{Exports: &apiextensionsv1.JSON{Raw: []byte(`{"old":1}`)}}}
			Kind.FromState(tc, func(name string) (tfstate.Output, error) {
				if name != runner.OutputExports {
					t.Errorf("read output %q", name)
				}
				return tt.out, tt.err
			})
			got := ""
			if tc.Status.Exports != nil {
				got = string(tc.Status.Exports.Raw)
			}
			if got != tt.exports {
				t.Errorf("status.exports %s, want %s", got, tt.exports)
			}
			c := meta.FindStatusCondition(tc.Status.Conditions, infrav1.ConditionExportsPublished)
			if c == nil || c.Status != tt.status || c.Reason != tt.reason {
				t.Fatalf("ExportsPublished %+v, want %s/%s", c, tt.status, tt.reason)
			}
			if strings.Contains(c.Message, canary) {
				t.Errorf("the message shows a value: %s", c.Message)
			}
		})
	}
}

// TestMachinesAndPoolsIndexed: a cluster lists its machines and pools by
// their cluster-name label (its watches, its deletion), so their kinds
// declare that label for the manager's cache to index.
func TestMachinesAndPoolsIndexed(t *testing.T) {
	for _, k := range []engine.Kind{terraformmachine.Kind, terraformmachinepool.Kind} {
		if got := k.IndexedLabels(); !slices.Contains(got, infrav1.LabelClusterName) {
			t.Errorf("%s: labels indexed %v, want %s among them", k.Name(), got, infrav1.LabelClusterName)
		}
	}
	if got := Kind.IndexedLabels(); len(got) != 0 {
		t.Errorf("TerraformCluster: labels indexed %v; nothing lists clusters by label", got)
	}
}
