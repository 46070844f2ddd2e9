package terraformcluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/runner"
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
