package terraformcluster

import (
	"context"
	"sync/atomic"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/testenv"
)

// TestJobStartListsJobsOnce calls Reconcile directly against the real API
// server and counts the lists of Jobs it asks the API server for: the
// start of a cluster's Job reads its cluster's Jobs once, for the gate (a
// machine's apply that runs holds it) and for the search for a Job of its
// own. (Before, the gate and the search each listed Jobs.)
func TestJobStartListsJobsOnce(t *testing.T) {
	env := testenv.Start(t, "../../..")
	ctx := context.Background()
	direct, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	var jobLists atomic.Int32
	api := interceptor.NewClient(direct, interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*batchv1.JobList); ok {
				jobLists.Add(1)
			}
			return c.List(ctx, list, opts...)
		},
	})
	r := &engine.Reconciler{Kind: Kind, Client: direct, Reader: api, RunnerImage: runnerImage}
	start := func(name string) *infrav1.TerraformCluster {
		t.Helper()
		tc := &infrav1.TerraformCluster{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec:       infrav1.TerraformClusterSpec{RunnerSpec: infrav1.RunnerSpec{Image: moduleImage}},
		}
		if err := direct.Create(ctx, tc); err != nil {
			t.Fatal(err)
		}
		jobLists.Store(0)
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tc)}); err != nil {
			t.Fatal(err)
		}
		if err := direct.Get(ctx, client.ObjectKeyFromObject(tc), tc); err != nil {
			t.Fatal(err)
		}
		return tc
	}

	if tc := start("alone"); tc.Status.ActiveJob == nil {
		t.Fatal("no Job started")
	}
	if n := jobLists.Load(); n != 1 {
		t.Errorf("the start of a Job listed Jobs from the API server %d times, want 1", n)
	}

	// A machine's apply that runs in the cluster holds the cluster's Job.
	machine := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "held-md-0-apply-1", Namespace: "default", Labels: map[string]string{
			infrav1.LabelManaged: "true", infrav1.LabelOwnerKind: "TerraformMachine", infrav1.LabelOwnerName: "held-md-0",
			infrav1.LabelCluster: "held", engine.LabelOperation: string(infrav1.OperationApply),
		}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "runner", Image: "example.test/runner:1"}},
		}}},
	}
	if err := direct.Create(ctx, machine); err != nil {
		t.Fatal(err)
	}
	tc := start("held")
	if tc.Status.ActiveJob != nil {
		t.Errorf("Job %s started while a machine's apply runs", tc.Status.ActiveJob.Name)
	}
	if c := condition(tc, infrav1.ConditionReady); c == nil || c.Reason != infrav1.ReasonMachineJobRuns {
		t.Errorf("Ready %+v, want reason %s", c, infrav1.ReasonMachineJobRuns)
	}
}
