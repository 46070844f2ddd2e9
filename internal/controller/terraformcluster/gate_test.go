package terraformcluster

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	direct, api, jobLists := countJobLists(t, env)
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

// countJobLists is a client of env's API server, and one over it that
// counts its lists of Jobs.
func countJobLists(t *testing.T, env *testenv.Env) (direct client.WithWatch, api client.Client, jobLists *atomic.Int32) {
	direct, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	jobLists = &atomic.Int32{}
	api = interceptor.NewClient(direct, interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*batchv1.JobList); ok {
				jobLists.Add(1)
			}
			return c.List(ctx, list, opts...)
		},
	})
	return direct, api, jobLists
}

// TestJobStartFromCache calls Reconcile directly against the real API
// server, with a cache that can be made to lag: a Job start takes its
// cluster's Jobs from the cache only when the manager's record of the Jobs
// it started says the cache has them all, and from the API server itself
// when the manager just started, when a Job it created is not in the cache
// yet, and after a create that reported an error.
func TestJobStartFromCache(t *testing.T) {
	env := testenv.Start(t, "../../..")
	ctx := context.Background()
	direct, api, jobLists := countJobLists(t, env)
	var mu sync.Mutex
	hidden := map[string]bool{} // Jobs the cache has not seen yet
	failCreate := false         // the next Job's create lands, but reports an error
	cache := interceptor.NewClient(direct, interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := c.List(ctx, list, opts...); err != nil {
				return err
			}
			if jobs, ok := list.(*batchv1.JobList); ok {
				mu.Lock()
				defer mu.Unlock()
				jobs.Items = slices.DeleteFunc(jobs.Items, func(j batchv1.Job) bool { return hidden[j.Name] })
			}
			return nil
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			err := c.Create(ctx, obj, opts...)
			if _, ok := obj.(*batchv1.Job); ok && err == nil && failCreate {
				failCreate = false
				return apierrors.NewInternalError(errors.New("the write landed, the answer was lost"))
			}
			return err
		},
	})
	r := &engine.Reconciler{Kind: Kind, Client: cache, Reader: api, Jobs: &engine.JobRecord{}, RunnerImage: runnerImage}
	// Every object is of the cluster "shared": their Jobs are one cluster's.
	start := func(name string) (*infrav1.TerraformCluster, error) {
		t.Helper()
		tc := &infrav1.TerraformCluster{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{infrav1.LabelClusterName: "shared"}},
			Spec:       infrav1.TerraformClusterSpec{RunnerSpec: infrav1.RunnerSpec{Image: moduleImage}},
		}
		if err := direct.Create(ctx, tc); err != nil {
			t.Fatal(err)
		}
		jobLists.Store(0)
		_, rerr := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tc)})
		if err := direct.Get(ctx, client.ObjectKeyFromObject(tc), tc); err != nil {
			t.Fatal(err)
		}
		return tc, rerr
	}
	started := func(name string, wantLists int32, why string) *infrav1.TerraformCluster {
		t.Helper()
		tc, err := start(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if tc.Status.ActiveJob == nil {
			t.Fatalf("%s: no Job started", name)
		}
		if n := jobLists.Load(); n != wantLists {
			t.Errorf("%s (%s): the start listed Jobs from the API server %d times, want %d", name, why, n, wantLists)
		}
		return tc
	}

	started("first", 1, "a manager that just started")
	second := started("second", 0, "the cache shows every Job the manager started")
	mu.Lock()
	hidden[second.Status.ActiveJob.Name] = true
	mu.Unlock()
	started("third", 1, "a Job the manager started is not in the cache yet")
	mu.Lock()
	clear(hidden)
	mu.Unlock()
	started("fourth", 0, "the cache caught up")

	failCreate = true
	if _, err := start("fifth"); err == nil {
		t.Fatal("fifth: the create's error was not reported")
	}
	var jobs batchv1.JobList
	if err := direct.List(ctx, &jobs, client.InNamespace("default"), client.MatchingLabels{infrav1.LabelOwnerName: "fifth"}); err != nil || len(jobs.Items) != 1 {
		t.Fatalf("fifth: %d Jobs, %v; want the one whose create reported an error", len(jobs.Items), err)
	}
	started("sixth", 1, "a create reported an error")
	started("seventh", 0, "the API server was read since")
}
