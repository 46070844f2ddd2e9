package modulecontract

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/captf/captf/internal/puretest"
)

// TestPure: the contract imports nothing but the standard library, so the
// manager, the runner and the CLI can share it.
func TestPure(t *testing.T) {
	puretest.StandardLibraryOnly(t, "github.com/captf/captf/internal/modulecontract", "os/exec", "k8s.io/")
}

// TestContracts: which outputs and variables each role must declare, and
// which variable is secret.
func TestContracts(t *testing.T) {
	type summary struct {
		Required, Optional, Secret []string
	}
	want := map[Role]summary{
		RoleCluster: {
			Optional: []string{OutputEndpointHost, OutputEndpointPort, OutputFailureDomains, OutputExports, OutputHealth},
		},
		RoleMachine: {
			Required: []string{OutputProviderID, VariableMachineName, VariableBootstrapData},
			Optional: []string{OutputAddresses, OutputFailureDomain, OutputHealth, VariableExports, VariableFailureDomain, VariableControlPlane, VariableKubernetesVersion},
			Secret:   []string{VariableBootstrapData},
		},
		RolePool: {
			Required: []string{OutputProviderIDs, VariablePoolName, VariableReplicas, VariableBootstrapData},
			Optional: []string{OutputProviderID, OutputMemberAddresses, OutputHealth, VariableExports, VariableFailureDomains, VariableNodeLabels, VariableNodeTaints, VariableKubernetesVersion},
			Secret:   []string{VariableBootstrapData},
		},
	}
	got := map[Role]summary{}
	for _, r := range Roles() {
		c, ok := For(r)
		if !ok {
			t.Fatalf("For(%s): no contract", r)
		}
		var s summary
		for _, o := range c.Outputs {
			if o.Required {
				s.Required = append(s.Required, o.Name)
			} else {
				s.Optional = append(s.Optional, o.Name)
			}
		}
		for _, v := range c.Variables {
			if v.Required {
				s.Required = append(s.Required, v.Name)
			} else {
				s.Optional = append(s.Optional, v.Name)
			}
			if v.Sensitive {
				s.Secret = append(s.Secret, v.Name)
			}
		}
		got[r] = s
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("contracts (-want +got):\n%s", diff)
	}
	if _, ok := For("node"); ok {
		t.Error(`For("node"): a contract for a role that has none`)
	}
}

// TestForCopies: a caller that changes the contract it got does not
// change the next caller's.
func TestForCopies(t *testing.T) {
	c, _ := For(RoleMachine)
	c.Outputs[0].Required = false
	c.Variables[0].Name = "changed"
	again, _ := For(RoleMachine)
	if !again.Outputs[0].Required || again.Variables[0].Name != VariableExports {
		t.Errorf("For(machine) after a caller changed its copy: %+v", again)
	}
}
