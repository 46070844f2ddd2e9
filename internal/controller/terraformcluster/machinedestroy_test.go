package terraformcluster

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
)

// TestMachineDestroyWithCurrentInputs: a provisioned machine whose
// durable inputs are lost, deleted with its Machine under
// captf.io/destroy-with-current-inputs after its bootstrap data went,
// cannot render its inputs again; it says so (DestroyInputsUnavailable,
// naming the bootstrap data, and a Warning event) instead of waiting as
// for a first apply, and destroys nothing.
func TestMachineDestroyWithCurrentInputs(t *testing.T) {
	h := startMachines(t)
	ctx := context.Background()
	u := h.cluster("gone", false)
	h.exportsCluster(u, "zone-a")
	bootstrap := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "gone-bootstrap", Namespace: "default"}, Data: map[string][]byte{"value": []byte("#cloud-config")}}
	if err := h.c.Create(ctx, bootstrap); err != nil {
		t.Fatal(err)
	}
	tm := h.terraformMachine("gone-0", "gone")
	m := h.capiMachine("gone-0", "gone", "gone-bootstrap", false)
	waitFor(h.harness, tm, "provisioned", func(tm *infrav1.TerraformMachine) bool {
		return tm.Status.Initialization != nil && ptr.Deref(tm.Status.Initialization.Provisioned, false)
	})

	// The bootstrap data goes first (its provider deletes it with the
	// Machine's bootstrap config), then the durable inputs are lost.
	if err := h.c.Delete(ctx, bootstrap); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(tm.DeepCopy())
	tm.Annotations = map[string]string{infrav1.AnnotationDestroyWithCurrentInputs: "true"}
	if err := h.c.Patch(ctx, tm, patch); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: engine.InputsName("tfm", tm.Name), Namespace: "default"}}); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	readyReason(h, tm, infrav1.ReasonDestroyInputsUnavailable)
	c := meta.FindStatusCondition(tm.Status.Conditions, infrav1.ConditionReady)
	if !strings.Contains(c.Message, "bootstrap data") || !strings.Contains(c.Message, infrav1.AnnotationDestroyWithCurrentInputs) {
		t.Errorf("Ready's message does not say what cannot be had: %s", c.Message)
	}
	warned := false
	for _, e := range h.events(tm) {
		warned = warned || (e.Type == corev1.EventTypeWarning && e.Reason == infrav1.ReasonDestroyInputsUnavailable)
	}
	if !warned {
		t.Error("no Warning event DestroyInputsUnavailable")
	}
	for _, j := range h.jobs(tm) {
		if j.Labels[engine.LabelOperation] == string(infrav1.OperationDestroy) {
			t.Errorf("destroy Job %s without the inputs the state was applied with", j.Name)
		}
	}
}
