package terraformcluster

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
)

// TestFirstApplyReady: Ready says where the first apply stands. A new
// TerraformCluster has Ready False Provisioning in every version that
// names its first apply as active, never no Ready; a machine whose first
// apply failed says the failure in Ready (ApplyFailed), which Cluster
// API shows as its Machine's InfrastructureReady, not that the first
// apply runs.
func TestFirstApplyReady(t *testing.T) {
	h := startMachines(t)
	ctx := context.Background()
	clusters := record[*infrav1.TerraformCluster](h.harness, &infrav1.TerraformClusterList{}, "default")
	u := h.cluster("first", false)
	tc := h.exportsCluster(u, "zone-a")
	applies := 0
	for _, v := range clusters.all() {
		if v.Name != tc.Name || v.Status.ActiveJob == nil || v.Status.ActiveJob.Operation != infrav1.OperationApply {
			continue
		}
		applies++
		if c := meta.FindStatusCondition(v.Status.Conditions, infrav1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse || c.Reason != infrav1.ReasonProvisioning {
			t.Errorf("while its first apply %s runs, the cluster's Ready is %+v, want False %s", v.Status.ActiveJob.Name, c, infrav1.ReasonProvisioning)
			break
		}
	}
	if applies == 0 {
		t.Error("no version of the cluster named its first apply as active: the check proves nothing")
	}

	if err := h.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "first-bootstrap", Namespace: "default"}, Data: map[string][]byte{"value": []byte("#cloud-config")}}); err != nil {
		t.Fatal(err)
	}
	tm := h.terraformMachine("first-0", "first", func(tm *infrav1.TerraformMachine) {
		tm.Spec.Variables = append(tm.Spec.Variables, infrav1.Variable{Name: "fail_apply", Value: &apiextensionsv1.JSON{Raw: []byte(`true`)}})
	})
	m := h.capiMachine("first-0", "first", "first-bootstrap", false)
	readyReason(h, tm, engine.ReasonApplyFailed)
	h.waitMachine(m, "InfrastructureReady False "+engine.ReasonApplyFailed, func(m *clusterv1.Machine) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineInfrastructureReadyCondition)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == engine.ReasonApplyFailed
	})
}
