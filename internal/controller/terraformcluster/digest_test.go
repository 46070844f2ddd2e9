package terraformcluster

import (
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
)

// movingImage is a tag the digest tests move under the test node.
const movingImage = "example.test/module:moving"

// TestApproveRunsPlannedDigest moves the module image's tag between the
// plan and the approved apply: the apply still runs the digest the plan
// ran (status.plan.imageDigest), and so applies exactly the reviewed plan.
//
// It guards the apply's pin to the plan's digest (jobRequest.digest from
// status.plan.imageDigest). Without it, the apply Job names the bare tag,
// the node serves the moved tag's content (the module with a moved
// block), the runner's fresh plan no longer hashes to the approved one,
// and nothing is applied.
func TestApproveRunsPlannedDigest(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	tc := h.create("digest", infrav1.ApplyManual, "small")
	h.wait(tc, "first apply", ready)
	first := tc.Status.LastRun.Job
	stateBefore := h.stateHash(tc)

	// A new reference, so the plan is not pinned to the digest of the
	// first apply (spec 004) but pulls the tag as it is now: digest A.
	// One patch with a change to approve: a new reference alone plans
	// empty, which applies without approval.
	a := h.node.Retag(movingImage, h.node.Images[moduleImage])
	before := tc.DeepCopy()
	tc.Spec.Image = movingImage
	for i := range tc.Spec.Variables {
		if tc.Spec.Variables[i].Name == "size" {
			tc.Spec.Variables[i].Value = &apiextensionsv1.JSON{Raw: []byte(`"large"`)}
		}
	}
	if err := h.c.Patch(ctx, tc, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	p := h.waitingPlan(tc, infrav1.ReasonPlanAwaitingApproval)
	if p.ImageDigest != a || p.Change != 1 || len(p.Resources) != 1 || p.Resources[0] != "module.main.terraform_data.node (update)" {
		t.Fatalf("status.plan %+v, want one update planned on %s", p, a)
	}
	if img := h.jobImage(p.Job); img != movingImage {
		t.Errorf("plan Job ran %s, want the tag %s", img, movingImage)
	}
	ref := tc.Status.PendingPlanRef
	if ref == nil {
		t.Fatal("no TerraformPlan for the waiting plan")
	}
	if plan := h.plans(tc)[ref.Name]; plan == nil || plan.Annotations[infrav1.AnnotationImageDigest] != a {
		t.Fatalf("TerraformPlan %s does not record digest %s: %+v", ref.Name, a, plan)
	}

	// The tag moves to other content: digest B.
	b := h.node.Retag(movingImage, h.node.Images[movedImage])
	if b == a {
		t.Fatal("Retag kept the digest")
	}

	h.approve(tc, p.PlanHash)
	h.wait(tc, "the approved apply finished", func(tc *infrav1.TerraformCluster) bool {
		run := tc.Status.LastRun
		return tc.Status.ActiveJob == nil && run != nil && run.Operation == infrav1.OperationApply && run.Job != first
	})
	if run := tc.Status.LastRun; !run.Succeeded {
		t.Fatalf("the approved apply did not apply: %+v (condition %+v)", run, condition(tc, infrav1.ConditionApplyJobSucceeded))
	}
	h.wait(tc, "applied", func(tc *infrav1.TerraformCluster) bool {
		return ready(tc) && tc.Status.Plan == nil && tc.Annotations[infrav1.AnnotationApprovePlan] == ""
	})

	// The apply Job named the tag at A, its pod ran A, and it applied.
	applyJob := tc.Status.LastRun.Job
	job := h.job(applyJob)
	if got, want := engine.JobContainer(job).Image, movingImage+"@"+a; got != want {
		t.Errorf("approved apply Job image %s, want %s", got, want)
	}
	if job.Annotations[infrav1.AnnotationApprovedPlan] != p.PlanHash || job.Annotations[infrav1.AnnotationImageDigest] != a {
		t.Errorf("approved apply Job annotations %v", job.Annotations)
	}
	if got, want := h.podImageID(applyJob), "example.test/module@"+a; got != want {
		t.Errorf("the apply pod reported %s, want %s", got, want)
	}
	if h.stateHash(tc) == stateBefore {
		t.Error("the approved change was not applied")
	}
	evs := h.events(tc)
	if count(evs, infrav1.EventPlanApplied) != 1 || count(evs, infrav1.EventPlanChanged) != 0 {
		t.Errorf("events %v", reasons(evs))
	}
	plan := h.plans(tc)[ref.Name]
	if plan == nil || plan.Labels[infrav1.LabelPlanPhase] != string(infrav1.PlanApplied) || plan.Annotations[infrav1.AnnotationImageDigest] != a {
		t.Errorf("TerraformPlan after the apply: %+v", plan)
	}
	// Spec 004: the digest the apply ran is pinned for the reference.
	if got := h.durableInputs(tc).Annotations[infrav1.AnnotationImageDigest]; got != a {
		t.Errorf("pinned digest %q, want %q", got, a)
	}

	// The next plan, on the same reference, runs the pinned A, not the
	// moved tag's B: the pin holds until the reference changes (spec 004).
	// B would also plan the move of its moved block.
	h.setSize(tc, "medium")
	next := h.waitingPlan(tc, infrav1.ReasonPlanAwaitingApproval)
	if next.Job == p.Job || next.ImageDigest != a || h.jobImage(next.Job) != movingImage+"@"+a || h.podImageID(next.Job) != "example.test/module@"+a {
		t.Errorf("the next plan %s ran %s (digest %s), want the pinned %s", next.Job, h.jobImage(next.Job), next.ImageDigest, a)
	}
	if len(next.Resources) != 1 || next.Resources[0] != "module.main.terraform_data.node (update)" {
		t.Errorf("the next plan's resources %v", next.Resources)
	}
}

// TestOldPlanHashReplanned: a status.plan recorded by an older release,
// under a p1: hash, and an approval of that p1: hash (spec 000). The
// manager plans again, applies nothing on the p1: approval, and the p1:
// approval does not approve the new plan either; the p2: one does.
//
// It guards the scheme check on both sides: a manager that kept the p1:
// plan, or matched an annotation against a hash of another scheme, would
// start an apply Job on the p1: approval.
func TestOldPlanHashReplanned(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	tc := h.create("oldhash", infrav1.ApplyManual, "small")
	h.wait(tc, "first apply", ready)
	stateBefore := h.stateHash(tc)
	h.setSize(tc, "large")
	p := h.waitingPlan(tc, infrav1.ReasonPlanAwaitingApproval)
	oldRef := tc.Status.PendingPlanRef
	if oldRef == nil {
		t.Fatal("no TerraformPlan for the waiting plan")
	}

	// An older manager's record: the p1: hash is approved first, then
	// status.plan is made to carry it, so the manager sees both at once.
	p1 := "p1:" + strings.TrimPrefix(p.PlanHash, "p2:")
	h.approve(tc, p1)
	before := tc.DeepCopy()
	tc.Status.Plan.PlanHash = p1
	if err := h.c.Status().Patch(ctx, tc, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}

	// The manager drops the p1: record and records a p2: plan again.
	h.wait(tc, "a p2: plan instead of the p1: one", func(tc *infrav1.TerraformCluster) bool {
		c := condition(tc, infrav1.ConditionApplyJobSucceeded)
		return tc.Status.Plan != nil && strings.HasPrefix(tc.Status.Plan.PlanHash, "p2:") && tc.Status.ActiveJob == nil &&
			c != nil && c.Reason == infrav1.ReasonPlanAwaitingApproval
	})
	fresh := tc.Status.Plan
	if fresh.Job == p.Job || h.jobOperation(fresh.Job) != infrav1.OperationPlan {
		t.Errorf("status.plan %+v comes from Job %s, want a new plan Job", fresh, fresh.Job)
	}
	if ref := tc.Status.PendingPlanRef; ref == nil || ref.Name == oldRef.Name {
		t.Errorf("pendingPlanRef %+v, want a new TerraformPlan", ref)
	}
	if plan := h.plans(tc)[oldRef.Name]; plan == nil || plan.Labels[infrav1.LabelPlanPhase] != string(infrav1.PlanSuperseded) {
		t.Errorf("the plan of the p1: record: %+v", plan)
	}

	// The p1: approval approved nothing: not the p1: record, not the new
	// plan. It stays, since it is not the manager's to consume.
	time.Sleep(2 * time.Second)
	if err := h.c.Get(ctx, client.ObjectKeyFromObject(tc), tc); err != nil {
		t.Fatal(err)
	}
	if c := condition(tc, infrav1.ConditionApplyJobSucceeded); tc.Status.ActiveJob != nil || c == nil || c.Reason != infrav1.ReasonPlanAwaitingApproval {
		t.Errorf("after the p1: approval: activeJob %+v, condition %+v", tc.Status.ActiveJob, c)
	}
	applies := 0
	for _, j := range h.jobs(tc) {
		if j.Labels[engine.LabelOperation] == string(infrav1.OperationApply) {
			applies++
		}
		if got := j.Annotations[infrav1.AnnotationApprovedPlan]; got != "" {
			t.Errorf("Job %s carries an approved plan %s", j.Name, got)
		}
	}
	if applies != 1 {
		t.Errorf("%d apply Jobs, want the first apply only", applies)
	}
	if h.stateHash(tc) != stateBefore {
		t.Error("the state changed on a p1: approval")
	}
	if got := tc.Annotations[infrav1.AnnotationApprovePlan]; got != p1 {
		t.Errorf("approve-plan %q, want the p1: value left alone", got)
	}
	if n := count(h.events(tc), infrav1.EventPlanApproved); n != 0 {
		t.Errorf("%d PlanApproved events", n)
	}

	// The p2: approval of the new plan applies it.
	h.approve(tc, fresh.PlanHash)
	h.wait(tc, "applied", func(tc *infrav1.TerraformCluster) bool {
		return ready(tc) && tc.Status.Plan == nil && tc.Annotations[infrav1.AnnotationApprovePlan] == ""
	})
	if h.stateHash(tc) == stateBefore {
		t.Error("the approved p2: plan was not applied")
	}
}

// jobImage is the runner container image of the Job called name.
func (h *harness) jobImage(name string) string {
	h.t.Helper()
	return engine.JobContainer(h.job(name)).Image
}

// jobOperation is what the Job called name does.
func (h *harness) jobOperation(name string) infrav1.Operation {
	h.t.Helper()
	return infrav1.Operation(h.job(name).Labels[engine.LabelOperation])
}

func (h *harness) job(name string) *batchv1.Job {
	h.t.Helper()
	var job batchv1.Job
	if err := h.c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, &job); err != nil {
		h.t.Fatalf("Job %s: %v", name, err)
	}
	return &job
}

// podImageID is the imageID the runner container of the Job's pod
// reported: the digest it ran.
func (h *harness) podImageID(job string) string {
	h.t.Helper()
	var pods corev1.PodList
	if err := h.c.List(context.Background(), &pods, client.InNamespace("default"), client.MatchingLabels{engine.JobNameLabel: job}); err != nil {
		h.t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, st := range p.Status.ContainerStatuses {
			if st.Name == infrav1.RunnerContainer {
				return st.ImageID
			}
		}
	}
	return ""
}
