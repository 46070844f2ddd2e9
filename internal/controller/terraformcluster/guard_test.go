package terraformcluster

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
)

// guarded reports whether a Job runs with --guard.
func guarded(j *batchv1.Job) bool {
	return slices.Contains(j.Spec.Template.Spec.Containers[0].Command, "--guard")
}

// newestApply is tc's newest apply Job.
func (h *driftHarness) newestApply(tc *infrav1.TerraformCluster) *batchv1.Job {
	h.t.Helper()
	var newest *batchv1.Job
	for _, j := range h.jobs(tc) {
		if j.Labels[engine.LabelOperation] == string(infrav1.OperationApply) {
			if newest == nil || newest.Annotations[engine.AnnotationCreatedAt] < j.Annotations[engine.AnnotationCreatedAt] {
				newest = j.DeepCopy()
			}
		}
	}
	if newest == nil {
		h.t.Fatal("no apply Job")
	}
	return newest
}

func (h *driftHarness) mode(tc *infrav1.TerraformCluster, file string) os.FileMode {
	h.t.Helper()
	info, err := os.Stat(h.path(tc, file))
	if err != nil {
		h.t.Fatal(err)
	}
	return info.Mode().Perm()
}

// blockedPlan waits for the guard to stop a plan and for that plan to
// wait for approval as a TerraformPlan with reason Destructive.
func (h *driftHarness) blockedPlan(tc *infrav1.TerraformCluster, entry string) (*infrav1.PlanStatus, *infrav1.TerraformPlan) {
	h.t.Helper()
	h.wait(tc, "the guard to block", func(tc *infrav1.TerraformCluster) bool {
		return count(h.events(tc), infrav1.EventDestructivePlanBlocked) > 0 && blockedEventNames(h, tc, entry)
	})
	p := h.waitingPlan(tc, infrav1.ReasonPlanAwaitingApproval)
	if p.Reason != infrav1.ReasonDestructive || !slices.Contains(p.Resources, entry) {
		h.t.Fatalf("waiting plan %+v", p)
	}
	c := condition(tc, infrav1.ConditionApplyJobSucceeded)
	if !strings.Contains(c.Message, infrav1.AnnotationApproveDestructivePlan+"="+p.PlanHash) {
		h.t.Errorf("the condition does not give the approval command: %s", c.Message)
	}
	var plan infrav1.TerraformPlan
	if err := h.c.Get(context.Background(), client.ObjectKey{Namespace: tc.Namespace, Name: tc.Status.PendingPlanRef.Name}, &plan); err != nil {
		h.t.Fatal(err)
	}
	if plan.Spec.Reason != infrav1.ReasonDestructive || plan.Labels[infrav1.LabelDestructive] != "true" || plan.Labels[infrav1.LabelPlanReason] != "Destructive" {
		h.t.Fatalf("TerraformPlan %s: reason %q, labels %v", plan.Name, plan.Spec.Reason, plan.Labels)
	}
	return p, &plan
}

func blockedEventNames(h *driftHarness, tc *infrav1.TerraformCluster, entry string) bool {
	for _, e := range h.events(tc) {
		if e.Reason == infrav1.EventDestructivePlanBlocked && e.Type == "Warning" && strings.Contains(e.Note, entry) {
			return true
		}
	}
	return false
}

// TestDestructiveGuard: under Automatic, an apply that would delete or
// replace applies nothing; that plan waits for approval and applies once
// approved, exactly as reviewed; a plan that moved after the approval is
// refused; lifecycle prevent_destroy still holds; the guard can be
// turned off.
func TestDestructiveGuard(t *testing.T) {
	h := startDrift(t)
	tc := h.createDrift("guard", driftImage, infrav1.ApplyAutomatic, "", 0)
	h.wait(tc, "first apply", ready)
	if j := h.newestApply(tc); guarded(j) {
		t.Error("the first apply is guarded: there is nothing to destroy yet")
	}

	// An update applies under the guard, which mounts no plan key.
	h.setVar(tc, "content", `"`+driftCanary+`-2"`)
	h.wait(tc, "a guarded update", func(tc *infrav1.TerraformCluster) bool {
		return ready(tc) && h.content(tc, "a.txt") == driftCanary+"-2"
	})
	if j := h.newestApply(tc); !guarded(j) {
		t.Error("the update's apply was not guarded")
	} else if mounted, _ := planKeyMount(j); mounted {
		t.Error("the guard's run mounts the plan key")
	}

	// A replace is stopped; its plan waits.
	p, plan := h.replaceApproved(tc)
	if _, ok := tc.Annotations[infrav1.AnnotationApproveDestructivePlan]; ok {
		t.Error("the approval was not consumed")
	}
	if j := h.newestApply(tc); j.Annotations[infrav1.AnnotationApprovedPlan] != p.PlanHash {
		t.Errorf("the approved apply does not expect %s: %v", p.PlanHash, j.Annotations)
	} else if mounted, _ := planKeyMount(j); !mounted {
		t.Error("the approved apply does not mount the plan key")
	}
	if err := h.c.Get(context.Background(), client.ObjectKeyFromObject(plan), plan); err != nil || plan.Status.Phase != infrav1.PlanApplied {
		t.Errorf("TerraformPlan %s: %v %s", plan.Name, err, plan.Status.Phase)
	}

	// A delete is stopped; the world moves after the approval: refused.
	h.setVar(tc, "extra", `false`)
	p, _ = h.blockedPlan(tc, "module.main.captftest_file.e[0] (delete)")
	h.edit(tc, "a.txt")
	h.annotate(tc, infrav1.AnnotationApproveDestructivePlan, p.PlanHash)
	h.wait(tc, "the moved plan refused", func(tc *infrav1.TerraformCluster) bool {
		c := condition(tc, infrav1.ConditionApplyJobSucceeded)
		return c != nil && c.Reason == infrav1.ReasonPlanChanged && tc.Status.Plan != nil && tc.Status.Plan.PlanHash != p.PlanHash
	})
	if _, err := os.Stat(h.path(tc, "e.txt")); err != nil {
		t.Fatalf("e.txt deleted by a refused apply: %v", err)
	}
	if tc.Status.Plan.Reason != infrav1.ReasonDestructive {
		t.Fatalf("the new plan: %+v", tc.Status.Plan)
	}
	h.annotate(tc, infrav1.AnnotationApproveDestructivePlan, tc.Status.Plan.PlanHash)
	h.wait(tc, "the approved delete", func(tc *infrav1.TerraformCluster) bool { return ready(tc) && tc.Status.Plan == nil })
	if _, err := os.Stat(h.path(tc, "e.txt")); !os.IsNotExist(err) {
		t.Fatalf("e.txt after the approved delete: %v", err)
	}
	if got := h.content(tc, "a.txt"); got != driftCanary+"-2" {
		t.Fatalf("a.txt after the approved plan: %q", got)
	}

	// prevent_destroy fails the plan; nothing is destroyed.
	h.setVar(tc, "kmode", `"0600"`)
	h.wait(tc, "prevent_destroy to fail the run", func(tc *infrav1.TerraformCluster) bool {
		c := condition(tc, infrav1.ConditionApplyJobSucceeded)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == engine.ReasonApplyFailed
	})
	if m := h.mode(tc, "k.txt"); m != 0o644 {
		t.Fatalf("k.txt replaced despite prevent_destroy: %o", m)
	}
	h.setVar(tc, "kmode", `"0644"`)
	h.wait(tc, "back to a plan that keeps k", ready)

	// With the guard off, a replace applies at once.
	before := tc.DeepCopy()
	tc.Spec.AllowDestructivePlans = true
	tc.Spec.Variables = slices.DeleteFunc(tc.Spec.Variables, func(v infrav1.Variable) bool { return v.Name == "mode" })
	if err := h.c.Patch(context.Background(), tc, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	h.wait(tc, "an unguarded replace", func(tc *infrav1.TerraformCluster) bool { return ready(tc) && h.mode(tc, "b.txt") == 0o644 })
	if j := h.newestApply(tc); guarded(j) {
		t.Error("the apply is guarded with spec.allowDestructivePlans")
	}
	h.noValues(tc)
}

// TestInterruptedApply: an apply Job deleted while it runs leaves the
// object marked, and the next apply, though the object never applied,
// plans first under the guard; the mark goes after it succeeded.
func TestInterruptedApply(t *testing.T) {
	h := startDrift(t)
	tc := h.createDrift("interrupted", driftImage, infrav1.ApplyAutomatic, "", 0, func(tc *infrav1.TerraformCluster) {
		tc.Spec.Variables = append(tc.Spec.Variables, infrav1.Variable{Name: "sleep", Value: &apiextensionsv1.JSON{Raw: []byte(`15`)}})
	})
	h.wait(tc, "the first apply to run", func(tc *infrav1.TerraformCluster) bool {
		return tc.Status.ActiveJob != nil && tc.Status.ActiveJob.Operation == infrav1.OperationApply
	})
	first := tc.Status.ActiveJob.Name
	if j := h.newestApply(tc); guarded(j) {
		t.Fatal("the first apply is guarded")
	}
	time.Sleep(3 * time.Second)
	// Background: no garbage collector runs here to lift the orphan
	// finalizer the API server's default for Jobs would add.
	if err := h.c.Delete(context.Background(), &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: first, Namespace: tc.Namespace}},
		client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	h.wait(tc, "the interrupted mark", func(tc *infrav1.TerraformCluster) bool { return engine.Interrupted(tc) })
	h.wait(tc, "the next apply", func(tc *infrav1.TerraformCluster) bool {
		for _, j := range h.jobs(tc) {
			if j.Labels[engine.LabelOperation] == string(infrav1.OperationApply) && j.Name != first {
				return true
			}
		}
		return false
	})
	if j := h.newestApply(tc); !guarded(j) {
		t.Fatalf("the apply after an interrupted one is not guarded: %v", j.Spec.Template.Spec.Containers[0].Command)
	}
	// The interrupted apply may have left a resource tainted (its
	// provisioner stopped), which the guarded apply replaces: that waits
	// for an approval, given here.
	h.wait(tc, "applied, the mark gone", func(tc *infrav1.TerraformCluster) bool {
		if engine.WaitsDestructive(tc) && tc.Annotations[infrav1.AnnotationApproveDestructivePlan] != tc.Status.Plan.PlanHash {
			h.annotate(tc, infrav1.AnnotationApproveDestructivePlan, tc.Status.Plan.PlanHash)
		}
		return ready(tc) && !engine.Interrupted(tc)
	})
}

// TestDestructiveGuardTofu: the guard stops a replace and applies it once
// approved, with tofu.
func TestDestructiveGuardTofu(t *testing.T) {
	h := startDrift(t)
	tc := h.createDrift("guard-tofu", driftImageTofu, infrav1.ApplyAutomatic, "", 0)
	h.wait(tc, "first apply", ready)
	h.replaceApproved(tc)
	h.noValues(tc)
}

// replaceApproved changes the mode of b.txt, which replaces it: the guard
// stops the plan, nothing is replaced until the approval of exactly that
// plan, then it is.
func (h *driftHarness) replaceApproved(tc *infrav1.TerraformCluster) (*infrav1.PlanStatus, *infrav1.TerraformPlan) {
	h.t.Helper()
	h.setVar(tc, "mode", `"0600"`)
	p, plan := h.blockedPlan(tc, "module.main.captftest_file.b (replace)")
	if m := h.mode(tc, "b.txt"); m != 0o644 {
		h.t.Fatalf("b.txt replaced before approval: %o", m)
	}
	h.annotate(tc, infrav1.AnnotationApproveDestructivePlan, p.PlanHash)
	h.wait(tc, "the approved replace", func(tc *infrav1.TerraformCluster) bool { return ready(tc) && tc.Status.Plan == nil })
	if m := h.mode(tc, "b.txt"); m != 0o600 {
		h.t.Fatalf("b.txt after the approved replace: %o", m)
	}
	return p, plan
}
