package engine

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/runner"
	"github.com/captf/captf/pkg/fingerprint"
)

// TestDecide: what each finished Job implies — the status decide returns
// and the steps that make the outcome durable. A step left out here is a
// consequence the manager would forget (an approval never consumed, a
// plan left Pending); a step too many is one it would do twice.
func TestDecide(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	const digest = "sha256:aaaa"
	changes := &fingerprint.Report{Change: 1, Resources: []string{"terraform_data.node (update)"}, PlanHash: "p2:new"}
	empty := &fingerprint.Report{PlanHash: fingerprint.EmptyPlanHash}
	waiting := func(tc *infrav1.TerraformCluster) {
		tc.Status.Plan = &infrav1.PlanStatus{Job: "demo-plan-1", PlanHash: "p2:old", InputsHash: "h2:in"}
		tc.Status.PendingPlanRef = &infrav1.PlanReference{Name: "demo-old"}
		tc.Status.Failures = 2
	}
	fresh := PlanName("demo", "demo-apply-1", "p2:new")

	for _, tt := range []struct {
		name   string
		before func(*infrav1.TerraformCluster)
		// automatic: applyPolicy Automatic; otherwise Manual, where plans
		// come from.
		automatic bool
		o         outcome
		steps     []Step
		check     func(t *testing.T, st infrav1.TerraformClusterStatus)
	}{{
		name: "a plan with changes waits in a TerraformPlan",
		o:    outcome{Job: "demo-plan-1", Operation: infrav1.OperationPlan, Succeeded: true, InputsHash: "h2:in", Digest: digest, Msg: &runner.Message{Outcome: runner.OutcomePlanned, Plan: changes}},
		steps: []Step{
			openPlan{Name: PlanName("demo", "demo-plan-1", "p2:new"), Job: "demo-plan-1", InputsHash: "h2:in", Digest: digest, Reason: infrav1.ReasonManual, Report: changes},
			announce{Key: PlanName("demo", "demo-plan-1", "p2:new"), Type: corev1.EventTypeNormal, Reason: infrav1.EventPlanReady, Action: "Plan", Related: "demo-plan-1",
				Note: "Plan p2:new waits for approval: 0 to add, 1 to change, 0 to destroy, 0 output changes."},
		},
		check: func(t *testing.T, st infrav1.TerraformClusterStatus) {
			if st.Plan == nil || st.Plan.PlanHash != "p2:new" || st.Plan.ImageDigest != digest || st.Plan.Job != "demo-plan-1" {
				t.Errorf("status.plan %+v", st.Plan)
			}
			if st.PendingPlanRef == nil || st.PendingPlanRef.Name != PlanName("demo", "demo-plan-1", "p2:new") {
				t.Errorf("pendingPlanRef %+v", st.PendingPlanRef)
			}
			wantReason(t, st, infrav1.ReasonPlanAwaitingApproval)
		},
	}, {
		name: "an empty plan opens nothing and applies without approval",
		o:    outcome{Job: "demo-plan-1", Operation: infrav1.OperationPlan, Succeeded: true, Msg: &runner.Message{Outcome: runner.OutcomePlanned, Plan: empty}},
		check: func(t *testing.T, st infrav1.TerraformClusterStatus) {
			if st.Plan == nil || st.Plan.PlanHash != fingerprint.EmptyPlanHash || st.PendingPlanRef != nil {
				t.Errorf("status.plan %+v, pendingPlanRef %+v", st.Plan, st.PendingPlanRef)
			}
			wantReason(t, st, ReasonApplying)
		},
	}, {
		name:   "a planned report without a plan is a failed run, not a panic",
		before: waiting,
		o:      outcome{Job: "demo-plan-2", Operation: infrav1.OperationPlan, Succeeded: true, Msg: &runner.Message{Outcome: runner.OutcomePlanned}},
		check: func(t *testing.T, st infrav1.TerraformClusterStatus) {
			if st.LastRun.Succeeded || st.LastRun.Error == nil || st.Failures != 3 {
				t.Errorf("lastRun %+v, failures %d", st.LastRun, st.Failures)
			}
			wantReason(t, st, ReasonPlanFailed)
		},
	}, {
		name:   "an unreadable report is a failed run",
		before: waiting,
		o:      outcome{Job: "demo-apply-1", Operation: infrav1.OperationApply, Succeeded: true, Unreadable: true, Approved: "p2:old", Plan: "demo-old"},
		check: func(t *testing.T, st infrav1.TerraformClusterStatus) {
			if st.LastRun.Succeeded || st.Plan == nil || st.PendingPlanRef == nil {
				t.Errorf("lastRun %+v; a failed apply keeps the plan and its approval: %+v %+v", st.LastRun, st.Plan, st.PendingPlanRef)
			}
			wantReason(t, st, ReasonApplyFailed)
		},
	}, {
		name:  "an apply stopped at its deadline without a report leaves the object guarded",
		o:     outcome{Job: "demo-apply-1", Operation: infrav1.OperationApply, DeadlineExceeded: true},
		steps: []Step{markInterrupted{}},
		check: func(t *testing.T, st infrav1.TerraformClusterStatus) {
			if st.LastRun.Error == nil || st.LastRun.Error.Kind != "deadline" {
				t.Errorf("lastRun %+v", st.LastRun)
			}
		},
	}, {
		name:  "an apply that left no report leaves the object guarded",
		o:     outcome{Job: "demo-apply-1", Operation: infrav1.OperationApply},
		steps: []Step{markInterrupted{}},
	}, {
		name: "a plan Job stopped at its deadline leaves no mark: it applied nothing",
		o:    outcome{Job: "demo-plan-1", Operation: infrav1.OperationPlan, DeadlineExceeded: true},
	}, {
		name:      "under Automatic the guard's stopped plan is no failure and names what it deletes",
		automatic: true,
		o: outcome{Job: "demo-apply-1", Operation: infrav1.OperationApply, Msg: &runner.Message{Outcome: runner.OutcomeDestructive, Error: "x",
			Guarded: &runner.Changes{Update: 1, Replace: 1, Resources: []string{"a.b (update)", "a.c (replace)"}}}},
		steps: []Step{announce{Key: "demo-apply-1", Type: corev1.EventTypeWarning, Reason: infrav1.EventDestructivePlanBlocked, Action: "Apply", Related: "demo-apply-1",
			Note: "Job demo-apply-1 planned first and applied nothing: the plan deletes or replaces resources (1 to replace, 0 to delete: a.c (replace)). A plan of these changes is made next and waits for approval (or set spec.allowDestructivePlans)."}},
		check: func(t *testing.T, st infrav1.TerraformClusterStatus) {
			if st.Failures != 0 || !blocked(st.LastRun) || st.Plan != nil {
				t.Errorf("status %+v", st)
			}
			wantReason(t, st, infrav1.ReasonDestructivePlanBlocked)
		},
	}, {
		name:      "under Automatic a destructive plan waits with reason Destructive",
		automatic: true,
		o: outcome{Job: "demo-plan-1", Operation: infrav1.OperationPlan, Succeeded: true, InputsHash: "h2:in",
			Msg: &runner.Message{Outcome: runner.OutcomePlanned, Plan: &fingerprint.Report{Add: 1, Destroy: 1, Replace: 1, Resources: []string{"a.c (replace)"}, PlanHash: "p2:new"}}},
		steps: []Step{
			openPlan{Name: PlanName("demo", "demo-plan-1", "p2:new"), Job: "demo-plan-1", InputsHash: "h2:in", Reason: infrav1.ReasonDestructive,
				Report: &fingerprint.Report{Add: 1, Destroy: 1, Replace: 1, Resources: []string{"a.c (replace)"}, PlanHash: "p2:new"}},
			announce{Key: PlanName("demo", "demo-plan-1", "p2:new"), Type: corev1.EventTypeNormal, Reason: infrav1.EventPlanReady, Action: "Plan", Related: "demo-plan-1",
				Note: "Plan p2:new waits for approval: 1 to add, 0 to change, 1 to destroy, 0 output changes."},
		},
		check: func(t *testing.T, st infrav1.TerraformClusterStatus) {
			if st.Plan == nil || st.Plan.Reason != infrav1.ReasonDestructive {
				t.Errorf("status.plan %+v", st.Plan)
			}
		},
	}, {
		name:      "under Automatic a plan that deletes nothing does not wait",
		automatic: true,
		o:         outcome{Job: "demo-plan-1", Operation: infrav1.OperationPlan, Succeeded: true, Msg: &runner.Message{Outcome: runner.OutcomePlanned, Plan: changes}},
		check: func(t *testing.T, st infrav1.TerraformClusterStatus) {
			if st.Plan != nil || st.PendingPlanRef != nil {
				t.Errorf("status.plan %+v, pendingPlanRef %+v", st.Plan, st.PendingPlanRef)
			}
			wantReason(t, st, ReasonApplying)
		},
	}, {
		name:   "an approved apply consumes its approval, finishes its plan and announces it once; the kind publishes after the state is owned",
		before: waiting,
		o: outcome{Job: "demo-apply-1", Operation: infrav1.OperationApply, Succeeded: true, Approved: "p2:old", Plan: "demo-old", Digest: digest,
			Msg: &runner.Message{Outcome: runner.OutcomeApplied, Endpoint: &runner.Endpoint{Host: "10.0.0.1", Port: 6443},
				FailureDomains: []runner.FailureDomain{{Name: "a", ControlPlane: true}, {Name: "b", Attributes: map[string]string{"k": "v"}}}}},
		steps: []Step{
			recordApplied{Digest: digest, Pin: true}, ownState{}, published{Host: "10.0.0.1"}, consumeApproval{Hash: "p2:old"},
			finishPlan{Name: "demo-old", Phase: infrav1.PlanApplied, Reason: infrav1.ReasonPlanApplied, Message: "The apply planned exactly these changes and applied them."},
			announce{Key: "demo-old", Type: corev1.EventTypeNormal, Reason: infrav1.EventPlanApplied, Action: "Apply", Related: "demo-apply-1", Note: "Plan p2:old applied."},
		},
		check: func(t *testing.T, st infrav1.TerraformClusterStatus) {
			if st.Plan != nil || st.PendingPlanRef != nil || st.Failures != 0 || !st.LastRun.Succeeded {
				t.Errorf("status %+v", st)
			}
		},
	}, {
		name:  "the first apply marks the state applied and owns it, nothing else",
		o:     outcome{Job: "demo-apply-1", Operation: infrav1.OperationApply, Succeeded: true, Msg: &runner.Message{Outcome: runner.OutcomeNoChanges}},
		steps: []Step{recordApplied{}, ownState{}},
	}, {
		name:   "a changed plan fails the approved plan and opens the new one",
		before: waiting,
		o: outcome{Job: "demo-apply-1", Operation: infrav1.OperationApply, Approved: "p2:old", Plan: "demo-old", InputsHash: "h2:in", Digest: digest,
			Msg: &runner.Message{Outcome: runner.OutcomePlanChanged, Plan: changes}},
		steps: []Step{
			annotateJob{Key: infrav1.AnnotationPlanChanged, Value: "p2:new"},
			finishPlan{Name: "demo-old", Phase: infrav1.PlanFailed, Reason: infrav1.ReasonApplyPlanChanged, Message: "The apply found other changes than the approved ones and applied nothing; a new plan waits."},
			openPlan{Name: fresh, Job: "demo-apply-1", InputsHash: "h2:in", Digest: digest, Reason: infrav1.ReasonManual, Report: changes},
			announce{Key: "demo-apply-1", Type: corev1.EventTypeWarning, Reason: infrav1.EventPlanChanged, Action: "Apply", Related: "demo-apply-1",
				Note: "The plan moved since p2:old was approved; nothing was applied. The new plan p2:new waits for approval."},
		},
		check: func(t *testing.T, st infrav1.TerraformClusterStatus) {
			if st.Plan == nil || st.Plan.PlanHash != "p2:new" || st.PendingPlanRef == nil || st.PendingPlanRef.Name != fresh || st.Failures != 2 {
				t.Errorf("status.plan %+v, pendingPlanRef %+v, failures %d (a changed plan is no failure)", st.Plan, st.PendingPlanRef, st.Failures)
			}
		},
	}, {
		name:   "a plan that came back empty after an approval is a changed plan with no TerraformPlan",
		before: waiting,
		o: outcome{Job: "demo-apply-1", Operation: infrav1.OperationApply, Approved: "p2:old", Plan: "demo-old",
			Msg: &runner.Message{Outcome: runner.OutcomePlanChanged, Plan: empty}},
		steps: []Step{
			annotateJob{Key: infrav1.AnnotationPlanChanged, Value: fingerprint.EmptyPlanHash},
			finishPlan{Name: "demo-old", Phase: infrav1.PlanFailed, Reason: infrav1.ReasonApplyPlanChanged, Message: "The apply found other changes than the approved ones and applied nothing; a new plan waits."},
			announce{Key: "demo-apply-1", Type: corev1.EventTypeWarning, Reason: infrav1.EventPlanChanged, Action: "Apply", Related: "demo-apply-1",
				Note: "The plan moved since p2:old was approved; nothing was applied. The new plan is empty and applies without approval."},
		},
		check: func(t *testing.T, st infrav1.TerraformClusterStatus) {
			if st.PendingPlanRef != nil || st.Plan == nil || st.Plan.PlanHash != fingerprint.EmptyPlanHash {
				t.Errorf("status.plan %+v, pendingPlanRef %+v", st.Plan, st.PendingPlanRef)
			}
		},
	}, {
		name:   "a failed approved apply keeps the plan and the approval for the retry",
		before: waiting,
		o: outcome{Job: "demo-apply-1", Operation: infrav1.OperationApply, Approved: "p2:old", Plan: "demo-old",
			Msg: &runner.Message{Outcome: runner.OutcomeFailed, Error: "provider error"}},
		check: func(t *testing.T, st infrav1.TerraformClusterStatus) {
			if st.Plan == nil || st.Plan.PlanHash != "p2:old" || st.PendingPlanRef == nil || st.Failures != 3 {
				t.Errorf("status.plan %+v, pendingPlanRef %+v, failures %d", st.Plan, st.PendingPlanRef, st.Failures)
			}
			wantReason(t, st, ReasonApplyFailed)
		},
	}, {
		// Status names an approved apply as active only once its plan
		// moved to Approved and PlanApproved was announced; a Job that
		// finished before its start was recorded does both first.
		name: "an approved apply whose start was not recorded moves its plan to Approved first",
		before: func(tc *infrav1.TerraformCluster) {
			waiting(tc)
			tc.Status.ActiveJob = nil
		},
		o: outcome{Job: "demo-apply-1", Operation: infrav1.OperationApply, Approved: "p2:old", Plan: "demo-old",
			Msg: &runner.Message{Outcome: runner.OutcomeFailed, Error: "provider error"}},
		steps: []Step{approvalStarted{}},
		check: func(t *testing.T, st infrav1.TerraformClusterStatus) {
			if st.Plan == nil || st.Plan.PlanHash != "p2:old" || st.PendingPlanRef == nil || st.Failures != 3 {
				t.Errorf("status.plan %+v, pendingPlanRef %+v, failures %d", st.Plan, st.PendingPlanRef, st.Failures)
			}
			wantReason(t, st, ReasonApplyFailed)
		},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			tc := &infrav1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "ns"}}
			tc.Spec.ApplyPolicy = infrav1.ApplyManual
			if tt.automatic {
				tc.Spec.ApplyPolicy = infrav1.ApplyAutomatic
			}
			tc.Status.ActiveJob = &infrav1.ActiveJob{Name: tt.o.Job}
			if tt.before != nil {
				tt.before(tc)
			}
			unchanged := tc.DeepCopy()
			got, steps := decide(theTestKind, tc, tt.o, now)
			st := got.(*infrav1.TerraformCluster).Status
			if diff := cmp.Diff(tt.steps, steps); diff != "" {
				t.Errorf("steps (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(unchanged, tc); diff != "" {
				t.Errorf("decide changed its input (-before +after):\n%s", diff)
			}
			if st.ActiveJob != nil || st.LastRun == nil || st.LastRun.Job != tt.o.Job || !st.LastRun.FinishedAt.Equal(&now) {
				t.Errorf("activeJob %+v, lastRun %+v", st.ActiveJob, st.LastRun)
			}
			if tt.check != nil {
				tt.check(t, st)
			}
		})
	}
}

func wantReason(t *testing.T, st infrav1.TerraformClusterStatus, reason string) {
	t.Helper()
	for _, c := range st.Conditions {
		if c.Type == infrav1.ConditionApplyJobSucceeded {
			if c.Reason != reason {
				t.Errorf("%s reason %q, want %q", c.Type, c.Reason, reason)
			}
			return
		}
	}
	t.Errorf("no %s condition, want reason %q", infrav1.ConditionApplyJobSucceeded, reason)
}

// TestReport: the runner's report is read from the runner container's
// termination message; one that is not a report is unreadable (a failed
// run), never a nil plan to dereference.
func TestReport(t *testing.T) {
	pod := func(msg string) []corev1.Pod {
		return []corev1.Pod{{Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "other", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: `{"outcome":"applied"}`}}},
			{Name: containerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Message: msg}}},
		}}}}
	}
	for _, tt := range []struct {
		msg        string
		outcome    string
		unreadable bool
	}{
		{msg: `{"operation":"plan","outcome":"planned","plan":{"planHash":"p2:x"}}`, outcome: runner.OutcomePlanned},
		{msg: `panic: runtime error`, unreadable: true},
		{msg: `{"operation":"plan"}`, unreadable: true},
		{msg: `{"outcome":"planned","plan":`, unreadable: true},
		{msg: ``},
	} {
		m, unreadable := report(pod(tt.msg))
		got := ""
		if m != nil {
			got = m.Outcome
		}
		if got != tt.outcome || unreadable != tt.unreadable {
			t.Errorf("report(%q) = %q, unreadable %v; want %q, %v", tt.msg, got, unreadable, tt.outcome, tt.unreadable)
		}
	}
}

// TestErrorRetriesCapped: after a long run of failures — an outage of the
// API server or the webhook — the next try still comes within
// ErrorRetryMax, so an outcome is recorded soon after the server answers.
func TestErrorRetriesCapped(t *testing.T) {
	rl := errorRetries()
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "a"}}
	var last time.Duration
	for range 40 {
		last = rl.When(req)
	}
	if last != ErrorRetryMax {
		t.Fatalf("wait after 40 failures = %v, want the cap %v", last, ErrorRetryMax)
	}
	rl.Forget(req)
	if first := rl.When(req); first > 10*time.Millisecond {
		t.Fatalf("first wait after a success = %v, want it short again", first)
	}
}

// TestDecideDrift: what a drift check implies, by action and policy; a
// failed check is no failed run.
func TestDecideDrift(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	found := &runner.Changes{Update: 1, Delete: 1, Resources: []string{"a.x (update)", "a.y (delete)"}}
	for _, tt := range []struct {
		name    string
		policy  infrav1.ApplyPolicy
		action  infrav1.DriftAction
		capped  bool
		msg     *runner.Message
		reason  string
		event   bool
		failure bool
	}{
		{name: "none", msg: &runner.Message{Outcome: runner.OutcomeChecked, Drift: &runner.Changes{}}, reason: infrav1.ReasonNoDrift},
		{name: "reported", msg: &runner.Message{Outcome: runner.OutcomeChecked, Drift: found}, reason: infrav1.ReasonDriftReported, event: true},
		{name: "remediating", policy: infrav1.ApplyAutomatic, action: infrav1.DriftActionRemediate, msg: &runner.Message{Outcome: runner.OutcomeChecked, Drift: found}, reason: infrav1.ReasonDriftRemediating, event: true},
		{name: "pending", policy: infrav1.ApplyManual, action: infrav1.DriftActionRemediate, msg: &runner.Message{Outcome: runner.OutcomeChecked, Drift: found}, reason: infrav1.ReasonDriftPending, event: true},
		{name: "after the cap, a good check starts again", policy: infrav1.ApplyAutomatic, action: infrav1.DriftActionRemediate, capped: true, msg: &runner.Message{Outcome: runner.OutcomeChecked, Drift: found}, reason: infrav1.ReasonDriftRemediating, event: true},
		{name: "failed", msg: &runner.Message{Outcome: runner.OutcomeFailed, Error: "terraform plan: exit status 1"}, reason: infrav1.ReasonDriftNotChecked, failure: true},
		{name: "a checked report without counts", msg: &runner.Message{Outcome: runner.OutcomeChecked}, reason: infrav1.ReasonDriftNotChecked, failure: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tc := &infrav1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "ns"}}
			tc.Spec.ApplyPolicy, tc.Spec.Drift.Action = tt.policy, tt.action
			tc.Status.Failures = 1
			if tt.capped {
				tc.Status.Failures = 3
				setCondition(tc, infrav1.ConditionDriftDetected, true, infrav1.ReasonDriftRemediationFailed, "")
			}
			view, steps := decide(theTestKind, tc, outcome{Job: "demo-drift-1", Operation: infrav1.OperationDrift, Succeeded: !tt.failure, Msg: tt.msg}, now)
			st := view.(*infrav1.TerraformCluster).Status
			if c := condition(view, infrav1.ConditionDriftDetected); c == nil || c.Reason != tt.reason {
				t.Errorf("DriftDetected %+v, want %s", c, tt.reason)
			}
			if c := condition(view, infrav1.ConditionDriftJobSucceeded); c == nil || (c.Status == metav1.ConditionTrue) == tt.failure {
				t.Errorf("DriftJobSucceeded %+v", c)
			}
			if (len(steps) == 1) != tt.event {
				t.Errorf("steps %+v", steps)
			}
			wantFailures := int32(1)
			if tt.capped {
				wantFailures = 0
			}
			if st.Failures != wantFailures || st.LastDriftCheck == nil || failedRun(st.LastRun) {
				t.Errorf("failures %d, lastDriftCheck %v, lastRun %+v: a drift check counts toward no retry", st.Failures, st.LastDriftCheck, st.LastRun)
			}
			if !tt.failure && (st.LastRun.Drift == nil || st.LastRun.Drift.Update != int32(tt.msg.Drift.Update)) {
				t.Errorf("lastRun.drift %+v", st.LastRun.Drift)
			}
		})
	}
}

// TestDecideRestore: a restore Job's outcome records the serial whatever
// happened, counts no failure and makes nothing due; success removes the
// annotation, owns the state Secrets again and has the state backed up
// again; failure says so once.
func TestDecideRestore(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	for _, tt := range []struct {
		name   string
		o      outcome
		reason string
		steps  []string
	}{
		{name: "restored", o: outcome{Succeeded: true, Msg: &runner.Message{Outcome: runner.OutcomeRestored, Restored: &runner.Restored{Serial: 7, StateSerial: 8, Resources: 3}}},
			reason: infrav1.ReasonRestored, steps: []string{"announce", "restoreDone", "ownState"}},
		{name: "a bad backup", o: outcome{Msg: &runner.Message{Outcome: runner.OutcomeBadInput, Error: "backup chunk-1: corrupt state"}},
			reason: infrav1.ReasonRestoreFailed, steps: []string{"announce"}},
		{name: "no report", o: outcome{}, reason: infrav1.ReasonRestoreFailed, steps: []string{"announce"}},
		{name: "a restored report without counts", o: outcome{Succeeded: true, Msg: &runner.Message{Outcome: runner.OutcomeRestored}},
			reason: infrav1.ReasonRestoreFailed, steps: []string{"announce"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tc := &infrav1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "ns"}}
			tc.Status.Failures = 2
			tc.Status.StateSerial = ptr.To(int64(11))
			o := tt.o
			o.Job, o.Operation, o.RestoreSerial = "demo-restore-1", infrav1.OperationRestore, 7
			view, steps := decide(theTestKind, tc, o, now)
			st := view.(*infrav1.TerraformCluster).Status
			if c := condition(view, infrav1.ConditionStateRestored); c == nil || c.Reason != tt.reason {
				t.Errorf("StateRestored %+v, want %s", c, tt.reason)
			}
			if st.LastRestoredSerial == nil || *st.LastRestoredSerial != 7 || st.Failures != 2 || failedRun(st.LastRun) {
				t.Errorf("lastRestoredSerial %v, failures %d, failed run %v", st.LastRestoredSerial, st.Failures, failedRun(st.LastRun))
			}
			if restored := tt.reason == infrav1.ReasonRestored; (st.StateSerial == nil) != restored {
				t.Errorf("stateSerial %v after %s", st.StateSerial, tt.reason)
			}
			var got []string
			for _, s := range steps {
				got = append(got, strings.TrimPrefix(fmt.Sprintf("%T", s), "engine."))
			}
			if !slices.Equal(got, tt.steps) {
				t.Errorf("steps %v, want %v", got, tt.steps)
			}
		})
	}
}

// planless is testKind for a kind that takes no TerraformPlan (a
// machine): its plans wait in status.plan alone, approved by annotation.
type planless struct{ testKind }

func (planless) Plans() bool { return false }

// TestDecidePlanless: for a kind that takes no TerraformPlan, a plan that
// waits (the guard stopped it, or it moved) opens none and names none in
// status.pendingPlanRef, and every message names the annotation that
// approves it once.
func TestDecidePlanless(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	destructive := &fingerprint.Report{Add: 1, Destroy: 1, Replace: 1, Resources: []string{"captftest_file.node (replace)"}, PlanHash: "p2:new"}
	guarded := &runner.Changes{Replace: 1, Resources: []string{"captftest_file.node (replace)"}}
	for _, tt := range []struct {
		name   string
		before func(*infrav1.TerraformCluster)
		o      outcome
		reason string
		steps  []string
	}{
		{name: "the guard stops the retried apply",
			o:      outcome{Job: "demo-apply-1", Operation: infrav1.OperationApply, Msg: &runner.Message{Outcome: runner.OutcomeDestructive, Guarded: guarded}},
			reason: infrav1.ReasonDestructivePlanBlocked, steps: []string{"announce"}},
		{name: "its plan waits",
			before: func(tc *infrav1.TerraformCluster) {
				tc.Status.LastRun = &infrav1.RunStatus{Job: "demo-apply-1", Operation: infrav1.OperationApply, Error: &infrav1.RunError{Kind: infrav1.ErrorKindDestructivePlanBlocked}}
			},
			o:      outcome{Job: "demo-plan-1", Operation: infrav1.OperationPlan, Succeeded: true, InputsHash: "h2:in", Msg: &runner.Message{Outcome: runner.OutcomePlanned, Plan: destructive}},
			reason: infrav1.ReasonPlanAwaitingApproval, steps: []string{"announce"}},
		{name: "the approved plan moved",
			before: func(tc *infrav1.TerraformCluster) {
				tc.Status.Plan = &infrav1.PlanStatus{Job: "demo-plan-1", PlanHash: "p2:old", InputsHash: "h2:in", Reason: infrav1.ReasonDestructive}
			},
			o:      outcome{Job: "demo-apply-2", Operation: infrav1.OperationApply, Approved: "p2:old", Msg: &runner.Message{Outcome: runner.OutcomePlanChanged, Plan: destructive}},
			reason: infrav1.ReasonPlanChanged, steps: []string{"approvalStarted", "annotateJob", "announce"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tc := &infrav1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "ns"}}
			tc.Spec.ApplyPolicy = infrav1.ApplyAutomatic
			if tt.before != nil {
				tt.before(tc)
			}
			view, steps := decide(planless{}, tc, tt.o, now)
			st := view.(*infrav1.TerraformCluster).Status
			if st.PendingPlanRef != nil {
				t.Errorf("pendingPlanRef %+v for a kind that takes no TerraformPlan", st.PendingPlanRef)
			}
			c := condition(view, infrav1.ConditionApplyJobSucceeded)
			if c == nil || c.Reason != tt.reason || !strings.Contains(c.Message, infrav1.AnnotationApproveDestructivePlan) || strings.Contains(c.Message, "TerraformPlan") {
				t.Errorf("ApplyJobSucceeded %+v, want reason %s naming %s and no TerraformPlan", c, tt.reason, infrav1.AnnotationApproveDestructivePlan)
			}
			var got []string
			for _, s := range steps {
				got = append(got, strings.TrimPrefix(fmt.Sprintf("%T", s), "engine."))
			}
			if !slices.Equal(got, tt.steps) {
				t.Errorf("steps %v, want %v", got, tt.steps)
			}
		})
	}
}
