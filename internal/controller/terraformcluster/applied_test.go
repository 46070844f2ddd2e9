package terraformcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
)

// createRooted creates an object of testdata/provider-root keeping its
// files under root, under Automatic with the destructive-plan guard.
func (h *driftHarness) createRooted(name, root string) *infrav1.TerraformCluster {
	h.t.Helper()
	return h.create(name, infrav1.ApplyAutomatic, "", func(tc *infrav1.TerraformCluster) {
		tc.Spec.Image = providerRootImage
		tc.Spec.Variables = []infrav1.Variable{{Name: "root", Value: &apiextensionsv1.JSON{Raw: []byte(`"` + root + `"`)}}}
		tc.Spec.Drift = infrav1.DriftSpec{IntervalSeconds: ptr.To(int32(0))}
	})
}

// exists reports whether path exists.
func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Stat(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return err == nil
}

// blockedAfterMove changes tc's provider root to moved and waits for the
// guard to stop the apply (it replaces marker): the durable inputs Secret
// now holds inputs that were never applied.
func (h *driftHarness) blockedAfterMove(tc *infrav1.TerraformCluster, moved string) {
	h.t.Helper()
	h.setVar(tc, "root", `"`+moved+`"`)
	h.wait(tc, "the guard stopped the new root", func(tc *infrav1.TerraformCluster) bool {
		return engine.WaitsDestructive(tc) && tc.Status.ActiveJob == nil
	})
	if !strings.Contains(string(h.durableInputs(tc).Data["terraform.tfvars.json"]), moved) {
		h.t.Fatal("the durable inputs Secret does not hold the inputs the guard stopped")
	}
}

// TestDestroyRunsAppliedInputs: a variable that feeds the provider
// configuration (here captftest's root, as a region or an account would)
// changes; the guarded apply writes the new inputs and stops. Deleting the
// object then destroys the resources where the last successful apply made
// them, with the inputs, image and identity it ran. Where those inputs are
// gone, the delete is refused in a condition and an event and the object
// kept, until captf.io/destroy-with-current-inputs says to destroy with
// what it renders now. (Before, the destroy ran the inputs the guard had
// stopped, found nothing under the new root, succeeded, and left a.txt
// behind with no state.)
func TestDestroyRunsAppliedInputs(t *testing.T) {
	h := startDrift(t)
	ctx := context.Background()
	old, moved, old2 := t.TempDir(), t.TempDir(), t.TempDir()

	tc := h.createRooted("rooted", old)
	h.wait(tc, "first apply", ready)
	if !exists(t, filepath.Join(old, "a.txt")) {
		t.Fatal("the first apply made no a.txt under the first root")
	}
	applied := h.durableInputs(tc).Data["main.tf.json"]
	h.blockedAfterMove(tc, moved)
	if s := h.durableInputs(tc); !bytes.Equal(s.Data[engine.KeyAppliedMain], applied) || bytes.Equal(s.Data["main.tf.json"], applied) || s.Annotations[infrav1.AnnotationAppliedImage] == "" {
		t.Fatalf("the durable inputs Secret does not keep what the first apply ran beside the inputs the guard stopped: keys %v, annotations %v", slices.Collect(maps.Keys(s.Data)), s.Annotations)
	}
	if err := h.c.Delete(ctx, tc); err != nil {
		t.Fatal(err)
	}
	h.gone(tc, "the destroy")
	if exists(t, filepath.Join(old, "a.txt")) {
		t.Error("a.txt is left under the root it was applied to: the destroy ran the inputs the guard stopped")
	}

	// The inputs of the last successful apply are gone with the durable
	// Secret: the delete is refused.
	tc = h.createRooted("unknown", old2)
	h.wait(tc, "first apply", ready)
	h.blockedAfterMove(tc, moved)
	h.deleteSecret(engine.InputsName("tfc", tc.Name))
	if err := h.c.Delete(ctx, tc); err != nil {
		t.Fatal(err)
	}
	refused := func(tc *infrav1.TerraformCluster) bool {
		c := condition(tc, infrav1.ConditionReady)
		return c != nil && c.Reason == engine.ReasonDestroyInputsUnknown
	}
	h.wait(tc, "the destroy refused", refused)
	if c := condition(tc, infrav1.ConditionReady); !strings.Contains(c.Message, infrav1.AnnotationDestroyWithCurrentInputs) {
		t.Errorf("the refusal does not name the annotation that allows it: %s", c.Message)
	}
	time.Sleep(3 * time.Second)
	h.wait(tc, "still refused", refused)
	if n := count(h.events(tc), engine.ReasonDestroyInputsUnknown); n != 1 {
		t.Errorf("%d %s events, want 1", n, engine.ReasonDestroyInputsUnknown)
	}
	for _, j := range h.jobs(tc) {
		if j.Labels[engine.LabelOperation] == string(infrav1.OperationDestroy) {
			t.Fatalf("destroy Job %s ran though its inputs are unknown", j.Name)
		}
	}
	h.annotate(tc, infrav1.AnnotationDestroyWithCurrentInputs, "true")
	h.gone(tc, "the destroy with the current inputs")
	if !exists(t, filepath.Join(old2, "a.txt")) {
		t.Error("a.txt under the first root is gone, though the destroy ran with the current inputs, whose root is another")
	}
	// The roots are variable values: they reach no event, and the
	// manager's log holds none.
	managerLog.mu.Lock()
	log := managerLog.buf.String()
	managerLog.mu.Unlock()
	evs, _ := json.Marshal(h.events(tc))
	for _, v := range []string{old2, moved} {
		if strings.Contains(string(evs), v) || strings.Contains(log, v) {
			t.Errorf("the value %s reached an event or the manager log", v)
		}
	}
}
