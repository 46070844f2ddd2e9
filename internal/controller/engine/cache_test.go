package engine

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/runner"
	"github.com/captf/captf/internal/testenv"
	"github.com/captf/captf/internal/testnode"
	"github.com/captf/captf/internal/tfstate"
)

// TestRunningJobReadFromCache calls Reconcile directly against the real API
// server, with the manager's cache, and records what it reads from the API
// server itself: while the Job runs, nothing (the scale benchmark measured a
// GET of the Job and a LIST of its pods on every event of a running Job
// before); the object only when the cache may not show its last write; a
// pod that cannot pull its image, and a finished Job, are read from the
// API server before the reconcile acts on them.
func TestRunningJobReadFromCache(t *testing.T) {
	ctx := context.Background()
	r, c, direct, taken := readsRecorded(t)

	tc := &infrav1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "cached", Namespace: "default"},
		Spec: infrav1.TerraformClusterSpec{RunnerSpec: infrav1.RunnerSpec{
			Image:     moduleImage,
			Variables: []infrav1.Variable{{Name: "size", Value: &apiextensionsv1.JSON{Raw: []byte(`"small"`)}}},
		}},
	}
	if err := direct.Create(ctx, tc); err != nil {
		t.Fatal(err)
	}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tc)}
	reconcile := func() {
		t.Helper()
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatalf("reconcile: %v", err)
		}
	}
	current := func() *infrav1.TerraformCluster {
		t.Helper()
		got := &infrav1.TerraformCluster{}
		if err := direct.Get(ctx, req.NamespacedName, got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	// cached waits until the cache holds what ok looks for.
	cached := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("the cache does not show %s within 30s", what)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	const (
		getObject = "get *v1alpha1.TerraformCluster"
		getJob    = "get *v1.Job"
		listPods  = "list *v1.PodList"
	)

	// Unknown, the first apply: a Job starts.
	reconcile()
	active := current().Status.ActiveJob
	if active == nil {
		t.Fatal("no Job started")
	}
	jobKey := client.ObjectKey{Namespace: "default", Name: active.Name}
	job := &batchv1.Job{}
	cached("the Job", func() bool { return c.Get(ctx, jobKey, job) == nil })

	// upToDate waits until the cache shows the object as the API server
	// holds it.
	upToDate := func() {
		t.Helper()
		want := current().ResourceVersion
		cached("the object as last written", func() bool {
			var got infrav1.TerraformCluster
			return c.Get(ctx, req.NamespacedName, &got) == nil && got.ResourceVersion == want
		})
	}

	// The Job runs: nothing is read from the API server, not even the
	// object, which the cache shows as the manager last wrote it.
	upToDate()
	taken()
	reconcile()
	if diff := cmp.Diff([]string(nil), taken()); diff != "" {
		t.Errorf("reads of the API server while the Job runs (-want +got):\n%s", diff)
	}

	// A write of the manager's own the cache does not show yet: the
	// object is what that write answered with, and the API server is not
	// read.
	ahead := current()
	ahead.ResourceVersion = "999999999"
	r.wrote(ahead)
	if got := r.lastWritten(ahead, false); got == nil || got.GetResourceVersion() != ahead.ResourceVersion || got.GetManagedFields() != nil {
		t.Errorf("the write kept: %v, want the object at resourceVersion %s without managed fields", got, ahead.ResourceVersion)
	}
	taken()
	reconcile()
	if diff := cmp.Diff([]string(nil), taken()); diff != "" {
		t.Errorf("reads of the API server with the cache behind the manager's own write (-want +got):\n%s", diff)
	}

	// After a write that failed, nothing is kept: the API server is read.
	r.forget(ahead)
	taken()
	reconcile()
	if diff := cmp.Diff([]string{getObject}, taken()); diff != "" {
		t.Errorf("reads of the API server after a write failed (-want +got):\n%s", diff)
	}

	// Caught up again: the cache shows the manager's last write.
	r.wrote(current())
	upToDate()
	taken()
	reconcile()
	if diff := cmp.Diff([]string(nil), taken()); diff != "" {
		t.Errorf("reads of the API server with the cache caught up (-want +got):\n%s", diff)
	}

	// Someone else's write after the manager's, which the cache shows:
	// the cache holds the manager's write too, and the object is read
	// from it.
	other := current()
	other.Annotations = map[string]string{"example.com/note": "x"}
	if err := direct.Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	upToDate()
	taken()
	reconcile()
	if diff := cmp.Diff([]string(nil), taken()); diff != "" {
		t.Errorf("reads of the API server after someone else's write (-want +got):\n%s", diff)
	}

	// A manager that recorded no write of the object (it just started):
	// the object is read from the API server.
	restarted := &Reconciler{Kind: r.Kind, Client: r.Client, Reader: r.Reader, RunnerImage: r.RunnerImage}
	taken()
	if _, err := restarted.Reconcile(ctx, req); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if diff := cmp.Diff([]string{getObject}, taken()); diff != "" {
		t.Errorf("reads of the API server by a manager that just started (-want +got):\n%s", diff)
	}

	// Its pod cannot pull an image: confirmed by the API server, then
	// reported.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-node", Namespace: "default", Labels: map[string]string{JobNameLabel: job.Name}},
		Spec:       job.Spec.Template.Spec,
	}
	for k, v := range job.Spec.Template.Labels {
		pod.Labels[k] = v
	}
	if err := direct.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodPending
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName, Image: moduleImage, State: corev1.ContainerState{
		Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull"},
	}}}
	if err := direct.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	cached("the pod's pull failure", func() bool {
		var pods corev1.PodList
		return c.List(ctx, &pods, client.MatchingLabels{JobNameLabel: job.Name}) == nil && pullFailure(pods.Items) != ""
	})
	upToDate()
	taken()
	reconcile()
	if diff := cmp.Diff([]string{getJob, listPods}, taken()); diff != "" {
		t.Errorf("reads of the API server for a pod that cannot pull (-want +got):\n%s", diff)
	}
	if cond := condition(current(), infrav1.ConditionApplyJobSucceeded); cond == nil || cond.Reason != ReasonImagePullFailed {
		t.Errorf("condition %+v, want reason %s", cond, ReasonImagePullFailed)
	}

	// The Job ends (without a report): collected from the API server.
	if err := direct.Get(ctx, jobKey, job); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	job.Status.StartTime = &now
	job.Status.Failed = 1
	job.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: now, LastProbeTime: now},
		{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: now, LastProbeTime: now},
	}
	if err := direct.Status().Update(ctx, job); err != nil {
		t.Fatal(err)
	}
	cached("the finished Job", func() bool {
		var j batchv1.Job
		finished := false
		if c.Get(ctx, jobKey, &j) == nil {
			finished, _ = JobFinished(&j)
		}
		return finished
	})
	// The object not: the last write is the manager's (the pull failure's
	// condition).
	upToDate()
	taken()
	reconcile()
	if diff := cmp.Diff([]string{getJob, listPods}, taken()); diff != "" {
		t.Errorf("reads of the API server for a finished Job (-want +got):\n%s", diff)
	}
	got := current()
	if got.Status.ActiveJob != nil || got.Status.LastRun == nil || got.Status.LastRun.Job != job.Name || got.Status.LastRun.Succeeded {
		t.Errorf("active Job %+v, last run %+v: want the Job collected as a failed run", got.Status.ActiveJob, got.Status.LastRun)
	}
}

// readsRecorded starts an API server and the manager's cache on it, and
// returns a Reconciler whose clients are made as SetupWithManager makes
// them, whose reads of the API server itself are recorded; a client that
// reads through the cache, one that reads the API server, and what takes
// the record so far.
func readsRecorded(t *testing.T) (*Reconciler, client.Client, client.WithWatch, func() []string) {
	t.Helper()
	_, c, direct := cachedEnv(t)
	reader, taken := recordReads(direct)
	return &Reconciler{Kind: theTestKind, Client: newSecretFiller(c, reader), Reader: reader, RunnerImage: runnerImage}, c, direct, taken
}

// calls is a record of calls, safe for concurrent use.
type calls struct {
	mu   sync.Mutex
	list []string
}

func (c *calls) add(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list = append(c.list, fmt.Sprintf(format, args...))
}

// taken returns the calls recorded since it was last called.
func (c *calls) taken() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.list
	c.list = nil
	return l
}

// recordGets is direct, recording each GET as the object's type and
// name; taken returns those recorded since it was last called.
func recordGets(direct client.WithWatch) (reader client.Reader, taken func() []string) {
	var gets calls
	return interceptor.NewClient(direct, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			gets.add("%T %s", obj, key.Name)
			return c.Get(ctx, key, obj, opts...)
		},
	}), gets.taken
}

// recordReads is a reader of the API server through direct that records
// each read ("get *v1.Job", "list *v1.PodList"), and what takes the
// record so far.
func recordReads(direct client.WithWatch) (client.Reader, func() []string) {
	var reads calls
	return interceptor.NewClient(direct, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			reads.add("get %T", obj)
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			reads.add("list %T", list)
			return c.List(ctx, list, opts...)
		},
	}), reads.taken
}

// TestFinishedJobReadFromCache: a finished Job whose pods the cache shows
// ended is processed from the cache's copies, which give the outcome the
// API server's do (the report and the digest the pod ran: a transform of
// the cache that dropped them would change it), with no read of the Job
// or its pods from the API server.
func TestFinishedJobReadFromCache(t *testing.T) {
	ctx := context.Background()
	r, c, direct, taken := readsRecorded(t)
	tc := &infrav1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "ended", Namespace: "default"},
		Spec:       infrav1.TerraformClusterSpec{RunnerSpec: infrav1.RunnerSpec{Image: moduleImage}},
	}
	if err := direct.Create(ctx, tc); err != nil {
		t.Fatal(err)
	}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tc)}
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	if err := direct.Get(ctx, req.NamespacedName, tc); err != nil || tc.Status.ActiveJob == nil {
		t.Fatalf("no Job started: %v", err)
	}

	job := &batchv1.Job{}
	if err := direct.Get(ctx, client.ObjectKey{Namespace: "default", Name: tc.Status.ActiveJob.Name}, job); err != nil {
		t.Fatal(err)
	}

	// The pod ends with a report, then the Job, as the kubelet and the
	// Job controller leave them.
	pod := testnode.PodFor(job)
	if err := direct.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodSucceeded
	st := testnode.Terminated(*JobContainer(job), 0, string(runner.Message{Outcome: runner.OutcomeApplied}.Encode()))
	st.ImageID = "registry.example/module@sha256:" + strings.Repeat("c", 64)
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{st}
	if err := direct.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	succeeded(job)
	if err := direct.Status().Update(ctx, job); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	var cachedJob batchv1.Job
	var cachedPods corev1.PodList
	for {
		if c.Get(ctx, client.ObjectKeyFromObject(job), &cachedJob) == nil && c.List(ctx, &cachedPods, client.MatchingLabels{JobNameLabel: job.Name}) == nil &&
			podsFinal(&cachedJob, cachedPods.Items) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cache does not show the finished Job and its ended pod within 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	var apiPods corev1.PodList
	if err := direct.List(ctx, &apiPods, client.MatchingLabels{JobNameLabel: job.Name}); err != nil {
		t.Fatal(err)
	}
	want := outcomeOf(job, apiPods.Items)
	if want.Msg == nil || want.Digest == "" {
		t.Fatalf("the API server's copies give no report or no digest: %+v", want)
	}
	if diff := cmp.Diff(want, outcomeOf(&cachedJob, cachedPods.Items)); diff != "" {
		t.Errorf("the outcome from the cache's copies (-API server +cache):\n%s", diff)
	}

	taken()
	if _, err := r.Reconcile(ctx, req); err != nil {
		t.Fatal(err)
	}
	for _, read := range taken() {
		if read == "get *v1.Job" || read == "list *v1.PodList" {
			t.Errorf("the finished Job's reconcile read the API server: %s", read)
		}
	}
	if err := direct.Get(ctx, req.NamespacedName, tc); err != nil {
		t.Fatal(err)
	}
	if run := tc.Status.LastRun; run == nil || run.Job != job.Name || !run.Succeeded {
		t.Errorf("last run %+v: want %s recorded as succeeded", run, job.Name)
	}
	if err := direct.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil || !Processed(job) {
		t.Errorf("the Job is not marked processed (%v)", err)
	}
}

// cachedEnv starts an API server and the manager's cache on it (its
// TerraformPlans indexed) and returns the cache, a client that reads
// through the cache and one that reads the API server itself.
func cachedEnv(t *testing.T) (cache.Cache, client.Client, client.WithWatch) {
	t.Helper()
	env := testenv.Start(t, "../../..")
	cch := startCache(t, env)
	if err := IndexPlans(context.Background(), cch); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: env.Client.Scheme(), Cache: &client.CacheOptions{Reader: cch}})
	if err != nil {
		t.Fatal(err)
	}
	return cch, c, directClient(t, env)
}

// directClient is a client of env's API server that reads the API server
// itself, not a cache.
func directClient(t testing.TB, env *testenv.Env) client.WithWatch {
	t.Helper()
	direct, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return direct
}

// startCache starts the manager's cache (CacheOptions, NewCache) on env
// until the test ends, stopping it before the API server stops.
func startCache(t testing.TB, env *testenv.Env) cache.Cache {
	return startCacheWith(t, env, NewCache(theTestKind, indexedTestKind))
}

// startCacheWith is startCache with the cache newCache makes.
func startCacheWith(t testing.TB, env *testenv.Env, newCache cache.NewCacheFunc) cache.Cache {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	opts := CacheOptions()
	opts.Scheme = env.Client.Scheme()
	cch, err := newCache(env.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- cch.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-stopped; err != nil {
			t.Errorf("cache: %v", err)
		}
	})
	if !cch.WaitForCacheSync(ctx) {
		t.Fatal("the cache did not start")
	}
	return cch
}

// roundTripper counts the requests it sends.
type roundTripper struct {
	next  http.RoundTripper
	count *atomic.Int32
}

func (rt roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	rt.count.Add(1)
	return rt.next.RoundTrip(req)
}

// TestPausedReadFromCache: with the manager's client options, the pause
// check reads an object's Cluster — by its owner reference, or a
// machine's by its cluster-name label — from the cache, not the API
// server, which would cost a request on every reconcile.
func TestPausedReadFromCache(t *testing.T) {
	env := testenv.StartWithClusterAPI(t, "../../..")
	ctx := context.Background()
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "fleet", Namespace: "default"}, Spec: clusterv1.ClusterSpec{Paused: ptr.To(true)}}
	if err := env.Client.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	var requests atomic.Int32
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper { return roundTripper{next: next, count: &requests} })
	opts := ClientOptions()
	opts.Scheme = env.Client.Scheme()
	opts.Cache.Reader = startCache(t, env)
	c, err := client.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Kind: theTestKind, Client: c}

	owned := &infrav1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Name: "owned", Namespace: "default", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: cluster.Name, UID: cluster.UID,
	}}}}
	labelled := &infrav1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Name: "labelled", Namespace: "default", Labels: map[string]string{infrav1.LabelClusterName: cluster.Name}}}
	for _, obj := range []Object{owned, labelled} {
		// The first check may discover the API (the REST mapping).
		if _, err := r.paused(ctx, obj); err != nil {
			t.Fatal(err)
		}
		requests.Store(0)
		why, err := r.paused(ctx, obj)
		if err != nil {
			t.Fatal(err)
		}
		if why == "" {
			t.Errorf("%s: not paused by its Cluster's spec.paused", obj.GetName())
		}
		if n := requests.Load(); n != 0 {
			t.Errorf("%s: the pause check sent %d requests to the API server, want none (the Cluster from the cache)", obj.GetName(), n)
		}
	}
}

// TestFirstApplyReadsStateOnce: the reconcile that starts a new object's
// first apply reads its state from the API server once: its first Secret
// by name, which is not there, then the list of its Secrets, which tells
// that there is none (no part either); the check of its history reads no
// state Secret again.
func TestFirstApplyReadsStateOnce(t *testing.T) {
	ctx := context.Background()
	_, c, direct := cachedEnv(t)
	reader, gets := recordGets(direct)
	r := &Reconciler{Kind: theTestKind, Client: newSecretFiller(c, reader), Reader: reader, RunnerImage: runnerImage}
	tc := &infrav1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "first", Namespace: "default"},
		Spec:       infrav1.TerraformClusterSpec{RunnerSpec: infrav1.RunnerSpec{Image: moduleImage}},
	}
	if err := direct.Create(ctx, tc); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tc)}); err != nil {
		t.Fatal(err)
	}
	if err := direct.Get(ctx, client.ObjectKeyFromObject(tc), tc); err != nil {
		t.Fatal(err)
	}
	if tc.Status.ActiveJob == nil {
		t.Fatal("the first reconcile started no apply")
	}
	state := "*v1.Secret " + StateSecretName(r.kind().Short(), tc.Name)
	all := gets()
	if n := len(slices.DeleteFunc(slices.Clone(all), func(g string) bool { return g != state })); n != 1 {
		t.Errorf("the first apply's reconcile read the state Secret by name %d times (reads %v), want once", n, all)
	}
}

// TestStartTakesStateReadAfterApply: an object whose state records other
// inputs than it renders now (an apply is due), and whose state the
// manager read from the API server after the last apply ended (ownState),
// starts its apply without reading the state again. (A cache that shows a
// newer write than that read has the state read again: TestCachedStateBehind.)
func TestStartTakesStateReadAfterApply(t *testing.T) {
	ctx := context.Background()
	cch, c, direct := cachedEnv(t)
	reader, gets := recordGets(direct)
	stateGets := func() int {
		return len(slices.DeleteFunc(gets(), func(g string) bool { return !strings.HasPrefix(g, "*v1.Secret "+tfstate.SecretName("")) }))
	}
	r := &Reconciler{Kind: theTestKind, Client: newSecretFiller(c, reader), Reader: reader, RunnerImage: runnerImage}
	tc, first := withState(t, direct, "applied", 4, 1024)
	// The outcome of the apply that wrote it reads it, and records its
	// serial.
	if _, err := r.setStateOwner(ctx, tc, true); err != nil {
		t.Fatal(err)
	}
	tc.Status.StateSerial = ptr.To[int64](4)
	if err := direct.Status().Update(ctx, tc); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var s corev1.Secret
		// With the owner reference ownState added.
		return cch.Get(ctx, client.ObjectKeyFromObject(first), &s) == nil && len(s.OwnerReferences) == 1, nil
	}); err != nil {
		t.Fatal("the cache does not show the state Secret")
	}
	stateGets()
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tc)}); err != nil {
		t.Fatal(err)
	}
	if err := direct.Get(ctx, client.ObjectKeyFromObject(tc), tc); err != nil {
		t.Fatal(err)
	}
	if a := tc.Status.ActiveJob; a == nil || a.Operation != infrav1.OperationApply {
		t.Fatalf("the reconcile started %+v, want an apply", a)
	}
	if n := stateGets(); n != 0 {
		t.Errorf("the apply's start read the state Secret %d times, want none (read after the last apply)", n)
	}
}

// TestRunnerObjectsCachedStripped: the cache holds a runner Job without
// its managed fields, and of its pod template only each container's
// name, image and command and each Secret volume (what pinDigest,
// setRunning and hasCredentials read of a cached Job's template), and a
// runner pod without its managed fields, its spec and all of its status
// but the phase and each container's name, image, image ID and state. What is kept still tells
// an image that cannot be pulled (and, of an ended pod, its Job's outcome:
// TestFinishedJobReadFromCache); the API server's copies keep everything.
func TestRunnerObjectsCachedStripped(t *testing.T) {
	ctx := context.Background()
	cch, _, direct := cachedEnv(t)
	labels := map[string]string{infrav1.LabelManaged: "true", infrav1.LabelOwnerKind: theTestKind.Name()}
	spec := corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Volumes: []corev1.Volume{
			{Name: "credentials", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: CredentialsName("run-apply-abcde")}}},
			{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		},
		InitContainers: []corev1.Container{{Name: "runner", Image: "runner:1", Command: []string{RunnerImagePath, "install", RunnerPath}}},
		Containers: []corev1.Container{{
			Name: containerName, Image: "example.com/terraform:1", Command: []string{RunnerPath, "--operation=apply", "--guard"},
			Env: []corev1.EnvVar{{Name: "HOME", Value: tmpDir}},
		}},
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "run-apply-abcde", Namespace: "default", Labels: labels,
			Annotations: map[string]string{annotationInputsHash: "h2:inputs"}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}},
	}
	if err := direct.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: job.Name + "-x1y2z", Namespace: "default",
			Labels:      map[string]string{infrav1.LabelManaged: "true", JobNameLabel: job.Name},
			Annotations: map[string]string{infrav1.LabelOwnerName: "run"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID,
				Controller: ptr.To(true)}}},
		Spec: spec,
	}
	if err := direct.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	// The init container ran (its termination message held); the
	// runner's image cannot be pulled.
	waiting := &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}
	pod.Status = corev1.PodStatus{
		Phase:      corev1.PodPending,
		Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
		InitContainerStatuses: []corev1.ContainerStatus{{Name: "runner", Image: "runner:1", ImageID: "runner@sha256:0",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", Message: "installed"}}}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: containerName, Image: "example.com/terraform:1",
			State: corev1.ContainerState{Waiting: waiting}}},
	}
	if err := direct.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}

	// inCache reads obj's key from the cache into into, once the cache
	// holds obj's resourceVersion or a later one.
	inCache := func(obj, into client.Object) {
		t.Helper()
		want, _ := strconv.ParseInt(obj.GetResourceVersion(), 10, 64)
		deadline := time.Now().Add(30 * time.Second)
		for {
			if cch.Get(ctx, client.ObjectKeyFromObject(obj), into) == nil {
				if rv, _ := strconv.ParseInt(into.GetResourceVersion(), 10, 64); rv >= want {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("the cache does not show %s within 30s", obj.GetName())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	var apiJob, cachedJob batchv1.Job
	if err := direct.Get(ctx, client.ObjectKeyFromObject(job), &apiJob); err != nil {
		t.Fatal(err)
	}
	inCache(&apiJob, &cachedJob)
	if len(apiJob.ManagedFields) == 0 {
		t.Error("the API server's Job has no managed fields")
	}
	if len(cachedJob.ManagedFields) != 0 {
		t.Errorf("the cache's Job has %d managed fields, want none", len(cachedJob.ManagedFields))
	}
	if len(apiJob.Spec.Template.Spec.InitContainers) != 1 || len(apiJob.Spec.Template.Spec.Containers[0].Env) == 0 || len(apiJob.Spec.Template.Spec.Volumes) != 2 {
		t.Errorf("the API server's Job template %+v: want all of it", apiJob.Spec.Template.Spec)
	}
	wantSpec := apiJob.Spec.DeepCopy()
	wantSpec.Template.Spec = corev1.PodSpec{
		Containers: []corev1.Container{{Name: containerName, Image: "example.com/terraform:1", Command: []string{RunnerPath, "--operation=apply", "--guard"}}},
		Volumes:    []corev1.Volume{{Name: "credentials", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: CredentialsName(job.Name)}}}},
	}
	if diff := cmp.Diff(*wantSpec, cachedJob.Spec); diff != "" {
		t.Errorf("the cache's Job spec (-want +got):\n%s", diff)
	}
	if !hasCredentials(&cachedJob) || JobContainer(&cachedJob).Image != "example.com/terraform:1" || !slices.Contains(cachedJob.Spec.Template.Spec.Containers[0].Command, "--guard") {
		t.Errorf("the cache's Job no longer tells its credentials (%t), its image (%q) or its guard (%v)",
			hasCredentials(&cachedJob), JobContainer(&cachedJob).Image, cachedJob.Spec.Template.Spec.Containers[0].Command)
	}

	var apiPod, cachedPod corev1.Pod
	if err := direct.Get(ctx, client.ObjectKeyFromObject(pod), &apiPod); err != nil {
		t.Fatal(err)
	}
	inCache(&apiPod, &cachedPod)
	if len(apiPod.ManagedFields) == 0 || len(apiPod.Spec.Containers) == 0 || apiPod.Status.InitContainerStatuses[0].State.Terminated == nil {
		t.Errorf("the API server's pod has %d managed fields, %d containers, init status %+v: want all of them",
			len(apiPod.ManagedFields), len(apiPod.Spec.Containers), apiPod.Status.InitContainerStatuses)
	}
	wantMeta := apiPod.ObjectMeta
	wantMeta.ManagedFields = nil
	if diff := cmp.Diff(wantMeta, cachedPod.ObjectMeta); diff != "" {
		t.Errorf("the cache's pod metadata (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(corev1.PodSpec{}, cachedPod.Spec); diff != "" {
		t.Errorf("the cache's pod spec (-want +got):\n%s", diff)
	}
	wantStatus := corev1.PodStatus{
		Phase: corev1.PodPending,
		InitContainerStatuses: []corev1.ContainerStatus{{Name: "runner", Image: "runner:1", ImageID: "runner@sha256:0",
			State: corev1.ContainerState{Terminated: apiPod.Status.InitContainerStatuses[0].State.Terminated}}},
		ContainerStatuses: []corev1.ContainerStatus{{Name: containerName, Image: "example.com/terraform:1", State: corev1.ContainerState{Waiting: waiting}}},
	}
	if diff := cmp.Diff(wantStatus, cachedPod.Status); diff != "" {
		t.Errorf("the cache's pod status (-want +got):\n%s", diff)
	}
	if got, want := pullFailure([]corev1.Pod{cachedPod}), pullFailure([]corev1.Pod{apiPod}); got != want || got == "" {
		t.Errorf("pull failure of the cache's pod %q, of the API server's %q: want the same, not empty", got, want)
	}
}
