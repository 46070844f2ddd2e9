package terraformmachine

import (
	"testing"

	"github.com/captf/captf/internal/predicatetest"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
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
	predicatetest.Check(t, machineChanged, base, []predicatetest.Update[*clusterv1.Machine]{
		{Name: "phase and conditions", Change: func(m *clusterv1.Machine) {
			m.Status.Phase = "Provisioning"
			m.Status.Conditions = []metav1.Condition{{Type: clusterv1.MachineInfrastructureReadyCondition, Status: metav1.ConditionFalse}}
		}, Want: false},
		{Name: "bootstrap data", Change: func(m *clusterv1.Machine) { m.Spec.Bootstrap.DataSecretName = ptr.To("fleet-0-bootstrap") }, Want: true},
		{Name: "failure domain", Change: func(m *clusterv1.Machine) { m.Spec.FailureDomain = "b" }, Want: true},
		{Name: "control plane label", Change: func(m *clusterv1.Machine) { m.Labels[clusterv1.MachineControlPlaneLabel] = "" }, Want: true},
	})
}
