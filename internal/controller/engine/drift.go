package engine

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/runner"
)

// Drift checks (spec 000, "Drift is classified separately"; spec 001: they
// continue while a plan waits). A drift Job of a provisioned object runs
// every spec.drift.intervalSeconds, never beside another Job of the
// object, on the inputs the state records: a refresh-only apply, then a
// plan without refresh, counted by action. Under action Remediate, drift
// makes an apply due: at once under Automatic, through an approved plan
// under Manual.

// DefaultDriftInterval is the manager's default time between drift checks.
const DefaultDriftInterval = 30 * time.Minute

// driftInterval is the time between two drift checks of obj; 0: off.
func (r *Reconciler) driftInterval(obj Object) time.Duration {
	if s := obj.GetRunnerSpec().Drift.IntervalSeconds; s != nil {
		return time.Duration(*s) * time.Second
	}
	return r.DriftInterval
}

// driftDueIn is how long until obj's next drift check: the interval after
// the last check (or, before the first, after the last run), plus a fixed
// share of up to a tenth of it derived from the object, so that objects
// made together do not all check at once.
func (r *Reconciler) driftDueIn(obj Object, now time.Time) time.Duration {
	interval := r.driftInterval(obj)
	last := obj.GetCreationTimestamp().Time
	if run := obj.GetRunnerStatus().LastRun; run != nil && run.FinishedAt != nil {
		last = run.FinishedAt.Time
	}
	if c := obj.GetRunnerStatus().LastDriftCheck; c != nil {
		last = c.Time
	}
	h := fnv.New64a()
	h.Write([]byte(obj.GetUID()))
	spread := time.Duration(h.Sum64() % uint64(interval/10+1))
	due := last.Add(interval + spread)
	if c := condition(obj, infrav1.ConditionInfrastructureHealthy); c != nil && c.Reason == infrav1.ReasonProvisioning {
		// Pending health is sampled again sooner: 30 s after it was
		// last sampled, then as long as it has been pending, up to 5 min.
		backoff := min(max(now.Sub(c.LastTransitionTime.Time), pendingFirst), pendingMax)
		if sooner := last.Add(backoff); sooner.Before(due) {
			due = sooner
		}
	}
	return due.Sub(now)
}

// The backoff of sampling pending health.
const (
	pendingFirst = 30 * time.Second
	pendingMax   = 5 * time.Minute
)

// remediating reports whether drift the last check found waits to be
// undone: an apply is due for it (Automatic) or its plan waits (Manual).
func remediating(obj Object) bool {
	c := condition(obj, infrav1.ConditionDriftDetected)
	return c != nil && c.Status == metav1.ConditionTrue &&
		(c.Reason == infrav1.ReasonDriftRemediating || c.Reason == infrav1.ReasonDriftPending)
}

// remediationCap is how many failed remediation runs stop remediation until
// the next check: spec.jobs.failedJobsHistoryLimit, at least one.
func remediationCap(obj Object) int32 {
	return int32(max(1, limit(obj.GetRunnerSpec().Jobs.FailedJobsHistoryLimit)))
}

// remediationStopped reports whether remediation failed too often since
// the last check: the failures it counted make nothing due.
func remediationStopped(obj Object) bool {
	c := condition(obj, infrav1.ConditionDriftDetected)
	return c != nil && c.Reason == infrav1.ReasonDriftRemediationFailed
}

// capRemediation stops a remediation that failed remediationCap times, or
// reports that it stopped before: nothing is due for it, whichever
// reconcile comes (a restart's too), until a later check finds drift
// again or the inputs change (liftRemediationStop).
func capRemediation(obj Object) bool {
	if remediationStopped(obj) {
		return true
	}
	if !remediating(obj) || obj.GetRunnerStatus().Failures < remediationCap(obj) {
		return false
	}
	setCondition(obj, infrav1.ConditionDriftDetected, true, infrav1.ReasonDriftRemediationFailed, fmt.Sprintf(
		"Remediation failed %d times since the last drift check; it is tried again after the next check that still finds drift.", obj.GetRunnerStatus().Failures))
	return true
}

// liftRemediationStop ends a stop of remediation when the inputs change:
// the apply of new inputs is retried after failures like any other, and
// whether drift remains is for the next check to say.
func liftRemediationStop(obj Object) {
	if remediationStopped(obj) {
		setCondition(obj, infrav1.ConditionDriftDetected, unknown, infrav1.ReasonDriftNotChecked,
			"The inputs changed after remediation of drift stopped; the next drift check tells whether drift remains.")
	}
}

// planPredatesDrift reports whether p was made before the drift check whose
// remediation is due: it does not undo that drift, so a new plan is made.
func planPredatesDrift(obj Object, p *infrav1.PlanStatus) bool {
	c := obj.GetRunnerStatus().LastDriftCheck
	return p != nil && c != nil && remediating(obj) && p.CreatedAt.Before(c)
}

// checkDrift starts a drift Job of an idle object when one is due, with
// what the last successful apply ran (what applied gives; nil: it is not
// at hand, no check runs), and otherwise says when to look again.
func (r *Reconciler) checkDrift(ctx context.Context, obj Object, state *stateRead, applied func() (*appliedRun, error)) (ctrl.Result, error) {
	interval := r.driftInterval(obj)
	if interval <= 0 {
		setCondition(obj, infrav1.ConditionDriftDetected, unknown, infrav1.ReasonDriftNotChecked, "Drift checks are off (spec.drift.intervalSeconds is 0, or the manager's --drift-interval).")
		return ctrl.Result{RequeueAfter: r.recheck()}, nil
	}
	if condition(obj, infrav1.ConditionDriftDetected) == nil {
		setCondition(obj, infrav1.ConditionDriftDetected, unknown, infrav1.ReasonDriftNotChecked, fmt.Sprintf("No drift check has run yet; they run every %s.", interval))
	}
	if wait := r.driftDueIn(obj, time.Now()); wait > 0 {
		return ctrl.Result{RequeueAfter: min(r.recheck(), wait)}, nil
	}
	run, err := applied()
	if err != nil || run == nil {
		return ctrl.Result{RequeueAfter: r.recheck()}, err
	}
	return ctrl.Result{}, r.startJob(ctx, obj, run.root, jobRequest{op: infrav1.OperationDrift, applied: run, lineage: state.lineage()})
}

// decideDrift is what a finished drift Job implies. It never counts as a
// failed run: the object's failures and retries are about applies.
func decideDrift(obj Object, o outcome, now metav1.Time) (Object, []Step) {
	view, run := finishRun(obj, o, now)
	st := view.GetRunnerStatus()
	st.LastDriftCheck = &now
	msg := o.Msg
	run.Error = runError(o, runner.OutcomeChecked, func(m *runner.Message) bool { return m.Drift != nil })
	if run.Error != nil {
		run.Succeeded = false
		setCondition(view, infrav1.ConditionDriftJobSucceeded, false, infrav1.ReasonDriftCheckFailed,
			fmt.Sprintf("Drift check %s failed (%s): %s; the next runs in one interval.", o.Job, run.Error.Kind, run.Error.Message))
		if condition(view, infrav1.ConditionDriftDetected) == nil {
			setCondition(view, infrav1.ConditionDriftDetected, unknown, infrav1.ReasonDriftNotChecked, "No drift check has succeeded yet.")
		}
		return view, nil
	}
	d := msg.Drift
	run.Succeeded = true
	run.Drift = &infrav1.DriftReport{
		Create: int32(d.Create), Update: int32(d.Update), Replace: int32(d.Replace), Delete: int32(d.Delete),
		Resources: d.Resources, Truncated: d.Truncated,
	}
	setCondition(view, infrav1.ConditionDriftJobSucceeded, true, infrav1.ReasonDriftCheckSucceeded, fmt.Sprintf("Drift check %s succeeded.", o.Job))
	setHealth(view, msg.Health)
	if c := condition(obj, infrav1.ConditionDriftDetected); c != nil && c.Reason == infrav1.ReasonDriftRemediationFailed {
		// A good check since remediation stopped: the cap starts again.
		st.Failures = 0
	}
	if d.Total() == 0 {
		setCondition(view, infrav1.ConditionDriftDetected, false, infrav1.ReasonNoDrift, fmt.Sprintf("Drift check %s found no drift.", o.Job))
		return view, nil
	}
	found := fmt.Sprintf("%d to create, %d to update, %d to replace, %d to delete: %s",
		d.Create, d.Update, d.Replace, d.Delete, strings.Join(d.Resources, ", "))
	if d.Truncated {
		found += ", …"
	}
	reason, then := infrav1.ReasonDriftReported, "It is reported only (spec.drift.action Report)."
	switch {
	case obj.GetRunnerSpec().Drift.Action != infrav1.DriftActionRemediate:
	case obj.GetRunnerSpec().ApplyPolicy == infrav1.ApplyManual:
		reason, then = infrav1.ReasonDriftPending, "A plan that undoes it will wait for approval."
	default:
		reason, then = infrav1.ReasonDriftRemediating, "An apply undoes it."
	}
	note := fmt.Sprintf("Drift check %s found the infrastructure changed outside terraform (%s). %s", o.Job, found, then)
	setCondition(view, infrav1.ConditionDriftDetected, true, reason, note)
	return view, []Step{announce{Key: o.Job, Type: corev1.EventTypeWarning, Reason: infrav1.EventDriftDetected, Action: "DriftCheck", Related: o.Job, Note: note}}
}

// driftUndone records that a successful apply brought the infrastructure
// back to its configuration: drift found before it is gone.
func driftUndone(obj Object, job string) {
	if c := condition(obj, infrav1.ConditionDriftDetected); c != nil && c.Status == metav1.ConditionTrue {
		setCondition(obj, infrav1.ConditionDriftDetected, false, infrav1.ReasonNoDrift,
			fmt.Sprintf("Apply %s brought the infrastructure back to its configuration; the next drift check confirms it.", job))
	}
}
