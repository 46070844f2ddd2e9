package terraformmachine

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	infrav1 "github.com/captf/captf/api/v1alpha1"
)

// TestMachineChanged: of a Machine's updates, only those of what its
// infrastructure machine's inputs are read from bring it back; the
// status Cluster API writes through the Machine's phases does not.
func TestMachineChanged(t *testing.T) {
	base := func() *clusterv1.Machine {
		return &clusterv1.Machine{
			ObjectMeta: metav1.ObjectMeta{Name: "fleet-0", Namespace: "default", Labels: map[string]string{clusterv1.ClusterNameLabel: "fleet"}},
			Spec:       clusterv1.MachineSpec{ClusterName: "fleet", FailureDomain: "a"},
		}
	}
	checkUpdates(t, machineChanged, base, []update[*clusterv1.Machine]{
		{"phase and conditions", func(m *clusterv1.Machine) {
			m.Status.Phase = "Provisioning"
			m.Status.Conditions = []metav1.Condition{{Type: clusterv1.MachineInfrastructureReadyCondition, Status: metav1.ConditionFalse}}
		}, false},
		{"bootstrap data", func(m *clusterv1.Machine) { m.Spec.Bootstrap.DataSecretName = ptr.To("fleet-0-bootstrap") }, true},
		{"failure domain", func(m *clusterv1.Machine) { m.Spec.FailureDomain = "b" }, true},
		{"control plane label", func(m *clusterv1.Machine) { m.Labels[clusterv1.MachineControlPlaneLabel] = "" }, true},
	})
}

// TestClusterChanged: of a Cluster's updates, only its pause, its
// infrastructure provisioned and its infrastructureRef bring its machines
// back; the status Cluster API writes as machines change does not.
func TestClusterChanged(t *testing.T) {
	base := func() *clusterv1.Cluster {
		c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "fleet", Namespace: "default"}}
		c.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "TerraformCluster", Name: "fleet"}
		c.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
		return c
	}
	checkUpdates(t, clusterChanged, base, []update[*clusterv1.Cluster]{
		{"machine counts and conditions", func(c *clusterv1.Cluster) {
			c.Status.Conditions = []metav1.Condition{{Type: "WorkersAvailable", Status: metav1.ConditionTrue}}
			c.Status.Workers = &clusterv1.WorkersStatus{Replicas: ptr.To(int32(3))}
		}, false},
		{"paused", func(c *clusterv1.Cluster) { c.Spec.Paused = ptr.To(true) }, true},
		{"infrastructure no longer provisioned", func(c *clusterv1.Cluster) { c.Status.Initialization.InfrastructureProvisioned = nil }, true},
		{"another infrastructure", func(c *clusterv1.Cluster) { c.Spec.InfrastructureRef.Name = "other" }, true},
	})
}

// TestTerraformClusterChanged: of a TerraformCluster's updates, only its
// exports and their condition, its cluster and the end of its apply or
// destroy Job bring its machines back.
func TestTerraformClusterChanged(t *testing.T) {
	base := func() *infrav1.TerraformCluster {
		tc := &infrav1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Name: "fleet", Namespace: "default"}}
		tc.Status.Exports = &apiextensionsv1.JSON{Raw: []byte(`{"zone":"a"}`)}
		tc.Status.Conditions = []metav1.Condition{{Type: infrav1.ConditionExportsPublished, Status: metav1.ConditionTrue, Reason: infrav1.ReasonExportsPublished}}
		return tc
	}
	job := func(name string, op infrav1.Operation) func(*infrav1.TerraformCluster) {
		return func(tc *infrav1.TerraformCluster) {
			tc.Status.ActiveJob = &infrav1.ActiveJob{Name: name, Operation: op}
		}
	}
	for _, tt := range []struct {
		name        string
		before, now func(*infrav1.TerraformCluster)
		want        bool
	}{
		{"a plan waits", nil, func(tc *infrav1.TerraformCluster) { tc.Status.Plan = &infrav1.PlanStatus{PlanHash: "p2:x"} }, false},
		{"an apply Job starts", nil, job("fleet-apply-1", infrav1.OperationApply), false},
		{"a drift Job ends", job("fleet-drift-1", infrav1.OperationDrift), nil, false},
		{"a plan Job ends", job("fleet-plan-1", infrav1.OperationPlan), nil, false},
		{"an apply Job ends", job("fleet-apply-1", infrav1.OperationApply), nil, true},
		{"a destroy Job is followed by another", job("fleet-destroy-1", infrav1.OperationDestroy), job("fleet-destroy-2", infrav1.OperationDestroy), true},
		{"new exports", nil, func(tc *infrav1.TerraformCluster) { tc.Status.Exports.Raw = []byte(`{"zone":"b"}`) }, true},
		{"exports no longer published", nil, func(tc *infrav1.TerraformCluster) {
			tc.Status.Exports = nil
			tc.Status.Conditions[0].Status, tc.Status.Conditions[0].Reason = metav1.ConditionFalse, infrav1.ReasonExportsSensitive
		}, true},
		{"another cluster", nil, func(tc *infrav1.TerraformCluster) {
			tc.Labels = map[string]string{infrav1.LabelClusterName: "other"}
		}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			old, now := base(), base()
			if tt.before != nil {
				tt.before(old)
				tt.before(now)
			}
			if tt.now != nil {
				tt.now(now)
			} else {
				now.Status.ActiveJob = nil
			}
			if got := terraformClusterChanged(event.UpdateEvent{ObjectOld: old, ObjectNew: now}); got != tt.want {
				t.Errorf("terraformClusterChanged = %v, want %v", got, tt.want)
			}
		})
	}
}

// update is a change of an object, and whether a predicate lets it
// through.
type update[T client.Object] struct {
	name   string
	change func(T)
	want   bool
}

// checkUpdates runs pred on each update of an object made by base.
func checkUpdates[T client.Object](t *testing.T, pred func(event.UpdateEvent) bool, base func() T, updates []update[T]) {
	t.Helper()
	for _, u := range updates {
		t.Run(u.name, func(t *testing.T) {
			old, now := base(), base()
			u.change(now)
			if got := pred(event.UpdateEvent{ObjectOld: old, ObjectNew: now}); got != u.want {
				t.Errorf("= %v, want %v", got, u.want)
			}
		})
	}
}
