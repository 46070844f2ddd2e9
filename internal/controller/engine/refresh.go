package engine

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/runner"
)

// Refresh Jobs (a pool's membership: members change outside any apply).
// A refresh Job of an idle, provisioned object runs right after every
// successful apply, then one interval after the last one: the kind's
// interval while what the Job reads changes, longer while it stays as it
// is (see RefreshSchedule). It is a refresh-only apply of what the last
// apply ran, which writes a new state only when what the module reads
// changed; its new serial is read like any other (Kind.FromState). It
// changes no infrastructure, needs no approval, and is not kept in the
// object's history.

// refreshDueIn is how long until obj's next refresh Job, and whether its
// kind refreshes it at all. The time between two refreshes is the kind's
// interval, or, when nothing changed for longer than that since the
// last apply, that time (at most MaxInterval): after an apply, refreshes
// follow at one interval, two, four, and so on.
func (r *Reconciler) refreshDueIn(ctx context.Context, obj Object, now time.Time) (time.Duration, bool, error) {
	s, err := r.kind().Refresh(ctx, r.Client, obj)
	if err != nil || s.Interval <= 0 {
		return 0, false, err
	}
	if s.Last == nil {
		return 0, true, nil
	}
	stable := s.ChangedAt
	if run := obj.GetRunnerStatus().LastRun; run != nil && run.Operation == infrav1.OperationApply && run.Succeeded && run.FinishedAt != nil {
		if s.Last.Before(run.FinishedAt) {
			// An apply since the last refresh: members it started come
			// up after it reported.
			return 0, true, nil
		}
		if stable == nil || stable.Before(run.FinishedAt) {
			stable = run.FinishedAt
		}
	}
	wait := s.Interval
	if !s.Expecting && stable != nil {
		if since := s.Last.Sub(stable.Time); since > wait {
			wait = min(since, max(s.MaxInterval, s.Interval))
		}
	}
	return s.Last.Add(wait).Sub(now), true, nil
}

// idleJobs starts what an idle object runs with what the last successful
// apply ran (applied gives it; nil: not at hand): a refresh Job when one
// is due, else a drift check when one is due; otherwise it says when to
// look again. state is the state the decision read.
func (r *Reconciler) idleJobs(ctx context.Context, obj Object, state *stateRead, applied func() (*appliedRun, error)) (ctrl.Result, error) {
	wait, refreshes, err := r.refreshDueIn(ctx, obj, time.Now())
	if err != nil {
		return ctrl.Result{}, err
	}
	if refreshes && wait <= 0 {
		run, err := applied()
		if err != nil || run == nil {
			return ctrl.Result{RequeueAfter: r.recheck()}, err
		}
		return ctrl.Result{}, r.startJob(ctx, obj, run.root, jobRequest{op: infrav1.OperationRefresh, applied: run, lineage: state.lineage()})
	}
	res, err := r.checkDrift(ctx, obj, state, applied)
	if refreshes && err == nil && res.RequeueAfter > wait {
		res.RequeueAfter = wait
	}
	return res, err
}

// decideRefresh is what a finished refresh Job implies: when it ended,
// and a warning if it failed. It is not a run of the object (status.lastRun
// keeps the apply or drift check before it), nor a failure that makes
// anything due: the next refresh comes as after one that changed nothing.
func decideRefresh(k Kind, obj Object, o outcome, now metav1.Time) (Object, []Step) {
	view := obj.DeepCopyObject().(Object)
	view.GetRunnerStatus().ActiveJob = nil
	k.Refreshed(view, now)
	e := runError(o, runner.OutcomeRefreshed, func(*runner.Message) bool { return true })
	if e == nil {
		return view, nil
	}
	note := fmt.Sprintf("Refresh %s failed (%s)", o.Job, e.Kind)
	if e.Message != "" {
		note += ": " + e.Message
	}
	return view, []Step{announce{Key: o.Job, Type: corev1.EventTypeWarning, Reason: infrav1.EventRefreshFailed, Action: "Refresh", Related: o.Job,
		Note: note + "; the next refresh runs as scheduled."}}
}
