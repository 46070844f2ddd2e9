package capi

import (
	"context"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/testenv"
)

// TestMachineJob: a cluster's Job waits while an apply or destroy Job of
// one of its machines or pools has not finished, among the Jobs read from
// the API server by their captf.io/cluster label; a drift check of a
// machine, a finished apply and a machine of another cluster do not hold
// it.
func TestMachineJob(t *testing.T) {
	env := testenv.Start(t, "../../..")
	ctx := context.Background()
	tc := &infrav1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Name: "fleet", Namespace: "default"}}
	job := func(name, cluster string, op infrav1.Operation) *batchv1.Job {
		t.Helper()
		kind := "TerraformMachine"
		if strings.Contains(name, "-mp-") {
			kind = "TerraformMachinePool"
		}
		return runnerJob(t, env.Client, name, kind, name, cluster, op)
	}
	waits := func() string {
		t.Helper()
		// The cluster's Jobs as the engine reads them.
		var jobs batchv1.JobList
		if err := env.Client.List(ctx, &jobs, client.InNamespace(tc.Namespace), client.MatchingLabels{infrav1.LabelCluster: tc.Name}); err != nil {
			t.Fatal(err)
		}
		w := MachineJob(jobs.Items)
		if w == nil {
			return ""
		}
		if w.Reason != infrav1.ReasonMachineJobRuns {
			t.Errorf("reason %q", w.Reason)
		}
		return w.Message
	}

	job("fleet-md-0-drift-1", "fleet", infrav1.OperationDrift)
	job("other-md-0-apply-1", "other", infrav1.OperationApply)
	if msg := waits(); msg != "" {
		t.Errorf("a drift check, and another cluster's machine, hold the cluster: %s", msg)
	}
	apply := job("fleet-md-0-apply-1", "fleet", infrav1.OperationApply)
	if msg := waits(); !strings.Contains(msg, "apply Job fleet-md-0-apply-1 of TerraformMachine fleet-md-0-apply-1") {
		t.Errorf("a running machine apply: wait %q", msg)
	}
	succeed(t, env.Client, apply)
	if msg := waits(); msg != "" {
		t.Errorf("a finished machine apply holds the cluster: %s", msg)
	}
	destroy := job("fleet-md-1-destroy-1", "fleet", infrav1.OperationDestroy)
	if msg := waits(); !strings.Contains(msg, "destroy Job fleet-md-1-destroy-1") {
		t.Errorf("a running machine destroy: wait %q", msg)
	}
	if err := env.Client.Delete(ctx, destroy); err != nil {
		t.Fatal(err)
	}
	job("fleet-mp-0-refresh-1", "fleet", infrav1.OperationRefresh)
	job("other-mp-0-apply-1", "other", infrav1.OperationApply)
	if msg := waits(); msg != "" {
		t.Errorf("a pool's membership refresh, or another cluster's pool, holds the cluster: %s", msg)
	}
	job("fleet-mp-0-apply-1", "fleet", infrav1.OperationApply)
	if msg := waits(); !strings.Contains(msg, "apply Job fleet-mp-0-apply-1 of TerraformMachinePool fleet-mp-0-apply-1") {
		t.Errorf("a running pool apply: wait %q", msg)
	}
}

// TestChangeEnded: only the end of an apply or destroy is an end a Job of
// related state waits for.
func TestChangeEnded(t *testing.T) {
	with := func(job *infrav1.ActiveJob) engine.Object {
		tm := &infrav1.TerraformMachine{}
		tm.Status.ActiveJob = job
		return tm
	}
	apply := &infrav1.ActiveJob{Name: "m-apply-1", Operation: infrav1.OperationApply}
	for _, tt := range []struct {
		name     string
		old, now *infrav1.ActiveJob
		want     bool
	}{
		{"an apply ends", apply, nil, true},
		{"a destroy follows an apply", apply, &infrav1.ActiveJob{Name: "m-destroy-1", Operation: infrav1.OperationDestroy}, true},
		{"an apply starts", nil, apply, false},
		{"an apply goes on", apply, apply, false},
		{"a drift check ends", &infrav1.ActiveJob{Name: "m-drift-1", Operation: infrav1.OperationDrift}, nil, false},
	} {
		if got := ChangeEnded(with(tt.old), with(tt.now)); got != tt.want {
			t.Errorf("%s: ChangeEnded = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestClusterJob: a machine's or a pool's Job waits while an apply or
// destroy Job of a TerraformCluster of its cluster has not finished or
// its outcome is not recorded (captf.io/processed): one
// among the cluster's Jobs the engine read (their captf.io/cluster label),
// whether or not the cache shows it yet, and one the cache shows by its
// owner that was made under an earlier cluster label. The cache here is
// the API server seen through a filter that hides the Jobs it has not
// caught up with; an apply whose outcome is recorded (the Job marked
// processed, or the TerraformCluster's status.lastRun naming it), a
// drift check and another cluster's Job do not hold it.
func TestClusterJob(t *testing.T) {
	env := testenv.Start(t, "../../..")
	ctx := context.Background()
	direct, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	hidden := map[string]bool{}
	cache := interceptor.NewClient(direct, interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := c.List(ctx, list, opts...); err != nil {
				return err
			}
			if jobs, ok := list.(*batchv1.JobList); ok {
				jobs.Items = slices.DeleteFunc(jobs.Items, func(j batchv1.Job) bool { return hidden[j.Name] })
			}
			return nil
		},
	})
	for _, name := range []string{"fleet", "other"} {
		tc := &infrav1.TerraformCluster{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
			Spec:       infrav1.TerraformClusterSpec{RunnerSpec: infrav1.RunnerSpec{Image: "example.test/module:1"}},
		}
		if err := env.Client.Create(ctx, tc); err != nil {
			t.Fatal(err)
		}
	}
	machine := &infrav1.TerraformMachine{ObjectMeta: metav1.ObjectMeta{Name: "fleet-md-0", Namespace: "default", Labels: map[string]string{clusterv1.ClusterNameLabel: "fleet"}}}
	job := func(name, owner, cluster string, op infrav1.Operation) *batchv1.Job {
		t.Helper()
		return runnerJob(t, env.Client, name, "TerraformCluster", owner, cluster, op)
	}
	waits := func() string {
		t.Helper()
		// The cluster's Jobs as the engine reads them.
		var jobs batchv1.JobList
		if err := env.Client.List(ctx, &jobs, client.InNamespace("default"), client.MatchingLabels{infrav1.LabelCluster: "fleet"}); err != nil {
			t.Fatal(err)
		}
		w, err := ClusterJob(ctx, cache, machine, jobs.Items)
		if err != nil {
			t.Fatal(err)
		}
		if w == nil {
			return ""
		}
		if w.Reason != infrav1.ReasonClusterJobRuns {
			t.Errorf("reason %q", w.Reason)
		}
		return w.Message
	}

	job("fleet-drift-1", "fleet", "fleet", infrav1.OperationDrift)
	job("other-apply-1", "other", "other", infrav1.OperationApply)
	if msg := waits(); msg != "" {
		t.Errorf("a drift check of the cluster, and another cluster's apply, hold the machine: %s", msg)
	}
	hidden["fleet-apply-1"] = true
	apply := job("fleet-apply-1", "fleet", "fleet", infrav1.OperationApply)
	if msg := waits(); !strings.Contains(msg, "apply Job fleet-apply-1 of TerraformCluster fleet") {
		t.Errorf("a running cluster apply the cache does not show yet: wait %q", msg)
	}
	succeed(t, env.Client, apply)
	if msg := waits(); !strings.Contains(msg, "apply Job fleet-apply-1 of TerraformCluster fleet ended, and its outcome is not recorded yet") {
		t.Errorf("a finished cluster apply whose outcome is not recorded (the exports it changed): wait %q", msg)
	}
	processed(t, env.Client, apply)
	if msg := waits(); msg != "" {
		t.Errorf("a cluster apply marked processed holds the machine: %s", msg)
	}
	// Recorded in the TerraformCluster's status (the write that publishes
	// its exports and wakes the machines), not yet marked processed.
	second := job("fleet-apply-2", "fleet", "fleet", infrav1.OperationApply)
	succeed(t, env.Client, second)
	if msg := waits(); !strings.Contains(msg, "apply Job fleet-apply-2 of TerraformCluster fleet ended, and its outcome is not recorded yet") {
		t.Errorf("a second finished cluster apply whose outcome is not recorded: wait %q", msg)
	}
	var fleet infrav1.TerraformCluster
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "fleet"}, &fleet); err != nil {
		t.Fatal(err)
	}
	fleet.Status.LastRun = &infrav1.RunStatus{Job: second.Name, Operation: infrav1.OperationApply, Succeeded: true}
	if err := env.Client.Status().Update(ctx, &fleet); err != nil {
		t.Fatal(err)
	}
	if msg := waits(); msg != "" {
		t.Errorf("a cluster apply its TerraformCluster's status records holds the machine: %s", msg)
	}
	// Made while the TerraformCluster was labelled for another cluster.
	job("fleet-destroy-1", "fleet", "before", infrav1.OperationDestroy)
	if msg := waits(); !strings.Contains(msg, "destroy Job fleet-destroy-1 of TerraformCluster fleet") {
		t.Errorf("a running destroy made under an earlier cluster label: wait %q", msg)
	}
}

// runnerJob creates, through c in the default namespace, a runner Job of the owner
// (kind and name), labelled for cluster and the operation op.
func runnerJob(t *testing.T, c client.Client, name, kind, owner, cluster string, op infrav1.Operation) *batchv1.Job {
	t.Helper()
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{
			infrav1.LabelOwnerKind: kind, infrav1.LabelOwnerName: owner,
			infrav1.LabelCluster: cluster, engine.LabelOperation: string(op),
		}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "runner", Image: "example.test/runner:1"}},
		}}},
	}
	if err := c.Create(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	return j
}

// succeed writes the status of a Job that succeeded, as the Job
// controller does.
func succeed(t *testing.T, c client.Client, job *batchv1.Job) {
	t.Helper()
	now := metav1.Now()
	job.Status.StartTime, job.Status.CompletionTime, job.Status.Succeeded = &now, &now, 1
	job.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
	}
	if err := c.Status().Update(context.Background(), job); err != nil {
		t.Fatal(err)
	}
}

// processed marks job's outcome recorded, as the engine does.
func processed(t *testing.T, c client.Client, job *batchv1.Job) {
	t.Helper()
	patch := client.MergeFrom(job.DeepCopy())
	job.Annotations = map[string]string{infrav1.AnnotationProcessed: "true"}
	if err := c.Patch(context.Background(), job, patch); err != nil {
		t.Fatal(err)
	}
}
