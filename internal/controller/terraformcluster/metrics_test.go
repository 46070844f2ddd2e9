package terraformcluster

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	infrav1 "github.com/captf/captf/api/v1alpha1"
)

// metric is the value of the series name{labels} in the manager's
// registry (a histogram's sample count), 0 when it has none.
func metric(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if matches(m, labels) {
				switch {
				case m.Counter != nil:
					return m.Counter.GetValue()
				case m.Gauge != nil:
					return m.Gauge.GetValue()
				case m.Histogram != nil:
					return float64(m.Histogram.GetSampleCount())
				}
			}
		}
	}
	return 0
}

func matches(m *dto.Metric, labels map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := labels[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(labels)
}

// TestMetrics: the manager's own metrics follow a Manual object through a
// first apply, a plan that waits, and its approved apply — runs by
// operation and outcome, the plans awaiting approval by namespace and
// kind, and the times from plan to approval and from approval to the
// apply Job.
func TestMetrics(t *testing.T) {
	h := start(t)
	kind := map[string]string{"kind": "TerraformCluster"}
	applied := map[string]string{"kind": "TerraformCluster", "operation": "apply", "outcome": "applied"}
	planned := map[string]string{"kind": "TerraformCluster", "operation": "plan", "outcome": "planned"}
	awaiting := map[string]string{"kind": "TerraformCluster", "namespace": "default"}
	before := map[string]float64{
		"applied":  metric(t, "captf_runs_total", applied),
		"planned":  metric(t, "captf_runs_total", planned),
		"approval": metric(t, "captf_plan_approval_seconds", kind),
		"toJob":    metric(t, "captf_approval_to_job_seconds", kind),
	}
	delta := func(what, name string, labels map[string]string) float64 {
		return metric(t, name, labels) - before[what]
	}
	// A run is counted once its Job is marked processed, two writes after
	// the status that shows its outcome: wait for the count, then check
	// it went no further.
	counted := func(what, name string, labels map[string]string, want float64) float64 {
		h.waitFor(name+" counted", func() bool { return delta(what, name, labels) >= want })
		return delta(what, name, labels)
	}

	tc := h.create("measured", infrav1.ApplyManual, "small")
	h.wait(tc, "first apply", ready)
	if d := counted("applied", "captf_runs_total", applied, 1); d != 1 {
		t.Errorf("captf_runs_total{apply,applied} grew by %v after the first apply, want 1", d)
	}
	if n := metric(t, "captf_plans_awaiting_approval", awaiting); n != 0 {
		t.Errorf("%v plans awaiting approval before any plan", n)
	}

	h.setSize(tc, "large")
	plan := h.waitingPlan(tc, infrav1.ReasonPlanAwaitingApproval)
	if d := counted("planned", "captf_runs_total", planned, 1); d != 1 {
		t.Errorf("captf_runs_total{plan,planned} grew by %v, want 1", d)
	}
	h.waitFor("the plan counted as awaiting approval", func() bool { return metric(t, "captf_plans_awaiting_approval", awaiting) == 1 })

	time.Sleep(1100 * time.Millisecond) // the approval is a second or more after its plan
	if age := metric(t, "captf_oldest_plan_awaiting_seconds", awaiting); age < 1 {
		t.Errorf("the oldest plan awaiting approval has waited %v s, want a second or more", age)
	}
	h.approve(tc, plan.PlanHash)
	h.wait(tc, "approved apply", func(tc *infrav1.TerraformCluster) bool { return ready(tc) && tc.Status.Plan == nil })
	if d := counted("applied", "captf_runs_total", applied, 2); d != 2 {
		t.Errorf("captf_runs_total{apply,applied} grew by %v after the approved apply, want 2", d)
	}
	if d := delta("approval", "captf_plan_approval_seconds", kind); d != 1 {
		t.Errorf("%v observations of captf_plan_approval_seconds, want 1", d)
	}
	if d := delta("toJob", "captf_approval_to_job_seconds", kind); d != 1 {
		t.Errorf("%v observations of captf_approval_to_job_seconds, want 1", d)
	}
	h.waitFor("no plan awaiting approval", func() bool { return metric(t, "captf_plans_awaiting_approval", awaiting) == 0 })
}

// waitFor polls cond for up to 30 s.
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: not within 30 s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
