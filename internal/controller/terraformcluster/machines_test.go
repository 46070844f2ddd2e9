package terraformcluster

import (
	"context"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
)

// TestDeletionWaitsForMachines: a deleted TerraformCluster destroys
// nothing while a TerraformMachine or a TerraformMachinePool of its
// cluster remains (Ready=False, MachinesRemain, naming them); once the
// last is gone it is destroyed and released, brought back by the watch of
// pools, not by the ten-minute re-check. A machine of another cluster
// does not hold it.
func TestDeletionWaitsForMachines(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	tc := h.create("holding", infrav1.ApplyAutomatic, "small")
	h.wait(tc, "first apply", ready)
	machine := func(name, cluster string) *infrav1.TerraformMachine {
		m := &infrav1.TerraformMachine{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{infrav1.LabelClusterName: cluster}},
			Spec: infrav1.TerraformMachineSpec{RunnerSpec: infrav1.RunnerSpec{Image: moduleImage,
				Variables: []infrav1.Variable{{Name: "size", Value: &apiextensionsv1.JSON{Raw: []byte(`"small"`)}}}}},
		}
		if err := h.c.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	node := machine("holding-node-0", "holding")
	machine("other-node-0", "other")
	pool := &infrav1.TerraformMachinePool{
		ObjectMeta: metav1.ObjectMeta{Name: "holding-pool-0", Namespace: "default", Labels: map[string]string{infrav1.LabelClusterName: "holding"}},
		Spec:       infrav1.TerraformMachinePoolSpec{RunnerSpec: infrav1.RunnerSpec{Image: moduleImage}},
	}
	if err := h.c.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}

	if err := h.c.Delete(ctx, tc); err != nil {
		t.Fatal(err)
	}
	h.wait(tc, "the deletion waits for the machine", func(tc *infrav1.TerraformCluster) bool {
		c := condition(tc, infrav1.ConditionReady)
		return c != nil && c.Reason == infrav1.ReasonMachinesRemain && strings.Contains(c.Message, "TerraformMachine holding-node-0") &&
			strings.Contains(c.Message, "TerraformMachinePool holding-pool-0") && !strings.Contains(c.Message, "other-node-0")
	})
	time.Sleep(3 * time.Second)
	for _, j := range h.jobs(tc) {
		if j.Labels[engine.LabelOperation] == string(infrav1.OperationDestroy) {
			t.Fatalf("destroy Job %s started while a machine remains", j.Name)
		}
	}

	if err := h.c.Delete(ctx, node); err != nil {
		t.Fatal(err)
	}
	h.wait(tc, "the deletion waits for the pool alone", func(tc *infrav1.TerraformCluster) bool {
		c := condition(tc, infrav1.ConditionReady)
		return c != nil && c.Reason == infrav1.ReasonMachinesRemain && strings.Contains(c.Message, "(1: TerraformMachinePool holding-pool-0)") && strings.Contains(c.Message, "holding-pool-0")
	})
	deleted := time.Now()
	if err := h.c.Delete(ctx, pool); err != nil {
		t.Fatal(err)
	}
	h.gone(tc, "destroyed once the pool is gone")
	if took := time.Since(deleted); took > engine.Recheck/2 {
		t.Errorf("released %s after the pool went: the re-check, not the watch", took)
	}
	var destroyed bool
	for _, j := range h.jobs(tc) {
		destroyed = destroyed || (j.Labels[engine.LabelOperation] == string(infrav1.OperationDestroy) && j.Status.Succeeded == 1)
	}
	if !destroyed {
		t.Error("no successful destroy Job")
	}
	var left infrav1.TerraformMachine
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "other-node-0"}, &left); err != nil {
		t.Errorf("the other cluster's machine: %v", err)
	}
}
