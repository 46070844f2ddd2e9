package engine

import (
	"fmt"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/runner"
	"github.com/captf/captf/pkg/fingerprint"
)

// A finished runner Job is the record of its own outcome until every
// consequence of that outcome is durable (ARCHITECTURE.md, "Reconcile
// invariants"). decide turns what the Job says into the object's new
// status and a list of steps (TerraformPlan phases, the consumed approval,
// the applied marker, events); the reconcile carries the steps out in
// order, each idempotent, then writes the status, deletes the per-run
// Secret, and only then marks the Job processed (captf.io/processed). A
// failure anywhere leaves the Job unprocessed, so the next reconcile does
// it all again and changes nothing that was already done.

// outcome is what a finished Job says: the facts decide works from,
// gathered from the Job, its annotations, its pod and the runner's report.
type outcome struct {
	Job       string
	Operation infrav1.Operation
	// Succeeded is the Job's own condition.
	Succeeded bool
	// DeadlineExceeded: the Job was stopped at its deadline.
	DeadlineExceeded bool
	// Msg is the runner's report; nil when the Job left none.
	Msg *runner.Message
	// Unreadable: the Job left a report that is not one.
	Unreadable bool
	// InputsHash is the inputs hash the Job ran with.
	InputsHash string
	// ExportsChange is, for a plan Job of inputs whose held variable
	// changed, their approval hash (annotationExportsChange).
	ExportsChange string
	// Approved is the approved plan hash an apply Job carried, and Plan
	// the TerraformPlan it applies.
	Approved, Plan string
	// Digest is the module image digest the Job's pod ran, "" when the
	// node reported none.
	Digest    string
	StartedAt *metav1.Time
	// RestoreSerial is the serial a restore Job pushed back.
	RestoreSerial int64
}

// approvalStarted moves the approved apply's TerraformPlan to Approved
// and announces PlanApproved, if its start did not get to it.
type approvalStarted struct{}

// consumeApproval removes captf.io/approve-plan if it still names Hash.
type consumeApproval struct{ Hash string }

// openPlan creates the TerraformPlan of a plan that waits for approval
// and supersedes any other live plan of the object.
type openPlan struct {
	Name, Job, InputsHash, Digest string
	Reason                        infrav1.PlanReason
	Report                        *fingerprint.Report
}

// finishPlan moves a TerraformPlan to a terminal phase, unless it is
// already in one.
type finishPlan struct {
	Name            string
	Phase           infrav1.PlanPhase
	Reason, Message string
}

// markInterrupted sets captf.io/interrupted-apply: the next apply plans
// first.
type markInterrupted struct{}

// clearInterrupted removes captf.io/interrupted-apply.
type clearInterrupted struct{}

// annotateJob sets an annotation on the finished Job.
type annotateJob struct{ Key, Value string }

// decide is what a finished Job of obj implies: obj's new status and the
// steps that make the outcome durable. It is pure; while the object is
// being deleted, only the status counts.
func decide(k Kind, obj Object, o outcome, now metav1.Time) (Object, []Step) {
	view, steps := decideRun(k, obj, o, now)
	if a := obj.GetRunnerStatus().ActiveJob; o.Approved != "" && (a == nil || a.Name != o.Job) {
		// Whatever it ended in, an approved apply was started under an
		// approval: that comes first, unless status names the Job as
		// active, which it does only once its start was recorded
		// (activate: the plan moved to Approved and PlanApproved
		// announced).
		steps = append([]Step{approvalStarted{}}, steps...)
	}
	return view, steps
}

func decideRun(k Kind, obj Object, o outcome, now metav1.Time) (Object, []Step) {
	switch o.Operation {
	case infrav1.OperationDrift:
		return decideDrift(obj, o, now)
	case infrav1.OperationRefresh:
		return decideRefresh(k, obj, o, now)
	case infrav1.OperationRestore:
		return decideRestore(obj, o, now)
	}
	view, run := finishRun(obj, o, now)
	st := view.GetRunnerStatus()
	msg := o.Msg
	needsPlan := msg != nil && (msg.Outcome == runner.OutcomePlanned || msg.Outcome == runner.OutcomePlanChanged)
	switch {
	case o.Unreadable || (needsPlan && msg.Plan == nil):
		run.Error = &infrav1.RunError{Kind: runner.OutcomeFailed, Message: "the Job's report could not be read"}
		failed(view, run)
		return view, nil
	case msg == nil && o.DeadlineExceeded:
		run.Error = &infrav1.RunError{Kind: "deadline", Message: "the Job was stopped at its deadline"}
		failed(view, run)
		return view, interruption(o)
	case msg == nil:
		run.Error = &infrav1.RunError{Kind: runner.OutcomeFailed, Message: "the Job left no report"}
		failed(view, run)
		return view, interruption(o)
	}
	switch msg.Outcome {
	case runner.OutcomePlanned:
		run.Succeeded = true
		reason := planReason(obj, msg.Plan)
		if o.ExportsChange != "" && msg.Plan.Destroy > 0 {
			// A change of the held variable that deletes or replaces: its
			// approval binds the input set (the approval hash), and the
			// object keeps applying with what was applied meanwhile.
			reason, o.InputsHash = infrav1.ReasonExportsChange, o.ExportsChange
		}
		st.Plan = planStatus(o, msg.Plan, reason, now)
		if reason == "" {
			// Under Automatic a plan waits only when it deletes or
			// replaces; this one does not (any more): the guarded apply
			// runs again.
			st.Plan = nil
			setCondition(view, infrav1.ConditionApplyJobSucceeded, unknown, ReasonApplying, "The plan deletes or replaces nothing; it applies under the destructive-plan guard.")
			return view, nil
		}
		if msg.Plan.Empty() {
			// An empty plan needs no approval and opens no TerraformPlan;
			// the apply plans again and stops if it is no longer empty.
			setCondition(view, infrav1.ConditionApplyJobSucceeded, unknown, ReasonApplying, "The plan is empty; it applies without approval.")
			return view, nil
		}
		name := PlanName(obj.GetName(), o.Job, msg.Plan.PlanHash)
		var steps []Step
		if k.Plans() {
			st.PendingPlanRef = &infrav1.PlanReference{Name: name}
			steps = append(steps, openPlan{Name: name, Job: o.Job, InputsHash: o.InputsHash, Digest: o.Digest, Reason: reason, Report: msg.Plan})
		}
		setCondition(view, infrav1.ConditionApplyJobSucceeded, unknown, infrav1.ReasonPlanAwaitingApproval, awaiting(k, view, msg.Plan))
		return view, append(steps,
			announce{Key: name, Type: corev1.EventTypeNormal, Reason: infrav1.EventPlanReady, Action: "Plan", Related: o.Job,
				Note: fmt.Sprintf("Plan %s waits for approval: %d to add, %d to change, %d to destroy, %d output changes.",
					msg.Plan.PlanHash, msg.Plan.Add, msg.Plan.Change, msg.Plan.Destroy, msg.Plan.OutputChanges)})
	case runner.OutcomeApplied, runner.OutcomeNoChanges:
		run.Succeeded = true
		st.Failures = 0
		// The apply of the held inputs, while an ExportsChange plan waits,
		// leaves it waiting.
		held := st.Plan != nil && st.Plan.Reason == infrav1.ReasonExportsChange && o.Approved == ""
		if !held {
			st.Plan = nil
		}
		driftUndone(view, o.Job)
		setHealth(view, msg.Health)
		if !held {
			// The status write that records the run already says what the
			// end of the reconcile finds when nothing else is due
			// (setProvisioned, with the object's generation), so that
			// write has nothing left to send. Of an object not provisioned
			// yet, only the Job's success: whether it is now, the end
			// decides.
			if IsProvisioned(view) {
				setProvisioned(view)
			} else {
				setCondition(view, infrav1.ConditionApplyJobSucceeded, true, ReasonApplied, appliedMessage)
			}
		}
		steps := append([]Step{recordApplied{Digest: o.Digest, Pin: msg.Outcome == runner.OutcomeApplied}, ownState{}}, k.Applied(view, msg)...)
		if _, ok := obj.GetAnnotations()[infrav1.AnnotationAcceptEmptyState]; ok || movedMidRun(obj) {
			steps = append(steps, acceptedEmptyState{})
		}
		if Interrupted(obj) {
			steps = append(steps, clearInterrupted{})
		}
		if held {
			return view, steps
		}
		plan := carriedPlan(o, st)
		if st.PendingPlanRef != nil && st.PendingPlanRef.Name == plan {
			st.PendingPlanRef = nil
		}
		if o.Approved == "" {
			return view, steps
		}
		steps = append(steps, consumeApproval{Hash: o.Approved})
		if plan != "" {
			steps = append(steps, finishPlan{Name: plan, Phase: infrav1.PlanApplied, Reason: infrav1.ReasonPlanApplied,
				Message: "The apply planned exactly these changes and applied them."})
		}
		key := plan
		if key == "" {
			key = o.Job
		}
		return view, append(steps, announce{Key: key, Type: corev1.EventTypeNormal, Reason: infrav1.EventPlanApplied, Action: "Apply", Related: o.Job,
			Note: fmt.Sprintf("Plan %s applied.", o.Approved)})
	case runner.OutcomePlanChanged:
		// Nothing was applied. This is not a failure: no backoff, no cap.
		run.Succeeded = false
		run.Error = &infrav1.RunError{Kind: infrav1.ErrorKindPlanChanged, Message: "The fresh plan does not hash to the approved one; nothing was applied."}
		steps := []Step{annotateJob{Key: infrav1.AnnotationPlanChanged, Value: msg.Plan.PlanHash}}
		plan := carriedPlan(o, st)
		if plan != "" {
			steps = append(steps, finishPlan{Name: plan, Phase: infrav1.PlanFailed, Reason: infrav1.ReasonApplyPlanChanged,
				Message: "The apply found other changes than the approved ones and applied nothing; a new plan waits."})
		}
		st.PendingPlanRef = nil
		reason := planReason(obj, msg.Plan)
		st.Plan = planStatus(o, msg.Plan, reason, now)
		note := fmt.Sprintf("The plan moved since %s was approved; nothing was applied. The new plan %s waits for approval.", o.Approved, msg.Plan.PlanHash)
		switch {
		case reason == "":
			// Under Automatic: the new plan deletes nothing and need not
			// wait; the guarded apply runs again.
			st.Plan = nil
			note = fmt.Sprintf("The plan moved since %s was approved; nothing was applied. The new plan deletes or replaces nothing and applies under the destructive-plan guard.", o.Approved)
			setCondition(view, infrav1.ConditionApplyJobSucceeded, unknown, infrav1.ReasonPlanChanged, note)
		case msg.Plan.Empty():
			// An empty plan opens no TerraformPlan and needs no approval.
			note = fmt.Sprintf("The plan moved since %s was approved; nothing was applied. The new plan is empty and applies without approval.", o.Approved)
			setCondition(view, infrav1.ConditionApplyJobSucceeded, unknown, infrav1.ReasonPlanChanged, note)
		default:
			if k.Plans() {
				name := PlanName(obj.GetName(), o.Job, msg.Plan.PlanHash)
				st.PendingPlanRef = &infrav1.PlanReference{Name: name}
				steps = append(steps, openPlan{Name: name, Job: o.Job, InputsHash: o.InputsHash, Digest: o.Digest, Reason: reason, Report: msg.Plan})
			}
			setCondition(view, infrav1.ConditionApplyJobSucceeded, unknown, infrav1.ReasonPlanChanged, awaiting(k, view, msg.Plan))
		}
		return view, append(steps, announce{Key: o.Job, Type: corev1.EventTypeWarning, Reason: infrav1.EventPlanChanged, Action: "Apply", Related: o.Job, Note: note})
	case runner.OutcomeDestructive:
		// Nothing was applied, and nothing failed: no backoff, no cap.
		// A plan of these changes is made next and waits for approval.
		note := blockedNote(k, o.Job, msg.Guarded)
		run.Error = &infrav1.RunError{Kind: infrav1.ErrorKindDestructivePlanBlocked, Message: "The plan deletes or replaces resources; nothing was applied."}
		var steps []Step
		if o.Approved != "" {
			// An approved ExportsChange apply whose plan deletes or
			// replaces what the approved plan did not (the runner names
			// it, by address): that plan failed as a moved one does, and
			// a new plan of these changes waits for approval.
			if msg.Error != "" {
				run.Error.Message = msg.Error
				note = fmt.Sprintf("Job %s planned first and applied nothing: %s. A plan of these changes is made next and waits for approval.", o.Job, msg.Error)
			}
			plan := carriedPlan(o, st)
			if plan != "" {
				steps = append(steps, finishPlan{Name: plan, Phase: infrav1.PlanFailed, Reason: infrav1.ReasonApplyPlanChanged,
					Message: "The apply found other changes than the approved ones and applied nothing; a new plan waits."})
			}
		}
		if p := st.Plan; p == nil || p.Reason != infrav1.ReasonExportsChange || o.Approved != "" {
			// A waiting ExportsChange plan stays: what the guard stopped
			// is the apply of the held inputs, which its approval covers.
			st.Plan, st.PendingPlanRef = nil, nil
		}
		setCondition(view, infrav1.ConditionApplyJobSucceeded, false, infrav1.ReasonDestructivePlanBlocked, note)
		return view, append(steps, announce{Key: o.Job, Type: corev1.EventTypeWarning, Reason: infrav1.EventDestructivePlanBlocked, Action: "Apply", Related: o.Job, Note: note})
	case runner.OutcomeNeedsApproval:
		// Nothing was applied, and nothing failed: no backoff. A plan of
		// the change is made next and waits for approval (refused).
		run.Error = &infrav1.RunError{Kind: infrav1.ErrorKindNeedsApproval, Message: msg.Error}
		setCondition(view, infrav1.ConditionApplyJobSucceeded, unknown, infrav1.ReasonNeedsApproval,
			fmt.Sprintf("Job %s: %s. A plan of the change is made next and waits for approval.", o.Job, msg.Error))
		return view, nil
	case runner.OutcomeDestroyed:
		run.Succeeded = true
		return view, nil
	default:
		run.Succeeded = false
		run.Error = &infrav1.RunError{Kind: msg.Outcome, Message: msg.Error}
		failed(view, run)
		return view, nil
	}
}

// finishRun is the view of obj that decide changes for the finished Job o:
// no active Job, and o as the last run, which the caller completes.
func finishRun(obj Object, o outcome, now metav1.Time) (Object, *infrav1.RunStatus) {
	view := obj.DeepCopyObject().(Object)
	run := &infrav1.RunStatus{Job: o.Job, Operation: o.Operation, StartedAt: o.StartedAt, FinishedAt: &now, Succeeded: o.Succeeded}
	view.GetRunnerStatus().ActiveJob = nil
	view.GetRunnerStatus().LastRun = run
	return view, run
}

// planStatus is status.plan for a plan the Job o reported.
func planStatus(o outcome, p *fingerprint.Report, reason infrav1.PlanReason, now metav1.Time) *infrav1.PlanStatus {
	return &infrav1.PlanStatus{Reason: reason,
		InputsHash: o.InputsHash, Job: o.Job, PlanHash: p.PlanHash,
		Add: int32(p.Add), Change: int32(p.Change), Destroy: int32(p.Destroy),
		OutputChanges: int32(p.OutputChanges), Resources: p.Resources, Truncated: p.Truncated,
		CreatedAt: now, ImageDigest: o.Digest,
	}
}

// awaiting is the message of a plan that waits: its counts and the exact
// commands that approve it.
func awaiting(k Kind, obj Object, p *fingerprint.Report) string {
	msg := fmt.Sprintf("Plan %s (%d to add, %d to change, %d to destroy, %d output changes) waits for approval: %s",
		p.PlanHash, p.Add, p.Change, p.Destroy, p.OutputChanges, approveCommand(k, obj, p.PlanHash))
	if ref := obj.GetRunnerStatus().PendingPlanRef; ref != nil {
		msg += fmt.Sprintf(" (or approve TerraformPlan %s: kubectl captf approve %s -n %s)", ref.Name, ref.Name, obj.GetNamespace())
	}
	return msg
}

// runError is what went wrong with a finished drift, refresh or restore
// Job whose report should have the outcome want: nil when it has it and
// holds what that outcome carries (complete).
func runError(o outcome, want string, complete func(*runner.Message) bool) *infrav1.RunError {
	msg := o.Msg
	switch {
	case o.Unreadable || (msg != nil && msg.Outcome == want && !complete(msg)):
		return &infrav1.RunError{Kind: runner.OutcomeFailed, Message: "the Job's report could not be read"}
	case msg == nil && o.DeadlineExceeded:
		return &infrav1.RunError{Kind: "deadline", Message: "the Job was stopped at its deadline"}
	case msg == nil:
		return &infrav1.RunError{Kind: runner.OutcomeFailed, Message: "the Job left no report"}
	case msg.Outcome != want:
		return &infrav1.RunError{Kind: msg.Outcome, Message: msg.Error}
	}
	return nil
}

// interruption is what an apply Job that ended without a report leaves:
// the mark that has the next apply plan first.
func interruption(o outcome) []Step {
	if o.Operation != infrav1.OperationApply {
		return nil
	}
	return []Step{markInterrupted{}}
}

// failed records a failed run, whatever the Job's own condition says (a
// Job can succeed and leave no readable report). A failed apply keeps
// status.plan and the approval, so the retry (after the backoff) expects
// the same plan.
func failed(obj Object, run *infrav1.RunStatus) {
	reason := ReasonApplyFailed
	switch {
	case run.Error.Kind == runner.OutcomeBadInput:
		// The module refused the inputs; the message names the variables.
		reason = ReasonInvalidInputs
	case run.Operation == infrav1.OperationPlan:
		reason = ReasonPlanFailed
	case run.Operation == infrav1.OperationDestroy:
		reason = ReasonDestroyFailed
	}
	run.Succeeded = false
	obj.GetRunnerStatus().Failures++
	msg := fmt.Sprintf("Job %s failed (%s)", run.Job, run.Error.Kind)
	if run.Error.Message != "" {
		msg += ": " + run.Error.Message
	}
	typ := infrav1.ConditionApplyJobSucceeded
	if run.Operation == infrav1.OperationDestroy {
		typ = infrav1.ConditionReady
	}
	setCondition(obj, typ, false, reason, msg)
	if typ != infrav1.ConditionReady && !IsProvisioned(obj) && obj.GetDeletionTimestamp() == nil {
		// The first apply failed: Ready says so (Cluster API shows its
		// reason as a Machine's InfrastructureReady), not that it runs.
		setCondition(obj, infrav1.ConditionReady, false, reason, msg)
	}
}

// outcomeOf gathers what a finished Job says from the Job and its pods.
func outcomeOf(job *batchv1.Job, pods []corev1.Pod) outcome {
	_, succeeded := JobFinished(job)
	o := outcome{
		Job: job.Name, Operation: infrav1.Operation(job.Labels[LabelOperation]), Succeeded: succeeded,
		InputsHash:    job.Annotations[annotationInputsHash],
		ExportsChange: job.Annotations[annotationExportsChange],
		Approved:      job.Annotations[infrav1.AnnotationApprovedPlan],
		Plan:          job.Annotations[infrav1.AnnotationPlan],
		StartedAt:     job.Status.StartTime,
	}
	o.RestoreSerial, _ = strconv.ParseInt(job.Annotations[annotationRestoreSerial], 10, 64)
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue && c.Reason == batchv1.JobReasonDeadlineExceeded {
			o.DeadlineExceeded = true
		}
	}
	for i := range pods {
		if d := resolvedDigest(&pods[i]); d != "" {
			o.Digest = d
		}
	}
	o.Msg, o.Unreadable = report(pods)
	return o
}

// observeRun counts a finished Job whose outcome was just recorded.
func observeRun(kind string, o outcome) {
	word := "no-report"
	if o.Msg != nil {
		word = o.Msg.Outcome
	}
	runsTotal.WithLabelValues(kind, string(o.Operation), word).Inc()
	switch {
	case word == runner.OutcomePlanChanged:
		planChangedTotal.WithLabelValues(kind).Inc()
	case word == runner.OutcomeDestructive:
		guardBlocksTotal.WithLabelValues(kind).Inc()
	case o.Operation == infrav1.OperationDrift && o.Msg != nil && o.Msg.Drift != nil && o.Msg.Drift.Total() > 0:
		driftFoundTotal.WithLabelValues(kind).Inc()
	}
}

// carriedPlan is the TerraformPlan the apply Job o carried out: the one
// its annotation names, else the one st says waits; "" for none.
func carriedPlan(o outcome, st *infrav1.RunnerStatus) string {
	if o.Plan == "" && st.PendingPlanRef != nil {
		return st.PendingPlanRef.Name
	}
	return o.Plan
}
