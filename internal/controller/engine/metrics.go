package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	infrav1 "github.com/captf/captf/api/v1alpha1"
)

// The metrics endpoint (HTTPS by default) asks the API server whether its
// caller is who it says and may get /metrics:
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// The manager's own metrics, in controller-runtime's registry (served with
// its others on the metrics endpoint). Labels hold kinds, operations,
// outcomes and namespaces, never a name or a value.
var (
	runsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "captf_runs_total",
		Help: "Runner Jobs whose outcome was recorded, by kind, operation and the runner's outcome (no-report when the Job left none).",
	}, []string{"kind", "operation", "outcome"})
	planChangedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "captf_plan_changed_total",
		Help: "Approved applies that applied nothing because the fresh plan moved.",
	}, []string{"kind"})
	guardBlocksTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "captf_guard_blocks_total",
		Help: "Applies the destructive-plan guard stopped.",
	}, []string{"kind"})
	driftFoundTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "captf_drift_found_total",
		Help: "Drift checks that found the infrastructure changed outside terraform.",
	}, []string{"kind"})
	backupsFailedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "captf_backups_failed_total",
		Help: "State backups that could not be written (each retried).",
	}, []string{"kind"})
	stateLostTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "captf_state_lost_total",
		Help: "Objects found to have lost their state (once per loss, when its StateLost event is made).",
	}, []string{"kind"})
	approvalSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "captf_plan_approval_seconds",
		Help:    "From a plan waiting for approval (its TerraformPlan made) to its approval.",
		Buckets: []float64{60, 300, 900, 3600, 4 * 3600, 24 * 3600, 7 * 24 * 3600},
	}, []string{"kind"})
	approvalToJobSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "captf_approval_to_job_seconds",
		Help:    "From an approval to the creation of the apply Job that carries it out.",
		Buckets: []float64{0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900},
	}, []string{"kind"})
	plansAwaiting = &awaitingCollector{
		count: prometheus.NewDesc("captf_plans_awaiting_approval",
			"TerraformPlans waiting for an approval, by namespace and the kind of their target.", []string{"namespace", "kind"}, nil),
		oldest: prometheus.NewDesc("captf_oldest_plan_awaiting_seconds",
			"How long the oldest TerraformPlan waiting for an approval has waited, by namespace and the kind of its target.", []string{"namespace", "kind"}, nil),
	}
)

func init() {
	ctrlmetrics.Registry.MustRegister(runsTotal, planChangedTotal, guardBlocksTotal, driftFoundTotal,
		backupsFailedTotal, stateLostTotal, approvalSeconds, approvalToJobSeconds, plansAwaiting)
}

// writtenAt is when the field at path was last written, by the manager of
// obj's managedFields that owns it.
func writtenAt(obj metav1.Object, path ...string) (time.Time, bool) {
	for _, m := range obj.GetManagedFields() {
		if m.FieldsV1 == nil || m.Time == nil || !bytes.Contains(m.FieldsV1.Raw, []byte(path[len(path)-1])) {
			continue
		}
		var fields map[string]json.RawMessage
		if json.Unmarshal(m.FieldsV1.Raw, &fields) != nil {
			continue
		}
		found := true
		for _, p := range path {
			raw, ok := fields[p]
			if !ok {
				found = false
				break
			}
			fields = nil
			_ = json.Unmarshal(raw, &fields)
		}
		if found {
			return m.Time.Time, true
		}
	}
	return time.Time{}, false
}

// awaitingCollector counts, at each scrape, the TerraformPlans the
// manager's cache holds in phase Pending, and the age of the oldest.
type awaitingCollector struct {
	count, oldest *prometheus.Desc
	// reader is the cache of the manager that set it up last.
	reader atomic.Pointer[client.Reader]
}

func (c *awaitingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.count; ch <- c.oldest }

func (c *awaitingCollector) Collect(ch chan<- prometheus.Metric) {
	reader := c.reader.Load()
	if reader == nil {
		return
	}
	var list infrav1.TerraformPlanList
	if err := (*reader).List(context.Background(), &list, client.MatchingLabels{infrav1.LabelPlanPhase: string(infrav1.PlanPending)}); err != nil {
		return
	}
	type key struct{ namespace, kind string }
	counts, oldest := map[key]int{}, map[key]time.Time{}
	for _, p := range list.Items {
		k := key{p.Namespace, p.Spec.TargetRef.Kind}
		counts[k]++
		if t, ok := oldest[k]; !ok || p.CreationTimestamp.Time.Before(t) {
			oldest[k] = p.CreationTimestamp.Time
		}
	}
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.count, prometheus.GaugeValue, float64(n), k.namespace, k.kind)
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, time.Since(oldest[k]).Seconds(), k.namespace, k.kind)
	}
}
