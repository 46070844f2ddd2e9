package engine

import (
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/runner"
)

// TestRefreshDueIn: a kind that refreshes does so at once when it never
// did and right after an apply, else one interval after the last refresh;
// a kind that does not, never.
func TestRefreshDueIn(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(-ago)} }
	pool := testKind{Basics: theTestKind.Basics, refresh: time.Minute}
	for _, tt := range []struct {
		name      string
		kind      testKind
		refreshed *metav1.Time
		lastRun   *infrav1.RunStatus
		want      time.Duration
		refreshes bool
	}{
		{name: "a kind without refreshes", kind: theTestKind, refreshed: at(time.Hour)},
		{name: "never refreshed", kind: pool, refreshes: true},
		{name: "refreshed 20 s ago", kind: pool, refreshed: at(20 * time.Second), want: 40 * time.Second, refreshes: true},
		{name: "refreshed 2 min ago", kind: pool, refreshed: at(2 * time.Minute), want: -time.Minute, refreshes: true},
		{name: "an apply since", kind: pool, refreshed: at(20 * time.Second), refreshes: true,
			lastRun: &infrav1.RunStatus{Operation: infrav1.OperationApply, Succeeded: true, FinishedAt: at(10 * time.Second)}},
		{name: "a failed apply since", kind: pool, refreshed: at(20 * time.Second), want: 40 * time.Second, refreshes: true,
			lastRun: &infrav1.RunStatus{Operation: infrav1.OperationApply, FinishedAt: at(10 * time.Second)}},
		{name: "a drift check since", kind: pool, refreshed: at(20 * time.Second), want: 40 * time.Second, refreshes: true,
			lastRun: &infrav1.RunStatus{Operation: infrav1.OperationDrift, Succeeded: true, FinishedAt: at(10 * time.Second)}},
		{name: "an apply before", kind: pool, refreshed: at(20 * time.Second), want: 40 * time.Second, refreshes: true,
			lastRun: &infrav1.RunStatus{Operation: infrav1.OperationApply, Succeeded: true, FinishedAt: at(30 * time.Second)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tc := &infrav1.TerraformCluster{}
			if tt.refreshed != nil {
				tt.kind.Refreshed(tc, *tt.refreshed)
			}
			tc.Status.LastRun = tt.lastRun
			r := &Reconciler{Kind: tt.kind}
			got, refreshes := r.refreshDueIn(tc, now)
			if got != tt.want || refreshes != tt.refreshes {
				t.Errorf("refreshDueIn = %s, %v; want %s, %v", got, refreshes, tt.want, tt.refreshes)
			}
		})
	}
}

// TestDecideRefresh: a finished refresh records when it ended and frees
// the object, whatever its outcome; it is no run of the object (lastRun
// and the failures stay) and a failed one is a warning, never a value.
func TestDecideRefresh(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC))
	pool := testKind{Basics: theTestKind.Basics, refresh: time.Minute}
	for _, tt := range []struct {
		name   string
		o      outcome
		failed string
	}{
		{name: "refreshed", o: outcome{Job: "p-refresh-1", Operation: infrav1.OperationRefresh, Succeeded: true, Msg: &runner.Message{Outcome: runner.OutcomeRefreshed}}},
		{name: "failed", o: outcome{Job: "p-refresh-1", Operation: infrav1.OperationRefresh, Msg: &runner.Message{Outcome: runner.OutcomeFailed, Error: "terraform apply -refresh-only: exit status 1"}},
			failed: "Refresh p-refresh-1 failed (failed): terraform apply -refresh-only: exit status 1; the next refresh runs in one interval."},
		{name: "no report", o: outcome{Job: "p-refresh-1", Operation: infrav1.OperationRefresh},
			failed: "Refresh p-refresh-1 failed (failed): the Job left no report; the next refresh runs in one interval."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tc := &infrav1.TerraformCluster{}
			applied := &infrav1.RunStatus{Job: "p-apply-1", Operation: infrav1.OperationApply, Succeeded: true}
			tc.Status.LastRun, tc.Status.Failures = applied, 1
			tc.Status.ActiveJob = &infrav1.ActiveJob{Name: tt.o.Job, Operation: infrav1.OperationRefresh}
			view, steps := decide(pool, tc, tt.o, now)
			st := view.GetRunnerStatus()
			if st.ActiveJob != nil || !reflect.DeepEqual(st.LastRun, applied) || st.Failures != 1 {
				t.Errorf("activeJob %+v, lastRun %+v, failures %d: want none, the apply, 1", st.ActiveJob, st.LastRun, st.Failures)
			}
			if _, last := pool.Refresh(view); last == nil || !last.Equal(&now) {
				t.Errorf("last refresh %v, want %v", last, now)
			}
			if tt.failed == "" {
				if len(steps) != 0 {
					t.Errorf("steps %+v, want none", steps)
				}
				return
			}
			if len(steps) != 1 {
				t.Fatalf("steps %+v, want one warning", steps)
			}
			if a, ok := steps[0].(announce); !ok || a.Reason != infrav1.EventRefreshFailed || a.Note != tt.failed {
				t.Errorf("step %+v, want a %s warning %q", steps[0], infrav1.EventRefreshFailed, tt.failed)
			}
		})
	}
}
