package capi

import (
	"testing"

	"github.com/captf/captf/internal/predicatetest"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/event"

	infrav1 "github.com/captf/captf/api/v1alpha1"
)

// TestClusterChanged: of a Cluster's updates, only its pause, its
// infrastructure provisioned and its infrastructureRef bring its machines
// and pools back; the status Cluster API writes as machines change does
// not.
func TestClusterChanged(t *testing.T) {
	base := func() *clusterv1.Cluster {
		c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "fleet", Namespace: "default"}}
		c.Spec.InfrastructureRef = clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "TerraformCluster", Name: "fleet"}
		c.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
		return c
	}
	predicatetest.Check(t, ClusterChanged, base, []predicatetest.Update[*clusterv1.Cluster]{
		{Name: "machine counts and conditions", Change: func(c *clusterv1.Cluster) {
			c.Status.Conditions = []metav1.Condition{{Type: "WorkersAvailable", Status: metav1.ConditionTrue}}
			c.Status.Workers = &clusterv1.WorkersStatus{Replicas: ptr.To(int32(3))}
		}, Want: false},
		{Name: "paused", Change: func(c *clusterv1.Cluster) { c.Spec.Paused = ptr.To(true) }, Want: true},
		{Name: "infrastructure no longer provisioned", Change: func(c *clusterv1.Cluster) { c.Status.Initialization.InfrastructureProvisioned = nil }, Want: true},
		{Name: "another infrastructure", Change: func(c *clusterv1.Cluster) { c.Spec.InfrastructureRef.Name = "other" }, Want: true},
	})
}

// TestTerraformClusterChanged: of a TerraformCluster's updates, only its
// exports and their condition, its cluster and the end of its apply or
// destroy Job bring its machines and pools back.
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
			if got := TerraformClusterChanged(event.UpdateEvent{ObjectOld: old, ObjectNew: now}); got != tt.want {
				t.Errorf("TerraformClusterChanged = %v, want %v", got, tt.want)
			}
		})
	}
}
