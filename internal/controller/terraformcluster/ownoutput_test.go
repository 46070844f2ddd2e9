package terraformcluster

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/testnode"
)

// TestInputsOnlyChangeAppliesWithoutApproval: under Manual, new inputs that
// change nothing the module plans (the same module under another image
// reference) make an empty plan — captf's own inputs hash output is not a
// change — so they apply, with the image the plan ran pinned to its digest,
// with no approval, no PlanReady or PlanApproved and no TerraformPlan, and
// the state records the new inputs hash.
func TestInputsOnlyChangeAppliesWithoutApproval(t *testing.T) {
	h := start(t)
	tc := h.create("samemodule", infrav1.ApplyManual, "small")
	h.wait(tc, "first apply", ready)
	stateBefore := h.stateHash(tc)
	jobsBefore := len(h.jobs(tc))

	before := tc.DeepCopy()
	tc.Spec.Image = moduleImage2
	if err := h.c.Patch(context.Background(), tc, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	h.wait(tc, "applied without approval", func(tc *infrav1.TerraformCluster) bool {
		return ready(tc) && h.lastJobImage(tc) == engine.Pin(moduleImage2, testnode.Digest(moduleImage2)) && tc.Status.LastRun != nil && tc.Status.LastRun.Operation == infrav1.OperationApply
	})
	if got := h.stateHash(tc); got == stateBefore || got == "" {
		t.Errorf("the state records %q after the apply, as before (%q)", got, stateBefore)
	}
	if tc.Status.Plan != nil || tc.Status.PendingPlanRef != nil {
		t.Errorf("a plan waits: %+v %+v", tc.Status.Plan, tc.Status.PendingPlanRef)
	}
	if plans := h.plans(tc); len(plans) != 0 {
		t.Errorf("%d TerraformPlans for an empty plan", len(plans))
	}
	evs := h.events(tc)
	if n, m := count(evs, infrav1.EventPlanReady), count(evs, infrav1.EventPlanApproved); n+m != 0 {
		t.Errorf("events %v: an empty plan needs no approval", reasons(evs))
	}
	// One plan Job and one apply Job.
	if n := len(h.jobs(tc)) - jobsBefore; n != 2 {
		t.Errorf("%d Jobs for the change, want a plan and an apply", n)
	}
}
