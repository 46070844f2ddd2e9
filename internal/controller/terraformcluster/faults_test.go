package terraformcluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
)

// Faults and edges of the manager's flow against the real API server:
// object names at the limits, the Job history, and a durable Secret or a
// status reference that went missing.

// TestNamesAtTheLimits guards every name the manager derives from an
// object's name: a name ending in -<digits> (terraform's backend refuses
// such a secret_suffix), 63 and 64 characters (the label limit), and 253
// (the object name limit, dotted). Each reaches its first apply; two also
// go through an approved change. A name that overflows a limit fails the
// create of a Secret, Job, pod or TerraformPlan, and the object never gets
// Ready; a label that names the object wrongly loses its Jobs.
func TestNamesAtTheLimits(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	long := strings.Repeat("zone-42.", 30) + "cluster-12345"
	names := []string{"prod-1", strings.Repeat("m", 63), strings.Repeat("n", 64), long}
	if len(long) != 253 {
		t.Fatalf("the long name has %d characters", len(long))
	}
	tcs := map[string]*infrav1.TerraformCluster{}
	for _, name := range names {
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Fatalf("%q is not an object name: %v", name, errs)
		}
		tcs[name] = h.create(name, infrav1.ApplyManual, "small")
	}
	for _, name := range names {
		tc := tcs[name]
		h.wait(tc, "first apply of "+name[:min(len(name), 20)], ready)
		if h.stateHash(tc) == "" {
			t.Errorf("%.20s: the state records no inputs hash", name)
		}
		for what, sname := range map[string]string{"plan key": engine.PlanKeyName("tfc", name), "durable inputs": engine.InputsName("tfc", name), "state": engine.StateSecretName("tfc", name)} {
			var s corev1.Secret
			if err := h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: sname}, &s); err != nil {
				t.Errorf("%.20s: %s Secret %s: %v", name, what, sname, err)
				continue
			}
			if errs := validation.IsDNS1123Subdomain(sname); len(errs) > 0 {
				t.Errorf("%.20s: %s Secret name %q: %v", name, what, sname, errs)
			}
			if what == "state" {
				if got := s.Labels["tfstateSecretSuffix"]; got != engine.StateSuffix("tfc", name) {
					t.Errorf("%.20s: state labelled tfstateSecretSuffix=%q, want %q", name, got, engine.StateSuffix("tfc", name))
				}
			} else if got := s.Labels[infrav1.LabelOwnerName]; got != engine.NameLabel(name) {
				t.Errorf("%.20s: %s Secret labelled %s=%q, want %q", name, what, infrav1.LabelOwnerName, got, engine.NameLabel(name))
			}
		}
		if got := h.durableInputs(tc).Annotations[infrav1.AnnotationApplied]; got != "true" {
			t.Errorf("%.20s: applied marker %q after the first apply", name, got)
		}
		jobs := h.jobs(tc)
		if len(jobs) != 1 {
			t.Errorf("%.20s: %d Jobs after the first apply, want 1", name, len(jobs))
		}
		for i := range jobs {
			checkJobNames(t, tc, &jobs[i])
		}
	}

	// A change under Manual waits and applies once approved: prod-1
	// through the annotation, the long name through its TerraformPlan.
	changed := []string{"prod-1", long}
	for _, name := range changed {
		h.setSize(tcs[name], "large")
	}
	for _, name := range changed {
		tc := tcs[name]
		before := h.stateHash(tc)
		plan := h.livePlanOf(tc)
		if len(plan.Name) > engine.MaxName || plan.Spec.TargetRef.Name != name || plan.Labels[infrav1.LabelClusterName] != engine.NameLabel(name) {
			t.Errorf("%.20s: TerraformPlan %q targets %.20q, labelled %s=%q", name, plan.Name, plan.Spec.TargetRef.Name,
				infrav1.LabelClusterName, plan.Labels[infrav1.LabelClusterName])
		}
		if h.stateHash(tc) != before {
			t.Errorf("%.20s: the state changed before the approval", name)
		}
		if name == long {
			h.approvePlan(plan, "alice")
		} else {
			h.approve(tc, plan.Spec.PlanHash)
		}
		h.phaseWait(tc, plan.Name, infrav1.PlanApplied)
		h.wait(tc, "approved apply of "+name[:min(len(name), 20)], func(tc *infrav1.TerraformCluster) bool {
			return ready(tc) && tc.Status.Plan == nil && tc.Status.PendingPlanRef == nil
		})
		if h.stateHash(tc) != plan.Spec.InputsHash {
			t.Errorf("%.20s: the state does not record the approved inputs", name)
		}
		onceApprovedApplied(t, h, tc)
		jobs := h.jobs(tc)
		ops := map[string]int{}
		for i := range jobs {
			checkJobNames(t, tc, &jobs[i])
			ops[jobs[i].Labels[engine.LabelOperation]]++
			mounted, _ := planKeyMount(&jobs[i])
			if want := jobs[i].Labels[engine.LabelOperation] == "plan" || jobs[i].Annotations[infrav1.AnnotationApprovedPlan] != ""; mounted != want {
				t.Errorf("%.20s: Job %s mounts the plan key: %v, want %v", name, jobs[i].Name, mounted, want)
			}
		}
		if ops["apply"] != 2 || ops["plan"] != 1 {
			t.Errorf("%.20s: Jobs by operation %v, want 2 applies and 1 plan", name, ops)
		}
	}
}

// checkJobNames checks a runner Job of tc: a name its pods can carry in
// their job-name label, valid labels that name tc, and tc's full name in
// the pod annotation the pods' watch reads.
func checkJobNames(t *testing.T, tc *infrav1.TerraformCluster, job *batchv1.Job) {
	t.Helper()
	if len(job.Name) > engine.MaxLabel {
		t.Errorf("Job %s: %d characters, more than %d", job.Name, len(job.Name), engine.MaxLabel)
	}
	for _, ls := range []map[string]string{job.Labels, job.Spec.Template.Labels} {
		for k, v := range ls {
			if errs := append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...); len(errs) > 0 {
				t.Errorf("Job %s: label %s=%q: %v", job.Name, k, v, errs)
			}
		}
		if ls[infrav1.LabelOwnerName] != engine.NameLabel(tc.Name) {
			t.Errorf("Job %s: label %s=%q, want %q", job.Name, infrav1.LabelOwnerName, ls[infrav1.LabelOwnerName], engine.NameLabel(tc.Name))
		}
	}
	if got := job.Spec.Template.Annotations[infrav1.LabelOwnerName]; got != tc.Name {
		t.Errorf("Job %s: pod annotation %s=%.20q, want the object's full name", job.Name, infrav1.LabelOwnerName, got)
	}
	if len(job.OwnerReferences) != 1 || job.OwnerReferences[0].UID != tc.UID {
		t.Errorf("Job %s: owner references %+v", job.Name, job.OwnerReferences)
	}
}

// onceApprovedApplied checks that one approval led to exactly one
// PlanApproved and one PlanApplied event.
func onceApprovedApplied(t *testing.T, h *harness, tc *infrav1.TerraformCluster) {
	t.Helper()
	time.Sleep(time.Second) // let a duplicate show
	evs := h.events(tc)
	if count(evs, infrav1.EventPlanApproved) != 1 || count(evs, infrav1.EventPlanApplied) != 1 {
		t.Errorf("%.20s: events %v, want exactly one PlanApproved and one PlanApplied", tc.Name, reasons(evs))
	}
}

// finishedJobs are the names of tc's finished Jobs that succeeded (or
// failed), oldest first.
func finishedJobs(jobs []batchv1.Job, succeeded bool) []string {
	var out []string
	for i := range jobs {
		if done, ok := engine.JobFinished(&jobs[i]); done && ok == succeeded {
			out = append(out, jobs[i].Name)
		}
	}
	return out
}

// waitJobs polls tc's Jobs until cond holds; cond may fail the test at
// once when it sees something that must never happen.
func (h *harness) waitJobs(tc *infrav1.TerraformCluster, what string, cond func([]batchv1.Job) bool) {
	h.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		jobs := h.jobs(tc)
		if cond(jobs) {
			return
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for i := range jobs {
				done, ok := engine.JobFinished(&jobs[i])
				fmt.Fprintf(&b, "\n  %s %s created=%s finished=%v succeeded=%v processed=%v", jobs[i].Name, jobs[i].Labels[engine.LabelOperation],
					jobs[i].CreationTimestamp.UTC().Format(time.RFC3339), done, ok, engine.Processed(&jobs[i]))
			}
			h.t.Fatalf("%s: not within 2 minutes; Jobs:%s", what, b.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestJobHistory guards the pruning of finished Jobs: the newest within
// each limit are kept, successful and failed ones counted apart, and the
// plan Job of the plan that waits (whose log a reviewer reads) is kept
// even with a limit of 0. A shared count would delete the successful Job
// behind the newer failed ones; a prune that ignored the live plan would
// delete its Job.
func TestJobHistory(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	one := int32(1)
	tc := h.create("history", infrav1.ApplyAutomatic, "small", func(tc *infrav1.TerraformCluster) {
		tc.Spec.Jobs.SuccessfulJobsHistoryLimit = &one
		tc.Spec.Jobs.FailedJobsHistoryLimit = &one
	})
	h.wait(tc, "first apply", ready)
	for _, size := range []string{"medium", "large"} {
		prev := tc.Status.LastRun.Job
		h.setSize(tc, size)
		h.wait(tc, "apply of "+size, func(tc *infrav1.TerraformCluster) bool {
			return ready(tc) && tc.Status.LastRun.Job != prev
		})
	}
	newest := tc.Status.LastRun.Job
	h.waitJobs(tc, "three successful applies pruned to the newest", func(jobs []batchv1.Job) bool {
		return slices.Equal(finishedJobs(jobs, true), []string{newest})
	})

	// Inputs the module refuses: each apply fails, and is retried after
	// the backoff (1 s, 2 s, …).
	h.setVar(tc, "moving", `"not a bool"`)
	h.wait(tc, "two failed applies", func(tc *infrav1.TerraformCluster) bool { return tc.Status.Failures >= 2 })
	h.waitJobs(tc, "failed Jobs pruned to one, the successful one kept", func(jobs []batchv1.Job) bool {
		if !slices.Equal(finishedJobs(jobs, true), []string{newest}) {
			h.t.Fatalf("successful Jobs %v while Jobs failed, want %s kept", finishedJobs(jobs, true), newest)
		}
		return len(finishedJobs(jobs, false)) == 1
	})

	// Manual, with inputs that fit and change something (moving=false
	// alone would be an empty plan, which needs no approval): a plan
	// waits. Its Job is kept even with no successful Job to keep; the
	// failed one stays.
	before := tc.DeepCopy()
	tc.Spec.ApplyPolicy = infrav1.ApplyManual
	for i := range tc.Spec.Variables {
		switch tc.Spec.Variables[i].Name {
		case "moving":
			tc.Spec.Variables[i].Value = &apiextensionsv1.JSON{Raw: []byte("false")}
		case "size":
			tc.Spec.Variables[i].Value = &apiextensionsv1.JSON{Raw: []byte(`"huge"`)}
		}
	}
	if err := h.c.Patch(ctx, tc, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	p := h.waitingPlan(tc, infrav1.ReasonPlanAwaitingApproval)
	planJob := p.Job
	h.waitJobs(tc, "the plan Job processed", func(jobs []batchv1.Job) bool {
		for i := range jobs {
			if jobs[i].Name == planJob {
				return engine.Processed(&jobs[i])
			}
		}
		return false
	})
	zero := int32(0)
	before = tc.DeepCopy()
	tc.Spec.Jobs.SuccessfulJobsHistoryLimit = &zero
	if err := h.c.Patch(ctx, tc, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	var failed []string
	h.waitJobs(tc, "successful Jobs pruned but the live plan's", func(jobs []batchv1.Job) bool {
		failed = finishedJobs(jobs, false)
		succeeded := finishedJobs(jobs, true)
		if !slices.Contains(succeeded, planJob) {
			h.t.Fatalf("the plan Job %s of the plan that waits was pruned (successful Jobs %v)", planJob, succeeded)
		}
		return len(succeeded) == 1
	})
	time.Sleep(time.Second) // let a later prune show
	if got := finishedJobs(h.jobs(tc), true); !slices.Equal(got, []string{planJob}) {
		t.Errorf("successful Jobs %v while the plan waits, want its plan Job %s kept", got, planJob)
	}
	if len(failed) != 1 {
		t.Errorf("failed Jobs %v, want the newest one kept", failed)
	}

	// Applied, the plan Job is history like any other: with a limit of 0
	// no successful Job stays; the failed one does.
	h.approve(tc, p.PlanHash)
	h.wait(tc, "approved apply", func(tc *infrav1.TerraformCluster) bool { return ready(tc) && tc.Status.Plan == nil })
	onceApprovedApplied(t, h, tc)
	h.waitJobs(tc, "the plan Job pruned once applied", func(jobs []batchv1.Job) bool {
		return len(finishedJobs(jobs, true)) == 0
	})
	if got := finishedJobs(h.jobs(tc), false); !slices.Equal(got, failed) {
		t.Errorf("failed Jobs %v, want %v untouched by the successful ones' limit", got, failed)
	}
}

// TestLostDurableInputs guards the gate when the durable inputs Secret,
// and with it the applied marker, is gone: the state still records
// captf's inputs hash, so the next change is no first apply and waits for
// an approval. Taking the missing marker for a new object would apply the
// change ungated.
func TestLostDurableInputs(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	tc := h.create("lost-inputs", infrav1.ApplyManual, "small")
	h.wait(tc, "first apply", ready)
	state := h.stateHash(tc)
	if err := h.c.Delete(ctx, h.durableInputs(tc)); err != nil {
		t.Fatal(err)
	}

	h.setSize(tc, "large")
	// Either a plan waits or (wrongly) the change applied: stop at the
	// first.
	h.wait(tc, "a plan waits, or an apply", func(tc *infrav1.TerraformCluster) bool {
		c := condition(tc, infrav1.ConditionApplyJobSucceeded)
		waits := tc.Status.Plan != nil && tc.Status.ActiveJob == nil && c != nil && c.Reason == infrav1.ReasonPlanAwaitingApproval
		return waits || h.stateHash(tc) != state
	})
	if h.stateHash(tc) != state {
		t.Fatal("the change applied without an approval after the durable inputs Secret was lost")
	}
	p := tc.Status.Plan
	applies := 0
	for _, j := range h.jobs(tc) {
		if j.Labels[engine.LabelOperation] == "apply" {
			applies++
		}
	}
	if applies != 1 {
		t.Errorf("%d apply Jobs while the plan waits, want the first one only", applies)
	}

	h.approve(tc, p.PlanHash)
	h.wait(tc, "approved apply", func(tc *infrav1.TerraformCluster) bool { return ready(tc) && tc.Status.Plan == nil })
	if got := h.stateHash(tc); got != p.InputsHash {
		t.Errorf("state records %q after the approved apply, want %q", got, p.InputsHash)
	}
	if got := h.durableInputs(tc).Annotations[infrav1.AnnotationApplied]; got != "true" {
		t.Errorf("applied marker %q after the approved apply", got)
	}
	onceApprovedApplied(t, h, tc)
}

// TestLostPendingPlanRef guards a plan that waits when status loses
// status.pendingPlanRef (a status write lost, a restore, a hand edit):
// the manager names the plan again instead of superseding it, and an
// approval through spec.approved applies it.
func TestLostPendingPlanRef(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	tc := h.create("lost-ref", infrav1.ApplyManual, "small")
	h.wait(tc, "first apply", ready)
	h.setSize(tc, "medium")
	plan := h.livePlanOf(tc)

	patch := client.RawPatch(types.MergePatchType, []byte(`{"status":{"pendingPlanRef":null}}`))
	if err := h.c.Status().Patch(ctx, tc, patch); err != nil {
		t.Fatal(err)
	}
	if tc.Status.PendingPlanRef != nil {
		t.Fatal("status.pendingPlanRef not cleared")
	}
	// The manager answers the status change: it names the plan again, or
	// (wrongly) finishes it.
	h.wait(tc, "the plan named again, or finished", func(tc *infrav1.TerraformCluster) bool {
		p := h.plans(tc)[plan.Name]
		return tc.Status.PendingPlanRef != nil || p == nil || infrav1.PlanPhase(p.Labels[infrav1.LabelPlanPhase]).Terminal()
	})
	phase := "gone"
	if p := h.plans(tc)[plan.Name]; p != nil {
		phase = p.Labels[infrav1.LabelPlanPhase]
	}
	if ref := tc.Status.PendingPlanRef; ref == nil || ref.Name != plan.Name || phase != string(infrav1.PlanPending) {
		t.Fatalf("pendingPlanRef %+v, plan %s %s; want the plan named again and Pending", ref, plan.Name, phase)
	}

	h.approvePlan(h.plans(tc)[plan.Name], "alice")
	h.phaseWait(tc, plan.Name, infrav1.PlanApplied)
	h.wait(tc, "approved apply", func(tc *infrav1.TerraformCluster) bool {
		return ready(tc) && tc.Status.Plan == nil && tc.Status.PendingPlanRef == nil
	})
	if got := h.stateHash(tc); got != plan.Spec.InputsHash {
		t.Errorf("state records %q after the approved apply, want %q", got, plan.Spec.InputsHash)
	}
	onceApprovedApplied(t, h, tc)
	var job batchv1.Job
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: tc.Status.LastRun.Job}, &job); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	} else if err == nil && job.Annotations[infrav1.AnnotationPlan] != plan.Name {
		t.Errorf("the apply Job names plan %q, want %s", job.Annotations[infrav1.AnnotationPlan], plan.Name)
	}
}
