package terraformcluster

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/testenv"
	"github.com/captf/captf/internal/testnode"
)

// The paths where the gate once trusted too little evidence: each test
// here failed against the manager before its fix.

// expects is the --expect-plan of an apply Job, "" for none.
func expects(j *batchv1.Job) string {
	for _, a := range j.Spec.Template.Spec.Containers[0].Command {
		if v, ok := strings.CutPrefix(a, "--expect-plan="); ok {
			return v
		}
	}
	return ""
}

// ungatedApplies names the apply Jobs of tc other than except that carry
// no --expect-plan.
func (h *harness) ungatedApplies(tc *infrav1.TerraformCluster, except ...string) []string {
	var out []string
	for _, j := range h.jobs(tc) {
		if j.Labels[engine.LabelOperation] == string(infrav1.OperationApply) && expects(&j) == "" && !slices.Contains(except, j.Name) {
			out = append(out, j.Name)
		}
	}
	return out
}

// deleteSecret deletes a Secret of the namespace default.
func (h *harness) deleteSecret(name string) {
	h.t.Helper()
	if err := h.c.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}); err != nil {
		h.t.Fatal(err)
	}
}

// TestAcceptEmptyStateKeepsTheGate: a Manual object that applied (and was
// backed up) loses both its state Secret and its durable inputs Secret
// with the applied marker; its next change stops at StateLost, and
// accepting an empty state approves nothing: the apply waits for an
// approved plan, because the backup is a sign of a past as much as the
// marker. (Before, the first-apply check read only the marker and the
// state, and an apply without --expect-plan started.)
func TestAcceptEmptyStateKeepsTheGate(t *testing.T) {
	h := start(t)
	tc := h.create("accepted", infrav1.ApplyManual, "small")
	h.wait(tc, "first apply, backed up", func(tc *infrav1.TerraformCluster) bool { return ready(tc) && len(tc.Status.StateBackups) > 0 })
	first := h.jobs(tc)[0].Name
	h.deleteSecret(engine.StateSecretName("tfc", tc.Name))
	h.deleteSecret(engine.InputsName("tfc", tc.Name))
	h.setSize(tc, "large")
	h.wait(tc, "the lost state guarded", stateLostWith)
	if c := condition(tc, infrav1.ConditionApplyJobSucceeded); !strings.Contains(c.Message, engine.BackupName("tfc", tc.Name, tc.Status.StateBackups[0].Serial)) {
		t.Errorf("the StateLost message does not name the backup it found: %s", c.Message)
	}

	h.annotate(tc, infrav1.AnnotationAcceptEmptyState, "true")
	h.wait(tc, "a plan waiting, or an apply", func(tc *infrav1.TerraformCluster) bool {
		if ungated := h.ungatedApplies(tc, first); len(ungated) > 0 {
			t.Fatalf("apply Jobs without --expect-plan after accepting an empty state: %v", ungated)
		}
		c := condition(tc, infrav1.ConditionApplyJobSucceeded)
		return tc.Status.Plan != nil && tc.Status.ActiveJob == nil && c != nil && c.Reason == infrav1.ReasonPlanAwaitingApproval
	})
	p := tc.Status.Plan
	h.approve(tc, p.PlanHash)
	h.wait(tc, "the approved apply from an empty state", func(tc *infrav1.TerraformCluster) bool {
		_, accepted := tc.Annotations[infrav1.AnnotationAcceptEmptyState]
		return ready(tc) && !accepted
	})
	if ungated := h.ungatedApplies(tc, first); len(ungated) > 0 {
		t.Fatalf("apply Jobs without --expect-plan: %v", ungated)
	}
}

// heldImage is a module image the source node of TestMovedMidFirstApply
// cannot pull, so that the first apply's Job runs (waits) for as long as
// the test needs; the target's node has it.
const heldImage = "example.test/module:held"

// TestMovedMidFirstApply: an object copied to another management cluster
// while its first apply runs arrives with the source's block-move
// annotation and neither the state nor any other sign of its past (they
// move only after a successful apply). The target treats it as having
// applied before: it stops at StateLost, starts no Job, and keeps the sign
// as captf.io/moved-mid-run when it removes block-move, so the stop holds
// on every later reconcile. (Before, the target applied everything again
// beside what the cut apply made.)
func TestMovedMidFirstApply(t *testing.T) {
	src := start(t)
	module, _ := filepath.Abs("../../runner/testdata/module")
	dst := startEnv(t, testenv.Start(t, "../../.."), nil, func(n *testnode.Node) {
		n.Images[heldImage] = append([]testnode.Image{{Path: infrav1.PathModule, Dir: module}}, n.Images[moduleImage][1:]...)
	})
	ctx := context.Background()
	tc := src.create("moving-first", infrav1.ApplyAutomatic, "small", func(tc *infrav1.TerraformCluster) { tc.Spec.Image = heldImage })
	src.wait(tc, "the first apply runs", func(tc *infrav1.TerraformCluster) bool {
		_, blocking := tc.Annotations[engine.AnnotationBlockMove]
		return tc.Status.ActiveJob != nil && blocking
	})

	// What clusterctl copies: metadata and spec, never status.
	copied := &infrav1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{
		Name: tc.Name, Namespace: tc.Namespace, Labels: tc.Labels, Annotations: tc.Annotations,
	}, Spec: tc.Spec}
	if err := dst.c.Create(ctx, copied); err != nil {
		t.Fatal(err)
	}
	dst.wait(copied, "the copy stopped at StateLost", func(tc *infrav1.TerraformCluster) bool {
		if jobs := dst.jobs(tc); len(jobs) > 0 {
			t.Fatalf("the copy started Job %s, want none", jobs[0].Name)
		}
		_, blocking := tc.Annotations[engine.AnnotationBlockMove]
		return stateLostWith(tc) && !blocking && tc.Annotations[infrav1.AnnotationMovedMidRun] == "true"
	})
	if c := condition(copied, infrav1.ConditionApplyJobSucceeded); !strings.Contains(c.Message, infrav1.AnnotationAcceptEmptyState) {
		t.Errorf("the StateLost message does not say what to do: %s", c.Message)
	}
	// Reconciles after the sign moved to its own annotation.
	dst.setVar(copied, "label", `"later"`)
	time.Sleep(3 * time.Second)
	dst.wait(copied, "still at StateLost", stateLostWith)
	if jobs := dst.jobs(copied); len(jobs) > 0 {
		t.Fatalf("the copy started %d Jobs, want none: %s", len(jobs), jobs[0].Name)
	}
}

// TestDeleteLostState: deleting an applied object whose state Secret is
// lost destroys nothing and releases nothing: it stops at StateLost with a
// Warning event and keeps its finalizer; a restore of the newest backup
// brings the state back, and the destroy then finds and removes what the
// object made. A second object is released without destroy once
// captf.io/accept-empty-state says so. (Before, both were released at once,
// silently, leaving everything they made behind.)
func TestDeleteLostState(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	restored := h.create("lost-restored", infrav1.ApplyAutomatic, "small")
	accepted := h.create("lost-accepted", infrav1.ApplyAutomatic, "small")
	for _, tc := range []*infrav1.TerraformCluster{restored, accepted} {
		h.wait(tc, "first apply, backed up", func(tc *infrav1.TerraformCluster) bool { return ready(tc) && backedUpSerial(tc) >= 0 })
		h.deleteSecret(engine.StateSecretName("tfc", tc.Name))
		if err := h.c.Delete(ctx, tc); err != nil {
			t.Fatal(err)
		}
		h.wait(tc, "the deletion stopped at StateLost", stateLostWith)
		// One event says the deletion stopped. A reconcile between the
		// Secret's delete and the object's may have announced the loss
		// before the deletion too: that one is another event.
		deleted := 0
		for _, e := range h.events(tc) {
			if e.Reason == engine.ReasonStateLost && strings.HasPrefix(e.Note, "The object is deleted") {
				deleted++
			}
		}
		if deleted != 1 {
			t.Errorf("%s: %d StateLost events about the deletion, want 1", tc.Name, deleted)
		}
	}
	time.Sleep(3 * time.Second)
	for _, tc := range []*infrav1.TerraformCluster{restored, accepted} {
		h.wait(tc, "still held", func(tc *infrav1.TerraformCluster) bool {
			return slices.Contains(tc.Finalizers, engine.Finalizer) && stateLostWith(tc)
		})
	}

	serial := restored.Status.StateBackups[0].Serial
	h.annotate(restored, infrav1.AnnotationRestoreState, strconv.FormatInt(serial, 10))
	h.gone(restored, "restored, then destroyed")
	var ops []string
	for _, j := range h.jobs(restored) {
		ops = append(ops, j.Labels[engine.LabelOperation])
	}
	if !slices.Contains(ops, string(infrav1.OperationRestore)) || !slices.Contains(ops, string(infrav1.OperationDestroy)) {
		t.Errorf("Jobs of the restored object: %v, want a restore and a destroy", ops)
	}

	h.annotate(accepted, infrav1.AnnotationAcceptEmptyState, "true")
	h.gone(accepted, "released without destroy")
	for _, j := range h.jobs(accepted) {
		if j.Labels[engine.LabelOperation] == string(infrav1.OperationDestroy) {
			t.Errorf("a destroy Job ran for the object released without destroy: %s", j.Name)
		}
	}
}

// TestPolicySwitchDropsUnstartedJob: a guarded apply under Automatic whose
// image cannot be pulled has not started when the object switches to
// Manual. It is dropped: once the image can be pulled, what runs is a plan
// that waits for approval, never the old apply. (Before, the Job survived
// the switch, since the policy is no input, and applied without plan or
// approval as soon as its pod could run.)
func TestPolicySwitchDropsUnstartedJob(t *testing.T) {
	h := start(t)
	tc := h.create("switched", infrav1.ApplyAutomatic, "small")
	h.wait(tc, "first apply", ready)
	first := h.jobs(tc)[0].Name
	const later = "example.test/module:later"
	before := tc.DeepCopy()
	// A change of a resource too: an empty plan would need no approval.
	tc.Spec.Image = later
	tc.Spec.Variables[0].Value.Raw = []byte(`"large"`)
	if err := h.c.Patch(context.Background(), tc, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	h.wait(tc, "the guarded apply stuck on its image", func(tc *infrav1.TerraformCluster) bool {
		c := condition(tc, infrav1.ConditionApplyJobSucceeded)
		return c != nil && c.Reason == engine.ReasonImagePullFailed
	})
	stuck := tc.Status.ActiveJob.Name

	before = tc.DeepCopy()
	tc.Spec.ApplyPolicy = infrav1.ApplyManual
	if err := h.c.Patch(context.Background(), tc, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for slices.ContainsFunc(h.jobs(tc), func(j batchv1.Job) bool { return j.Name == stuck && j.DeletionTimestamp == nil }) {
		if time.Now().After(deadline) {
			t.Fatalf("Job %s, created under Automatic, still stands after the switch to Manual", stuck)
		}
		time.Sleep(200 * time.Millisecond)
	}
	h.node.Retag(later, h.node.Images[moduleImage])
	t.Cleanup(func() {
		if t.Failed() {
			for _, j := range h.jobs(tc) {
				t.Logf("Job %s: %s, %v, %+v", j.Name, j.Spec.Template.Spec.Containers[0].Image, j.Annotations, j.Status)
			}
		}
	})
	h.waitingPlan(tc, infrav1.ReasonPlanAwaitingApproval)
	if ungated := h.ungatedApplies(tc, first); len(ungated) > 0 && !(len(ungated) == 1 && ungated[0] == stuck) {
		t.Fatalf("apply Jobs without --expect-plan after the switch: %v", ungated)
	}
	if run := tc.Status.LastRun; run == nil || run.Job == stuck || run.Operation != infrav1.OperationPlan {
		t.Fatalf("last run %+v, want the plan", run)
	}
}
