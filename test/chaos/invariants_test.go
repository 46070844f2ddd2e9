package chaos

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/render"
	"github.com/captf/captf/internal/tfstate"
	"github.com/captf/captf/pkg/fingerprint"
)

// The invariants of issue 9, section 3, by the name the figures use.
const (
	invUnapprovedApply = "unapproved-apply"
	invTwoActiveJobs   = "two-active-jobs"
	invApprovalOnce    = "approval-consumed-once"
	invPlanApplied     = "one-PlanApplied-per-applied-plan"
	invPlanApproved    = "one-PlanApproved-per-approved-plan"
	invPlanPhases      = "plan-phases"
	invRefusedState    = "state-untouched-by-refused-apply"
	invConverges       = "converges"
	invPlanJobLoop     = "no-plan-job-loop-webhook-down"
)

var invariants = []string{invUnapprovedApply, invTwoActiveJobs, invApprovalOnce, invPlanApplied, invPlanApproved, invPlanPhases, invRefusedState, invConverges, invPlanJobLoop}

type violation struct {
	invariant, detail string
}

// exitPlanChanged is the runner's exit code for a refused apply.
const exitPlanChanged = 3

// check reads what the run left and what the observer saw, and returns
// every invariant it breaks. clean is the end state of the clean run of
// the same flow (nil for the clean run itself).
func (r *run) check(actErr error, clean *summary) ([]violation, summary) {
	var out []violation
	add := func(inv, format string, args ...any) {
		out = append(out, violation{inv, fmt.Sprintf(format, args...)})
	}
	if clean != nil && actErr == nil {
		r.awaitEnd(clean)
	}
	subject := r.flow.subject()
	all, overlaps, states := r.obs.snapshot()
	jobs := subject.jobs(all)

	// No apply Job without an approval of the exact hash it expects; the
	// first apply (no apply succeeded before it was created) aside. Under
	// Automatic (after the switch, or from the object's creation) an apply
	// needs no approval, but one of an object that applied before runs
	// under the destructive-plan guard, or with an approval; after a switch
	// back to Manual it needs the approval again.
	var firstSuccess uint64
	for _, j := range jobs {
		if j.operation == string(infrav1.OperationApply) && j.succeeded && (firstSuccess == 0 || j.finished < firstSuccess) {
			firstSuccess = j.finished
		}
	}
	for _, j := range jobs {
		if j.operation != string(infrav1.OperationApply) {
			continue
		}
		if j.allowDeletes != "" && !slices.ContainsFunc(r.approvals, func(a approval) bool {
			return a.inputs == j.allowDeletes && a.hash == j.approved && a.rv < j.created
		}) {
			// An apply that may delete for an input set (a pool's
			// ExportsChange plan) needs the approval of exactly that set.
			add(invUnapprovedApply, "apply Job %s may delete for %s (--allow-deletes-hash), which no approval of a plan bound before it was created", j.name, short(j.allowDeletes))
		}
		if firstSuccess == 0 || j.created < firstSuccess {
			continue
		}
		manual := r.manualFrom > r.automaticFrom && j.created > r.manualFrom
		if r.automaticFrom != 0 && j.created > r.automaticFrom && j.expect == "" && !manual {
			if !j.guard {
				add(invUnapprovedApply, "apply Job %s under Automatic runs neither under the guard nor with an approved plan (succeeded: %v)", j.name, j.succeeded)
			}
			continue
		}
		approvedBefore := false
		for _, a := range r.approvals {
			if a.hash == j.expect && a.rv < j.created {
				approvedBefore = true
			}
		}
		switch {
		case j.expect == "" && j.appliedInputs && j.guard:
			// Values an approval leaves out (rotated bootstrap data): the
			// Job shows it applies only those, or applies nothing; the
			// flow that rotates them checks what it applied
			// (invRotationOnly).
		case j.expect == "":
			add(invUnapprovedApply, "apply Job %s runs without --expect-plan under Manual after the first apply (succeeded: %v)", j.name, j.succeeded)
		case j.expect == fingerprint.EmptyPlanHash:
			// An empty plan needs no approval: the runner applies it only
			// while the fresh plan is empty too (captf's own outputs
			// aside), as after a pool's member was replaced.
		case j.approved != j.expect:
			add(invUnapprovedApply, "apply Job %s: --expect-plan %s but annotation %s %q", j.name, short(j.expect), infrav1.AnnotationApprovedPlan, short(j.approved))
		case !approvedBefore:
			add(invUnapprovedApply, "apply Job %s expects %s, which nobody approved before the Job was created", j.name, short(j.expect))
		}
	}

	for _, o := range overlaps {
		add(invTwoActiveJobs, "Job %s created while Job %s was active", o.job, o.active)
	}

	// Each approval is used by one successful apply and then consumed.
	appliedHashes := map[string]bool{}
	for _, j := range jobs {
		if j.operation != string(infrav1.OperationApply) {
			continue
		}
		if j.succeeded && j.approved != "" {
			// An ExportsChange plan's apply carries the plan's hash,
			// though it expects none.
			appliedHashes[j.approved] = true
		}
		if j.expect == "" || j.expect == fingerprint.EmptyPlanHash {
			continue
		}
		for _, k := range jobs {
			if k.operation == string(infrav1.OperationApply) && k.expect == j.expect && k.succeeded && k.finished != 0 && k.finished < j.created {
				add(invApprovalOnce, "apply Job %s expects %s again after Job %s applied it", j.name, short(j.expect), k.name)
				break
			}
		}
	}
	obj, err := r.object(subject)
	if err != nil {
		add(invConverges, "read the object: %v", err)
	}
	if !absent(obj) {
		for _, key := range []string{infrav1.AnnotationApprovePlan, infrav1.AnnotationApproveDestructivePlan} {
			if h := obj.GetAnnotations()[key]; h != "" && appliedHashes[h] {
				add(invApprovalOnce, "the annotation approval %s (%s) was applied but never consumed", short(h), key)
			}
		}
	}

	// Exactly one PlanApplied per applied plan.
	if n := r.events(infrav1.EventPlanApplied); n != len(appliedHashes) {
		add(invPlanApplied, "%d PlanApplied events for %d applied plan(s)", n, len(appliedHashes))
	}

	// Exactly one PlanApproved per plan an approved apply Job ran for,
	// however often its start was retried.
	approvedPlans := map[string]bool{}
	for _, j := range jobs {
		if j.operation == string(infrav1.OperationApply) && j.approved != "" {
			key := j.plan
			if key == "" {
				key = j.name
			}
			approvedPlans[key] = true
		}
	}
	if n := r.events(infrav1.EventPlanApproved); n != len(approvedPlans) {
		add(invPlanApproved, "%d PlanApproved events for %d approved plan(s)", n, len(approvedPlans))
	}

	// TerraformPlan phases.
	out = append(out, r.checkPhases(obj)...)

	// A refused apply leaves the state as it was.
	for _, j := range jobs {
		if j.operation != string(infrav1.OperationApply) || j.finished == 0 || r.exitCode(j.name) != exitPlanChanged {
			continue
		}
		for _, w := range states {
			if w.rv > j.created && w.rv <= j.finished {
				add(invRefusedState, "the state changed while the refused apply Job %s ran", j.name)
				break
			}
		}
	}

	if actErr != nil {
		add(invConverges, "%v", actErr)
	} else if r.flow.check != nil {
		out = append(out, r.flow.check(r)...)
	}
	got := r.summarize(obj)
	if clean != nil && actErr == nil {
		if d := clean.diff(got); d != "" {
			add(invConverges, "end state differs from the clean run: %s", d)
		}
	}

	// While the webhook is down, a plan that cannot be recorded must not
	// be planned again and again: one plan Job, and at most one retry.
	if r.webhookDown && r.planJobsWhileDown > 2 {
		add(invPlanJobLoop, "%d plan Jobs in %s while the webhook was unreachable", r.planJobsWhileDown, webhookWindow)
	}
	return out, got
}

// awaitEnd waits, as long as a step of the flow may take, until the end
// state equals the clean run's and the plans' phases are the flow's: the
// flow's last step can be reached while the manager still retries a step
// that failed (a per-run Secret whose delete timed out, a plan still to
// supersede). What is not reached by then is a violation.
func (r *run) awaitEnd(clean *summary) {
	for deadline := time.Now().Add(converge); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		obj, err := r.object(r.flow.subject())
		if err != nil {
			continue
		}
		if clean.diff(r.summarize(obj)) == "" && len(r.checkPhases(obj)) == 0 {
			return
		}
	}
}

// checkPhases compares the TerraformPlans' phase labels with the flow's;
// a live one must be obj's.
func (r *run) checkPhases(obj engine.Object) []violation {
	var out []violation
	var list infrav1.TerraformPlanList
	if err := r.f.env.Client.List(r.ctx, &list, client.InNamespace(r.ns)); err != nil {
		return []violation{{invPlanPhases, fmt.Sprintf("list plans: %v", err)}}
	}
	counts := map[infrav1.PlanPhase]int{}
	var names []string
	for _, p := range list.Items {
		phase := infrav1.PlanPhase(p.Labels[infrav1.LabelPlanPhase])
		counts[phase]++
		names = append(names, p.Name+"="+string(phase)+"("+short(p.Spec.PlanHash)+")")
		// A deleted object's plans would go with it (garbage collection,
		// which envtest has not): the live one stays as it was.
		live := phase == infrav1.PlanPending || phase == infrav1.PlanApproved
		if ref := livePlan(obj); live && !absent(obj) && (ref == nil || ref.Name != p.Name) {
			out = append(out, violation{invPlanPhases, fmt.Sprintf("plan %s is %s but not the object's live plan", p.Name, phase)})
		}
		for _, a := range r.approvals {
			if a.plan == p.Name && r.flow.phases[infrav1.PlanApplied] > 0 && phase != infrav1.PlanApplied {
				out = append(out, violation{invPlanPhases, fmt.Sprintf("the approved plan %s ended %s, not Applied", p.Name, phase)})
			}
		}
	}
	sort.Strings(names)
	for _, phase := range []infrav1.PlanPhase{infrav1.PlanPending, infrav1.PlanApproved, infrav1.PlanApplied, infrav1.PlanFailed} {
		if counts[phase] != r.flow.phases[phase] {
			out = append(out, violation{invPlanPhases, fmt.Sprintf("%d plan(s) %s, want %d; plans: %s", counts[phase], phase, r.flow.phases[phase], strings.Join(names, " "))})
		}
	}
	for phase := range counts {
		switch phase {
		case infrav1.PlanPending, infrav1.PlanApproved, infrav1.PlanApplied, infrav1.PlanFailed, infrav1.PlanSuperseded:
		default:
			out = append(out, violation{invPlanPhases, fmt.Sprintf("%d plan(s) with phase label %q", counts[phase], phase)})
		}
	}
	return out
}

// livePlan is obj's pendingPlanRef; nil when it has none or is gone.
func livePlan(obj engine.Object) *infrav1.PlanReference {
	if absent(obj) {
		return nil
	}
	return obj.GetRunnerStatus().PendingPlanRef
}

// events counts the events.k8s.io/v1 Events of reason about the flow's
// subject, a series counting as its count.
func (r *run) events(reason string) int {
	s := r.flow.subject()
	var list eventsv1.EventList
	if err := r.f.env.Client.List(r.ctx, &list, client.InNamespace(r.ns)); err != nil {
		return -1
	}
	n := 0
	for _, e := range list.Items {
		if e.Reason != reason || e.Regarding.Name != s.name || e.Regarding.Kind != s.kind.Name() {
			continue
		}
		if e.Series != nil && e.Series.Count > 1 {
			n += int(e.Series.Count)
		} else {
			n++
		}
	}
	return n
}

// exitCode is how the runner of a Job exited, as the node reported it on
// the Job's pod; -1 when unknown.
func (r *run) exitCode(job string) int {
	var pods corev1.PodList
	if err := r.f.env.Client.List(r.ctx, &pods, client.InNamespace(r.ns), client.MatchingLabels{"job-name": job}); err != nil {
		return -1
	}
	for _, p := range pods.Items {
		for _, c := range p.Status.ContainerStatuses {
			if c.State.Terminated != nil {
				return int(c.State.Terminated.ExitCode)
			}
		}
	}
	return -1
}

// summary is a run's end state, compared with the clean run's. Outputs
// and the state are hashes: they hold values, which are never printed.
type summary struct {
	Gone, Ready, LastRunOK, Plan, PendingPlan, ApproveAnnotation bool
	ApplyReason                                                  string
	Failures                                                     int32
	// Secrets is how many Secrets of the manager and of terraform are
	// left in the namespace, but those whose owner is gone.
	Secrets int
	Outputs [32]byte
}

func (r *run) summarize(obj engine.Object) summary {
	s := summary{Gone: absent(obj)}
	if !s.Gone {
		st := obj.GetRunnerStatus()
		s.Ready = condition(obj, infrav1.ConditionReady) != nil && condition(obj, infrav1.ConditionReady).Status == metav1.ConditionTrue
		s.LastRunOK = st.LastRun != nil && st.LastRun.Succeeded
		s.Plan, s.PendingPlan = st.Plan != nil, st.PendingPlanRef != nil
		s.ApproveAnnotation = obj.GetAnnotations()[infrav1.AnnotationApprovePlan] != "" || obj.GetAnnotations()[infrav1.AnnotationApproveDestructivePlan] != ""
		if c := condition(obj, infrav1.ConditionApplyJobSucceeded); c != nil {
			s.ApplyReason = c.Reason
		}
		s.Failures = st.Failures
	}
	// A Secret whose owner is gone is garbage collection's, which envtest
	// has not: a per-run Secret whose Job was deleted, and, once the run's
	// object is gone, a Secret it owned (a state backup).
	subject := r.flow.subject()
	var jobs batchv1.JobList
	live := map[types.UID]bool{}
	if err := r.f.env.Client.List(r.ctx, &jobs, client.InNamespace(r.ns)); err == nil {
		for _, j := range jobs.Items {
			live[j.UID] = true
		}
	}
	var secrets corev1.SecretList
	if err := r.f.env.Client.List(r.ctx, &secrets, client.InNamespace(r.ns)); err == nil {
		for _, sec := range secrets.Items {
			if sec.Name != "token" && !slices.ContainsFunc(sec.OwnerReferences, func(o metav1.OwnerReference) bool {
				return o.Kind == "Job" && !live[o.UID] || s.Gone && o.Kind == subject.kind.Name() && o.Name == subject.name
			}) {
				s.Secrets++
			}
		}
	}
	s.Outputs = r.stateOutputs()
	return s
}

// stateOutputs hashes the root outputs of the subject's state, but
// captf's own inputs and approval hashes (keyed per object, so they
// differ between runs), with the run's namespace in them (a module that
// names its files by it, as the pool's) read as the same in every run.
func (r *run) stateOutputs() [32]byte {
	s := r.flow.subject()
	var secrets corev1.SecretList
	if err := r.f.env.Client.List(r.ctx, &secrets, client.InNamespace(r.ns),
		client.MatchingLabels{tfstate.LabelState: "true", tfstate.LabelSuffix: engine.StateSuffix(s.kind.Short(), s.name)}); err != nil || len(secrets.Items) == 0 {
		return [32]byte{}
	}
	zr, err := gzip.NewReader(bytes.NewReader(secrets.Items[0].Data["tfstate"]))
	if err != nil {
		return [32]byte{1}
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return [32]byte{1}
	}
	var state struct {
		Outputs map[string]struct {
			Value json.RawMessage `json:"value"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(raw, &state); err != nil {
		return [32]byte{1}
	}
	delete(state.Outputs, render.HashOutput)
	delete(state.Outputs, render.ApprovalOutput)
	b, _ := json.Marshal(state.Outputs) // maps marshal in key order
	return sha256.Sum256(bytes.ReplaceAll(b, []byte(r.ns), []byte("<namespace>")))
}

// diff names the fields that differ, with the clean run's value first;
// the state's outputs only as "differ".
func (s summary) diff(got summary) string {
	var d []string
	field := func(name string, want, have any) {
		if want != have {
			d = append(d, fmt.Sprintf("%s %v→%v", name, want, have))
		}
	}
	field("gone", s.Gone, got.Gone)
	field("ready", s.Ready, got.Ready)
	field("lastRun.succeeded", s.LastRunOK, got.LastRunOK)
	field("status.plan", s.Plan, got.Plan)
	field("pendingPlanRef", s.PendingPlan, got.PendingPlan)
	field("approve-plan annotation", s.ApproveAnnotation, got.ApproveAnnotation)
	field("ApplyJobSucceeded reason", s.ApplyReason, got.ApplyReason)
	field("failures", s.Failures, got.Failures)
	field("secrets", s.Secrets, got.Secrets)
	if s.Outputs != got.Outputs {
		d = append(d, "the state's outputs differ")
	}
	return strings.Join(d, ", ")
}
