package engine

import (
	"context"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/runner"
)

// TestRefreshDueIn: a kind that refreshes does so at once when it never
// did and right after an apply, else one interval after the last refresh
// while things change, and longer while they do not: as long as they
// have not, up to the longest interval; a kind that does not, never.
func TestRefreshDueIn(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(-ago)} }
	pool := testKind{Basics: theTestKind.Basics, refresh: time.Minute, maxRefresh: 10 * time.Minute}
	expecting := pool
	expecting.expecting = true
	applied := func(ago time.Duration) *infrav1.RunStatus {
		return &infrav1.RunStatus{Operation: infrav1.OperationApply, Succeeded: true, FinishedAt: at(ago)}
	}
	for _, tt := range []struct {
		name               string
		kind               testKind
		refreshed, changed *metav1.Time
		lastRun            *infrav1.RunStatus
		want               time.Duration
		refreshes          bool
	}{
		{name: "a kind without refreshes", kind: theTestKind, refreshed: at(time.Hour)},
		{name: "never refreshed", kind: pool, refreshes: true},
		{name: "refreshed 20 s ago", kind: pool, refreshed: at(20 * time.Second), want: 40 * time.Second, refreshes: true},
		{name: "refreshed 2 min ago", kind: pool, refreshed: at(2 * time.Minute), want: -time.Minute, refreshes: true},
		{name: "an apply since", kind: pool, refreshed: at(20 * time.Second), refreshes: true, lastRun: applied(10 * time.Second)},
		{name: "a failed apply since", kind: pool, refreshed: at(20 * time.Second), want: 40 * time.Second, refreshes: true,
			lastRun: &infrav1.RunStatus{Operation: infrav1.OperationApply, FinishedAt: at(10 * time.Second)}},
		{name: "a drift check since", kind: pool, refreshed: at(20 * time.Second), want: 40 * time.Second, refreshes: true,
			lastRun: &infrav1.RunStatus{Operation: infrav1.OperationDrift, Succeeded: true, FinishedAt: at(10 * time.Second)}},
		{name: "an apply just before", kind: pool, refreshed: at(20 * time.Second), want: 40 * time.Second, refreshes: true, lastRun: applied(30 * time.Second)},
		{name: "refreshed 3 min after the apply", kind: pool, refreshed: at(20 * time.Second), want: 160 * time.Second, refreshes: true, lastRun: applied(200 * time.Second)},
		{name: "refreshed an hour after the apply", kind: pool, refreshed: at(20 * time.Second), want: 580 * time.Second, refreshes: true, lastRun: applied(time.Hour)},
		{name: "a change 3 min before the refresh", kind: pool, refreshed: at(20 * time.Second), changed: at(200 * time.Second), want: 160 * time.Second, refreshes: true, lastRun: applied(time.Hour)},
		{name: "a change at the last refresh", kind: pool, refreshed: at(20 * time.Second), changed: at(20 * time.Second), want: 40 * time.Second, refreshes: true, lastRun: applied(time.Hour)},
		{name: "a change and no apply", kind: pool, refreshed: at(20 * time.Second), changed: at(time.Hour), want: 580 * time.Second, refreshes: true},
		{name: "a change under way", kind: expecting, refreshed: at(20 * time.Second), want: 40 * time.Second, refreshes: true, lastRun: applied(time.Hour)},
		{name: "a longest interval below the interval", kind: testKind{Basics: theTestKind.Basics, refresh: time.Hour, maxRefresh: time.Minute},
			refreshed: at(20 * time.Second), want: time.Hour - 20*time.Second, refreshes: true, lastRun: applied(24 * time.Hour)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tc := &infrav1.TerraformCluster{}
			if tt.refreshed != nil {
				tt.kind.Refreshed(tc, *tt.refreshed)
			}
			if tt.changed != nil {
				metav1.SetMetaDataAnnotation(&tc.ObjectMeta, changedAt, tt.changed.Format(time.RFC3339))
			}
			tc.Status.LastRun = tt.lastRun
			r := &Reconciler{Kind: tt.kind}
			got, refreshes, err := r.refreshDueIn(context.Background(), tc, now)
			if err != nil || got != tt.want || refreshes != tt.refreshes {
				t.Errorf("refreshDueIn = %s, %v, %v; want %s, %v", got, refreshes, err, tt.want, tt.refreshes)
			}
		})
	}
}

// TestRefreshesOfAnIdleDay counts the refresh Jobs of an object whose
// refreshes find nothing changed for a day after its apply, at a pool's
// defaults (60 s, 10 min): each waits as long as nothing has changed, so
// they follow about 1, 2½, 5, 10 and 20 minutes after the apply and then
// every 10: 9 in the first hour, at most 6 an hour after it; and a change
// found puts the next one an interval later.
func TestRefreshesOfAnIdleDay(t *testing.T) {
	start := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	pool := testKind{Basics: theTestKind.Basics, refresh: time.Minute, maxRefresh: 10 * time.Minute}
	tc := &infrav1.TerraformCluster{}
	tc.Status.LastRun = &infrav1.RunStatus{Operation: infrav1.OperationApply, Succeeded: true, FinishedAt: &metav1.Time{Time: start}}
	r := &Reconciler{Kind: pool}
	var at []time.Duration
	perHour := map[int]int{}
	for now := start; now.Before(start.Add(24 * time.Hour)); {
		wait, refreshes, err := r.refreshDueIn(context.Background(), tc, now)
		if err != nil || !refreshes {
			t.Fatalf("refreshDueIn: %v, %v", refreshes, err)
		}
		now = now.Add(max(wait, 0) + 5*time.Second) // a refresh Job takes 5 s
		pool.Refreshed(tc, metav1.Time{Time: now})
		at = append(at, now.Sub(start))
		perHour[int(now.Sub(start).Hours())]++
	}
	first := []time.Duration{5 * time.Second, 70 * time.Second, 145 * time.Second, 295 * time.Second, 595 * time.Second, 1195 * time.Second, 1800 * time.Second}
	if !reflect.DeepEqual(at[:len(first)], first) {
		t.Errorf("the first refreshes at %v, want %v", at[:len(first)], first)
	}
	for h := 1; h < 24; h++ {
		if perHour[h] > 6 || perHour[h] < 5 {
			t.Errorf("hour %d: %d refresh Jobs, want 5 or 6", h, perHour[h])
		}
	}
	t.Logf("refresh Jobs per hour of an idle day: %v", perHour)

	// A refresh that finds a change: the next one an interval after it.
	now := start.Add(24 * time.Hour)
	pool.Refreshed(tc, metav1.Time{Time: now})
	metav1.SetMetaDataAnnotation(&tc.ObjectMeta, changedAt, now.Format(time.RFC3339))
	if wait, _, _ := r.refreshDueIn(context.Background(), tc, now); wait != time.Minute {
		t.Errorf("after a change: the next refresh in %s, want 1m0s", wait)
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
			failed: "Refresh p-refresh-1 failed (failed): terraform apply -refresh-only: exit status 1; the next refresh runs as scheduled."},
		{name: "no report", o: outcome{Job: "p-refresh-1", Operation: infrav1.OperationRefresh},
			failed: "Refresh p-refresh-1 failed (failed): the Job left no report; the next refresh runs as scheduled."},
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
			if s, _ := pool.Refresh(context.Background(), nil, view); s.Last == nil || !s.Last.Equal(&now) {
				t.Errorf("last refresh %v, want %v", s.Last, now)
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
