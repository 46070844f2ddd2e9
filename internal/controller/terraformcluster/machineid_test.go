package terraformcluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
)

// TestMachineProviderIDFromState: with Cluster API's controllers, a
// machine is reported provisioned only with the provider ID its own
// state's provider_id output holds. One created with a victim Node's ID
// (as a template or a create past the webhook would give it, with
// accept-empty-state) applies, but is never provisioned, and its Machine
// never gets the ID; one whose module publishes no provider_id ends in a
// failed apply that names the output, not in Ready True with a Machine
// that waits forever.
func TestMachineProviderIDFromState(t *testing.T) {
	h := startMachines(t)
	ctx := context.Background()
	const victim = "captftest:///elsewhere/victim-node"
	u := h.cluster("ids", false)
	h.exportsCluster(u, "zone-a")
	if err := h.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ids-bootstrap", Namespace: "default"}, Data: map[string][]byte{"value": []byte("#cloud-config")}}); err != nil {
		t.Fatal(err)
	}

	stolen := h.terraformMachine("ids-stolen", "ids", func(tm *infrav1.TerraformMachine) {
		tm.Spec.ProviderID = victim
		tm.Annotations = map[string]string{infrav1.AnnotationAcceptEmptyState: "true"}
	})
	stolenMachine := h.capiMachine("ids-stolen", "ids", "ids-bootstrap", false)
	none := h.terraformMachine("ids-none", "ids", func(tm *infrav1.TerraformMachine) {
		tm.Spec.Variables = append(tm.Spec.Variables, infrav1.Variable{Name: "omit_provider_id", Value: &apiextensionsv1.JSON{Raw: []byte(`true`)}})
	})
	noneMachine := h.capiMachine("ids-none", "ids", "ids-bootstrap", false)

	for _, c := range []struct {
		tm      *infrav1.TerraformMachine
		m       *clusterv1.Machine
		reason  string
		message string
	}{
		{stolen, stolenMachine, infrav1.ReasonProviderIDMismatch, "spec.providerID is not the provider_id output of the object's own state"},
		{none, noneMachine, infrav1.ReasonProviderIDMissing, "the state has no provider_id output"},
	} {
		waitFor(h.harness, c.tm, "Ready False "+c.reason, func(tm *infrav1.TerraformMachine) bool {
			r := meta.FindStatusCondition(tm.Status.Conditions, infrav1.ConditionReady)
			return r != nil && r.Status == metav1.ConditionFalse && r.Reason == c.reason
		})
		if a := meta.FindStatusCondition(c.tm.Status.Conditions, infrav1.ConditionApplyJobSucceeded); a == nil || a.Status != metav1.ConditionFalse || a.Reason != c.reason || !strings.Contains(a.Message, c.message) {
			t.Errorf("%s: ApplyJobSucceeded %+v, want False %s saying %q", c.tm.Name, a, c.reason, c.message)
		}
		if c.tm.Status.Ready || (c.tm.Status.Initialization != nil && ptr.Deref(c.tm.Status.Initialization.Provisioned, false)) {
			t.Errorf("%s: reported provisioned: ready %v, initialization %+v", c.tm.Name, c.tm.Status.Ready, c.tm.Status.Initialization)
		}
	}
	// The apply ran: the module's file is there.
	if _, err := os.Stat(filepath.Join(h.files, "ids", "ids-stolen.txt")); err != nil {
		t.Errorf("the stolen-ID machine's apply: %v", err)
	}

	// Cluster API's Machine controller, running all along, read no ID.
	time.Sleep(3 * time.Second)
	for _, m := range []*clusterv1.Machine{stolenMachine, noneMachine} {
		if err := h.c.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			t.Fatal(err)
		}
		if m.Spec.ProviderID != "" || ptr.Deref(m.Status.Initialization.InfrastructureProvisioned, false) {
			t.Errorf("Machine %s: providerID %q, infrastructure provisioned %v", m.Name, m.Spec.ProviderID, ptr.Deref(m.Status.Initialization.InfrastructureProvisioned, false))
		}
		c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineInfrastructureReadyCondition)
		if c == nil || c.Status == metav1.ConditionTrue {
			t.Errorf("Machine %s: InfrastructureReady %+v", m.Name, c)
		}
	}
}
