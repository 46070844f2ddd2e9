// Package scale measures the manager with many TerraformClusters under
// applyPolicy Manual (issue 3, point 7): how long from an approval to the
// approved apply Job, how many API requests an idle object costs per hour,
// and how much memory the manager holds; then the same for the
// TerraformMachines and TerraformMachinePools of those clusters
// (machines_test.go, pools_test.go); where the manager's heap goes by kind
// (heap_test.go); a restart of the idle manager (restart_test.go); drift
// checks.
//
// TestScale is a benchmark run on demand (make scale, hack/scale.sh N...),
// not part of the test suite: it is skipped unless CAPTF_SCALE_N is set,
// the one skip the project allows. It asserts only that the flow completes;
// the figures are measured and printed, never compared with a wall-clock
// goal.
//
// Real: etcd and kube-apiserver (internal/testenv) and the cmd/manager
// binary, run as a subprocess as a Deployment would run it. A test double:
// the node (see node), which plays the kubelet, the Job controller and
// terraform, completing each Job at once with the runner's report.
package scale

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/faultproxy"
	"github.com/captf/captf/internal/managertest"
	"github.com/captf/captf/internal/testenv"
)

const (
	namespace   = "default"
	moduleImage = "example.test/module:1"
	runnerImage = "example.test/captf-runner:dev"
	// writers is how many requests the test itself sends at once.
	writers = 16
)

// settings are read from the environment: CAPTF_SCALE_N (the number of
// TerraformClusters), CAPTF_SCALE_MACHINES (TerraformMachines per
// cluster, default 2; 0: none), CAPTF_SCALE_POOLS (TerraformMachinePools
// per cluster, default 1; 0: none), CAPTF_SCALE_IDLE (the idle window, default 2m),
// CAPTF_SCALE_RECHECK (the manager's --recheck-interval during the run,
// default 1m), CAPTF_SCALE_TIMEOUT (the longest each phase may take,
// default 20m), CAPTF_SCALE_STATE_KIB (the size of each state Secret the
// node writes, gzip'ed as terraform writes it, default 4),
// CAPTF_SCALE_SINGLES (approvals made one at a time, each on a manager
// whose other objects are idle, default 20), CAPTF_SCALE_WAVE (approvals
// then made at once, default 100; the rest follow at once),
// CAPTF_SCALE_POOL_SETTLE (how long the pools stay idle before their idle
// window, so that it measures their refreshes once backed off; default
// 0), CAPTF_SCALE_BREAKDOWN (1: the manager talks to the API server through a
// recording proxy, and each phase's requests are printed by method and
// resource), CAPTF_SCALE_MANAGER_ARGS (more manager flags, split on
// spaces) and CAPTF_SCALE_RESTART_SIGNAL (how the restart phase stops the
// manager: TERM, as a rollout does, the default; or KILL).
type settings struct {
	n, machines, pools     int
	singles, wave          int
	stateKiB               int
	breakdown              bool
	idle, recheck, timeout time.Duration
	poolSettle             time.Duration
	managerArgs            []string
	restartKill            bool
}

func readSettings(t *testing.T) settings {
	t.Helper()
	raw := os.Getenv("CAPTF_SCALE_N")
	if raw == "" {
		t.Skip("a benchmark run on demand: set CAPTF_SCALE_N (make scale, hack/scale.sh N...)")
	}
	s := settings{idle: 2 * time.Minute, recheck: time.Minute, timeout: 20 * time.Minute}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 {
		t.Fatalf("CAPTF_SCALE_N=%q: want a positive number of TerraformClusters", raw)
	}
	s.n, s.machines, s.pools, s.stateKiB, s.singles, s.wave = n, 2, 1, 4, 20, 100
	for name, v := range map[string]*int{"CAPTF_SCALE_MACHINES": &s.machines, "CAPTF_SCALE_POOLS": &s.pools, "CAPTF_SCALE_STATE_KIB": &s.stateKiB,
		"CAPTF_SCALE_SINGLES": &s.singles, "CAPTF_SCALE_WAVE": &s.wave} {
		raw := os.Getenv(name)
		if raw == "" {
			continue
		}
		if *v, err = strconv.Atoi(raw); err != nil || *v < 0 {
			t.Fatalf("%s=%q: want a number, 0 or more", name, raw)
		}
	}
	for name, d := range map[string]*time.Duration{"CAPTF_SCALE_IDLE": &s.idle, "CAPTF_SCALE_RECHECK": &s.recheck, "CAPTF_SCALE_TIMEOUT": &s.timeout} {
		v := os.Getenv(name)
		if v == "" {
			continue
		}
		if *d, err = time.ParseDuration(v); err != nil || *d <= 0 {
			t.Fatalf("%s=%q: want a positive duration such as 2m", name, v)
		}
	}
	if v := os.Getenv("CAPTF_SCALE_POOL_SETTLE"); v != "" {
		if s.poolSettle, err = time.ParseDuration(v); err != nil || s.poolSettle < 0 {
			t.Fatalf("CAPTF_SCALE_POOL_SETTLE=%q: want a duration such as 25m", v)
		}
	}
	s.managerArgs = strings.Fields(os.Getenv("CAPTF_SCALE_MANAGER_ARGS"))
	s.breakdown = os.Getenv("CAPTF_SCALE_BREAKDOWN") == "1"
	switch v := os.Getenv("CAPTF_SCALE_RESTART_SIGNAL"); v {
	case "", "TERM":
	case "KILL":
		s.restartKill = true
	default:
		t.Fatalf("CAPTF_SCALE_RESTART_SIGNAL=%q: want TERM or KILL", v)
	}
	return s
}

func TestScale(t *testing.T) {
	if kubeconfig := os.Getenv("CAPTF_SCALE_FOOTPRINT"); kubeconfig != "" {
		// The process heapPhase starts to measure a cache by kind.
		footprint(t, kubeconfig)
		return
	}
	s := readSettings(t)
	// The test's own clients and cache log through controller-runtime's
	// logger: the manager's log is what the benchmark keeps.
	ctrllog.SetLogger(logr.Discard())
	// Cluster API's CRDs: the manager reconciles TerraformMachines only
	// where Machines are served.
	env := testenv.StartWithClusterAPI(t, "../..")
	ctx := context.Background()

	mgr := startManager(t, env, s)
	// The node and the test itself are not rate limited: the manager's
	// limits are the ones measured.
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, -1
	direct, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	nodeCtx, stopNode := context.WithCancel(ctx)
	c := followed(t, nodeCtx, cfg, direct)
	nd := &node{c: direct, namespace: namespace, workers: 8, stateBytes: s.stateKiB << 10}
	waitNode := nd.start(nodeCtx, t, cfg)
	t.Cleanup(func() {
		stopNode()
		waitNode()
		for _, e := range nd.errors() {
			t.Errorf("node: %s", e)
		}
	})

	names := make([]string, s.n)
	for i := range names {
		names[i] = fmt.Sprintf("scale-%05d", i)
	}

	// 1. N objects under Manual; their first apply is not gated.
	m0, r0 := scrape(t, mgr.metricsURL), mgr.mark()
	began := time.Now()
	parallel(t, names, func(name string) error {
		return c.Create(ctx, &infrav1.TerraformCluster{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
			Spec: infrav1.TerraformClusterSpec{RunnerSpec: infrav1.RunnerSpec{
				Image: moduleImage, ApplyPolicy: infrav1.ApplyManual,
				Variables: []infrav1.Variable{{Name: "size", Value: &apiextensionsv1.JSON{Raw: []byte(`"small"`)}}},
			}},
		})
	})
	waitAll(t, c, s, mgr, "Ready after the first apply", ready)
	firstApply := time.Since(began)
	m1, r1 := scrape(t, mgr.metricsURL), mgr.mark()
	// The high-water mark after each phase says which phase set it.
	var peaks []int64
	peak := func() {
		hwm, _, err := procMemory(mgr.Cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		peaks = append(peaks, hwm)
	}
	peak()

	// 2. New inputs on every object: each plans and waits.
	began = time.Now()
	parallel(t, names, func(name string) error {
		patch := []byte(`{"spec":{"variables":[{"name":"size","value":"large"}]}}`)
		return c.Patch(ctx, &infrav1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}, client.RawPatch(types.MergePatchType, patch))
	})
	waitAll(t, c, s, mgr, "a plan awaiting approval", awaiting)
	// A single approval is timed on an idle manager: once the last plans
	// are recorded, the reconciles that follow them (their Jobs marked
	// processed, block-move removed) may still wait in the queue. What
	// they send counts to the plans.
	quiet := waitQueueEmpty(t, s, mgr, "terraformcluster")
	planned := time.Since(began)
	m2, r2 := scrape(t, mgr.metricsURL), mgr.mark()
	peak()

	// 3. Approve every plan; measure until the approved apply Job appears.
	var list infrav1.TerraformClusterList
	if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		t.Fatal(err)
	}
	hashes := map[string]string{}
	for _, tc := range list.Items {
		hashes[tc.Name] = tc.Status.Plan.PlanHash
	}
	// First single approvals, each on a manager where every other object
	// is idle (its plan waits); then a wave of approvals at once; then
	// the rest at once.
	approve := func(name string) (time.Time, error) {
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, infrav1.AnnotationApprovePlan, hashes[name])
		err := c.Patch(ctx, &infrav1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}, client.RawPatch(types.MergePatchType, patch))
		return time.Now(), err
	}
	deadline := time.Now().Add(s.timeout)
	// seen waits for the approved apply Job of each of names and returns
	// how long after its approval each appeared.
	seen := func(names []string, approvedAt map[string]time.Time) []time.Duration {
		t.Helper()
		lat := make([]time.Duration, 0, len(names))
		for _, name := range names {
			for {
				at, ok := nd.seenApproved(name)
				if ok {
					lat = append(lat, at.Sub(approvedAt[name]))
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no approved apply Job for %s within %s (%d of %d seen); manager log: %s", name, s.timeout, len(lat), len(names), mgr.LogPath)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		return sortedDurations(lat)
	}
	wave := func(names []string) []time.Duration {
		t.Helper()
		var mu sync.Mutex
		approvedAt := map[string]time.Time{}
		parallel(t, names, func(name string) error {
			at, err := approve(name)
			mu.Lock()
			approvedAt[name] = at
			mu.Unlock()
			return err
		})
		return seen(names, approvedAt)
	}
	singles := min(s.singles, s.n)
	waveSize := min(s.wave, s.n-singles)
	began = time.Now()
	var single []time.Duration
	for _, name := range names[:singles] {
		at, err := approve(name)
		if err != nil {
			t.Fatal(err)
		}
		single = append(single, seen([]string{name}, map[string]time.Time{name: at})...)
	}
	t.Logf("single approvals → apply Jobs, in order, after the queue was empty for %s: %v", quiet, single)
	single = sortedDurations(single)
	waveLat := wave(names[singles : singles+waveSize])
	lat := wave(names[singles+waveSize:])
	waitAll(t, c, s, mgr, "Ready after the approved apply", applied)
	approvedFlow := time.Since(began)
	m3, r3 := scrape(t, mgr.metricsURL), mgr.mark()
	peak()

	// 4. Idle: every object re-checks about idle/recheck times.
	idle0, idle1, hwm, rss := idleWindow(t, s, mgr)

	idleRequests, idleReconciles := requests(idle0, idle1), reconciles(idle0, idle1, "terraformcluster")
	perObjectRecheck := idleRequests / float64(s.n) / (s.idle.Minutes() / s.recheck.Minutes())
	perHour := perObjectRecheck * (time.Hour.Minutes() / engine.Recheck.Minutes())
	t.Logf("requests by method: create→Ready %s; new inputs→plan %s; approve→Ready %s",
		formatCounts(byMethod(m0, m1)), formatCounts(byMethod(m1, m2)), formatCounts(byMethod(m2, m3)))
	mb := func(b float64) float64 { return b / (1 << 20) }
	lines := []string{
		fmt.Sprintf("scale: N=%d approval→apply Job: %d single approvals, the other objects idle: p50=%s p99=%s max=%s; a wave of %d: p50=%s p90=%s p99=%s max=%s; the other %d at once: p50=%s p90=%s p99=%s max=%s",
			s.n, len(single), ms(quantile(single, 0.5)), ms(quantile(single, 0.99)), ms(quantile(single, 1)),
			len(waveLat), ms(quantile(waveLat, 0.5)), ms(quantile(waveLat, 0.9)), ms(quantile(waveLat, 0.99)), ms(quantile(waveLat, 1)),
			len(lat), ms(quantile(lat, 0.5)), ms(quantile(lat, 0.9)), ms(quantile(lat, 0.99)), ms(quantile(lat, 1))),
		fmt.Sprintf("scale: N=%d idle %s at --recheck-interval=%s: %.0f requests (%s), %.0f reconciles; %.2f requests per object per re-check × %.0f re-checks an hour at %s = %.1f requests per object per hour",
			s.n, s.idle, s.recheck, idleRequests, formatCounts(byMethod(idle0, idle1)), idleReconciles, perObjectRecheck,
			time.Hour.Minutes()/engine.Recheck.Minutes(), engine.Recheck, perHour),
		fmt.Sprintf("scale: N=%d memory VmHWM=%.0f MB VmRSS=%.0f MB heap in use=%.0f MB; VmHWM after create→Ready %.0f MB, after the plans %.0f MB, after the approvals %.0f MB",
			s.n, mb(float64(hwm)), mb(float64(rss)), mb(idle1.sum("go_memstats_heap_inuse_bytes")), mb(float64(peaks[0])), mb(float64(peaks[1])), mb(float64(peaks[2]))),
		fmt.Sprintf("scale: N=%d phases (per object: requests, reconciles; manager CPU): create→Ready %s (%.1f, %.1f; %.1fs), new inputs→plan awaiting %s (%.1f, %.1f; %.1fs), approve→Ready %s (%.1f, %.1f; %.1fs), idle (%.1fs); conflicts (409) %.0f, reconcile errors %.0f",
			s.n, firstApply.Round(time.Second), requests(m0, m1)/float64(s.n), reconciles(m0, m1, "terraformcluster")/float64(s.n), cpu(m0, m1),
			planned.Round(time.Second), requests(m1, m2)/float64(s.n), reconciles(m1, m2, "terraformcluster")/float64(s.n), cpu(m1, m2),
			approvedFlow.Round(time.Second), requests(m2, m3)/float64(s.n), reconciles(m2, m3, "terraformcluster")/float64(s.n), cpu(m2, m3), cpu(idle0, idle1),
			idle1.sum("rest_client_requests_total", `code="409"`), idle1.sum("controller_runtime_reconcile_errors_total", `controller="terraformcluster"`)),
	}
	if s.breakdown {
		for _, p := range []struct {
			name     string
			from, to int
		}{{"create→Ready", r0, r1}, {"new inputs→plan awaiting", r1, r2}, {"approve→Ready", r2, r3}} {
			lines = append(lines, fmt.Sprintf("scale: N=%d breakdown %s, requests per object: %s", s.n, p.name, mgr.breakdown(p.from, p.to, s.n)))
		}
	}
	baseline := idleRequests / s.idle.Minutes()
	if s.machines > 0 {
		more, perMinute := machinePhase(t, c, s, mgr, names, perObjectRecheck)
		lines, baseline = append(lines, more...), perMinute
	}
	if s.pools > 0 {
		lines = append(lines, poolPhase(t, c, s, mgr, nd, names, baseline)...)
	}
	// At the end of the last idle window, with every kind there: where
	// the manager's memory goes; then a restart of the idle manager.
	lines = append(lines, heapPhase(t, s, mgr)...)
	lines = append(lines, restartPhase(t, c, s, mgr, nd)...)
	lines = append(lines, driftPhase(t, c, s, mgr, nd, names)...)
	for _, l := range lines {
		fmt.Println(l)
		t.Log(l)
	}
	if n := len(single) + len(waveLat) + len(lat); n != s.n {
		t.Errorf("%d latencies for %d objects", n, s.n)
	}
}

// idleWindow waits for the last writes to settle, then scrapes the
// manager's metrics at both ends of the idle window, and reads its
// memory at the end.
func idleWindow(t *testing.T, s settings, mgr *manager) (before, after metrics, hwm, rss int64) {
	t.Helper()
	time.Sleep(10 * time.Second)
	before = scrape(t, mgr.metricsURL)
	time.Sleep(s.idle)
	after = scrape(t, mgr.metricsURL)
	hwm, rss, err := procMemory(mgr.Cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return before, after, hwm, rss
}

// requests is how many requests the manager sent between scrapes a and b.
func requests(a, b metrics) float64 {
	return b.sum("rest_client_requests_total") - a.sum("rest_client_requests_total")
}

// cpu is the manager's CPU time between a and b, in seconds.
func cpu(a, b metrics) float64 {
	return b.sum("process_cpu_seconds_total") - a.sum("process_cpu_seconds_total")
}

// reconciles is how many reconciles the controller named ran between a
// and b.
func reconciles(a, b metrics, controller string) float64 {
	match := fmt.Sprintf("controller=%q", controller)
	return b.sum("controller_runtime_reconcile_total", match) - a.sum("controller_runtime_reconcile_total", match)
}

// byMethod is requests by HTTP method.
func byMethod(a, b metrics) map[string]float64 {
	out := map[string]float64{}
	for k, v := range b.byLabel("rest_client_requests_total", "method") {
		if d := v - a.byLabel("rest_client_requests_total", "method")[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

func ms(d time.Duration) string { return d.Round(time.Millisecond).String() }

func formatCounts(m map[string]float64) string {
	var parts []string
	for _, k := range []string{"GET", "LIST", "WATCH", "POST", "PUT", "PATCH", "DELETE"} {
		if v, ok := m[k]; ok {
			parts = append(parts, fmt.Sprintf("%s %.0f", k, v))
		}
	}
	return strings.Join(parts, ", ")
}

// manager is the running manager binary and its metrics endpoint; with
// CAPTF_SCALE_BREAKDOWN, the proxy it talks to the API server through.
type manager struct {
	*managertest.Manager
	metricsURL, pprofURL string
	proxy                *faultproxy.Proxy
	// bin, kubeconfig and args run it again (restartPhase).
	bin, kubeconfig string
	args            []string
}

// mark is where the proxy's record of requests stands (0 without one).
func (m *manager) mark() int {
	if m.proxy == nil {
		return 0
	}
	return m.proxy.Mark()
}

// breakdown is the requests recorded between marks from and to, by method
// and resource (watches apart), per one of n, most first.
func (m *manager) breakdown(from, to, n int) string {
	if m.proxy == nil || n == 0 {
		return ""
	}
	counts := map[string]int{}
	for _, r := range m.proxy.Since(from)[:to-from] {
		key := r.Key()
		if r.Watch {
			key = "WATCH " + r.Resource
		}
		counts[key]++
	}
	keys := slices.SortedFunc(maps.Keys(counts), func(a, b string) int { return cmp.Or(counts[b]-counts[a], strings.Compare(a, b)) })
	parts := make([]string, 0, len(keys))
	var total int
	for _, k := range keys {
		total += counts[k]
		parts = append(parts, fmt.Sprintf("%s %.2f", k, float64(counts[k])/float64(n)))
	}
	out := fmt.Sprintf("%.1f in all: %s", float64(total)/float64(n), strings.Join(parts, ", "))
	if os.Getenv("CAPTF_SCALE_TRACE") == "1" {
		for _, r := range m.proxy.Since(from)[:to-from] {
			out += fmt.Sprintf("\n  %s %s %s %d", r.Method, r.Resource, r.Name, r.Status)
		}
	}
	return out
}

// startManager builds cmd/manager and runs it against env with a metrics
// endpoint and the Go runtime's profiles, stopping it (and waiting for
// it) before the API server stops.
func startManager(t *testing.T, env *testenv.Env, s settings) *manager {
	t.Helper()
	metricsPort, pprofPort := managertest.FreePort(t), managertest.FreePort(t)
	args := append([]string{
		"--runner-image=" + runnerImage,
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort), "--metrics-secure=false",
		fmt.Sprintf("--pprof-bind-address=127.0.0.1:%d", pprofPort),
		"--recheck-interval=" + s.recheck.String(),
	}, s.managerArgs...)
	m := &manager{
		metricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort),
		pprofURL:   fmt.Sprintf("http://127.0.0.1:%d/debug/pprof", pprofPort),
		bin:        managertest.Build(t, "../.."), kubeconfig: env.Kubeconfig(t), args: args,
	}
	if s.breakdown {
		m.proxy = faultproxy.Start(t, env.Config)
		m.kubeconfig = m.proxy.Kubeconfig(t)
	}
	m.Manager = managertest.Start(t, m.bin, m.kubeconfig, args...)
	return m
}

// parallel runs do for every name, writers at a time, and fails the test
// on the first error.
func parallel(t *testing.T, names []string, do func(name string) error) {
	t.Helper()
	work := make(chan string)
	errs := make(chan error, len(names))
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for name := range work {
				if err := do(name); err != nil {
					errs <- fmt.Errorf("%s: %w", name, err)
				}
			}
		})
	}
	for _, n := range names {
		work <- n
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// follower is the test's client: it lists the objects it waits for from
// a cache of its own, which one watch keeps current. Listing every object
// from the API server every two seconds would load the server whose load
// the benchmark measures (at N=5,000, tens of megabytes a list).
type follower struct {
	client.Client
	cache client.Reader
}

func (f follower) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	switch list.(type) {
	case *infrav1.TerraformClusterList, *infrav1.TerraformMachineList, *infrav1.TerraformMachinePoolList:
		return f.cache.List(ctx, list, opts...)
	}
	return f.Client.List(ctx, list, opts...)
}

// followed is direct with the lists of the benchmark's objects from a
// cache of the namespace, which runs until ctx ends.
func followed(t *testing.T, ctx context.Context, cfg *rest.Config, direct client.Client) client.Client {
	t.Helper()
	cch, err := cache.New(cfg, cache.Options{Scheme: direct.Scheme(), DefaultNamespaces: map[string]cache.Config{namespace: {}}})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		if err := cch.Start(ctx); err != nil {
			t.Errorf("the test's cache: %v", err)
		}
	}()
	if !cch.WaitForCacheSync(ctx) {
		t.Fatal("the test's cache did not sync")
	}
	return follower{Client: direct, cache: cch}
}

// waitQueueEmpty waits until the controller's work queue holds nothing
// ready to reconcile in two scrapes a second apart (re-checks that wait
// for their time are not in it), and returns how long that took.
func waitQueueEmpty(t *testing.T, s settings, m *manager, controller string) time.Duration {
	t.Helper()
	began := time.Now()
	match := fmt.Sprintf("name=%q", controller)
	for empty := 0; empty < 2; time.Sleep(time.Second) {
		if scrape(t, m.metricsURL).sum("workqueue_depth", match) == 0 {
			empty++
		} else {
			empty = 0
		}
		if time.Since(began) > s.timeout {
			t.Fatalf("the %s queue was not empty within %s", controller, s.timeout)
		}
	}
	return time.Since(began).Round(time.Second)
}

// waitAll polls the TerraformClusters until every one meets cond.
func waitAll(t *testing.T, c client.Client, s settings, m *manager, what string, cond func(*infrav1.TerraformCluster) bool) {
	t.Helper()
	waitCount(t, s, m, what, s.n, func() (done, all int) {
		var list infrav1.TerraformClusterList
		if err := c.List(context.Background(), &list, client.InNamespace(namespace)); err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			if cond(&list.Items[i]) {
				done++
			}
		}
		return done, len(list.Items)
	})
}

// waitCount polls count until want objects are there and every one is
// done, logging progress every half minute.
func waitCount(t *testing.T, s settings, m *manager, what string, want int, count func() (done, all int)) {
	t.Helper()
	began := time.Now()
	deadline, lastLog := began.Add(s.timeout), began
	for {
		done, all := count()
		if done == want && all == want {
			t.Logf("%d objects %s after %s", want, what, time.Since(began).Round(time.Second))
			return
		}
		if time.Since(lastLog) > 30*time.Second {
			t.Logf("%d of %d objects %s after %s", done, want, what, time.Since(began).Round(time.Second))
			lastLog = time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d objects %s within %s; manager log: %s", done, want, what, s.timeout, m.LogPath)
		}
		time.Sleep(2 * time.Second)
	}
}

func condition(tc *infrav1.TerraformCluster, typ string) *metav1.Condition {
	return meta.FindStatusCondition(tc.Status.Conditions, typ)
}

// ready: applied, nothing due, nothing running, the status current.
func ready(tc *infrav1.TerraformCluster) bool {
	c := condition(tc, infrav1.ConditionApplyJobSucceeded)
	return tc.Status.Ready && tc.Status.ActiveJob == nil && tc.Status.Plan == nil &&
		tc.Status.ObservedGeneration == tc.Generation && c != nil && c.Status == metav1.ConditionTrue
}

// awaiting: a plan for the current spec waits for approval.
func awaiting(tc *infrav1.TerraformCluster) bool {
	c := condition(tc, infrav1.ConditionApplyJobSucceeded)
	return tc.Status.Plan != nil && tc.Status.ActiveJob == nil && tc.Status.ObservedGeneration == tc.Generation &&
		c != nil && c.Reason == infrav1.ReasonPlanAwaitingApproval
}

// applied: ready again, and the approval consumed.
func applied(tc *infrav1.TerraformCluster) bool {
	_, approval := tc.Annotations[infrav1.AnnotationApprovePlan]
	return ready(tc) && !approval
}

// driftInterval is how often every object checks for drift in the drift
// phase: often, so that a short window holds several checks per object.
const driftInterval = 20 * time.Second

// driftPhase turns drift checks on for every object and measures the
// manager's requests per drift check (the Job's own aside: the node plays
// it) over the idle window, and from that the cost per object and hour at
// the default interval.
func driftPhase(t *testing.T, c client.Client, s settings, mgr *manager, nd *node, names []string) []string {
	ctx := context.Background()
	patch := fmt.Appendf(nil, `{"spec":{"drift":{"intervalSeconds":%d}}}`, int(driftInterval.Seconds()))
	parallel(t, names, func(name string) error {
		return c.Patch(ctx, &infrav1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}, client.RawPatch(types.MergePatchType, patch))
	})
	// Past the first checks, whose Jobs are not pruned yet: the window
	// sees the steady state, where each check's Job replaces an old one.
	time.Sleep(4 * driftInterval)
	d0, j0, r0 := scrape(t, mgr.metricsURL), nd.driftJobs(), mgr.mark()
	time.Sleep(s.idle)
	d1, j1, r1 := scrape(t, mgr.metricsURL), nd.driftJobs(), mgr.mark()
	checks := float64(j1 - j0)
	if checks == 0 {
		t.Fatalf("no drift check ran in %s at spec.drift.intervalSeconds=%s", s.idle, driftInterval)
	}
	// The window's re-checks are in the figure too: an upper bound.
	perCheck := requests(d0, d1) / checks
	perHour := perCheck * (time.Hour.Minutes() / engine.DefaultDriftInterval.Minutes())
	lines := []string{fmt.Sprintf("scale: N=%d drift checks every %s, idle %s: %.0f checks, %.0f requests (%s), manager CPU %.1fs; %.1f requests per check (re-checks in the window included) × %.0f checks an hour at the default %s = %.1f requests per object per hour for drift",
		s.n, driftInterval, s.idle, checks, requests(d0, d1), formatCounts(byMethod(d0, d1)), cpu(d0, d1), perCheck,
		time.Hour.Minutes()/engine.DefaultDriftInterval.Minutes(), engine.DefaultDriftInterval, perHour)}
	if s.breakdown {
		lines = append(lines, fmt.Sprintf("scale: N=%d breakdown drift, requests per check: %s", s.n, mgr.breakdown(r0, r1, int(checks))))
	}
	return lines
}
