package scale

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
)

// trace is one stack of a heap profile and the bytes in use allocated
// there; frames leaf first, as `go tool pprof -traces` prints them.
type trace struct {
	bytes  int64
	frames []string
}

// parseTraces reads the output of `go tool pprof -traces` of a heap
// profile with -sample_index=inuse_space: blocks separated by dashed
// lines, each with label lines ("bytes:  112B"), then the value and the
// leaf function, then one function a line. A value it cannot read is an
// error naming its line.
func parseTraces(r io.Reader) ([]trace, error) {
	var out []trace
	var cur *trace
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(text, "-----------+"):
			cur = nil
			out = append(out, trace{})
			cur = &out[len(out)-1]
		case cur == nil || text == "":
			// The header (File:, Type:, Time:) before the first block.
		case len(cur.frames) == 0 && strings.HasSuffix(strings.Fields(text)[0], ":"):
			// A label of the samples ("bytes:  112B").
		case len(cur.frames) == 0:
			value, fn, ok := strings.Cut(text, " ")
			if !ok {
				return nil, fmt.Errorf("traces line %d: no function after the value in %q", line, text)
			}
			b, err := parseBytes(value)
			if err != nil {
				return nil, fmt.Errorf("traces line %d: %w", line, err)
			}
			cur.bytes = b
			cur.frames = append(cur.frames, strings.TrimSpace(fn))
		default:
			cur.frames = append(cur.frames, text)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	// The dashed line after the last block opens an empty one.
	return slices.DeleteFunc(out, func(t trace) bool { return len(t.frames) == 0 }), nil
}

var bytesValue = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)(B|kB|MB|GB|TB)?$`)

// parseBytes reads a size as pprof prints it: 0, 112B, 26.62kB, 1.50MB
// (units of 1024).
func parseBytes(s string) (int64, error) {
	m := bytesValue.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("%q is not a size", s)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size: %w", s, err)
	}
	unit := map[string]float64{"": 1, "B": 1, "kB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}[m[2]]
	return int64(v * unit), nil
}

// heapGroup is where a stack's bytes go: the first rule, in order, one of
// whose patterns a frame of the stack contains.
type heapGroup struct {
	name     string
	patterns []string
}

// typedDecode finds the kind an object decoded from protobuf is: the
// generated Unmarshal of a Kubernetes API type (Secret, Job, Pod,
// ConfigMap), the outermost one on the stack.
var typedDecode = regexp.MustCompile(`^k8s\.io/api/[a-z0-9]+/v[0-9a-z]+\.\(\*([A-Za-z]+)\)\.Unmarshal$`)

// heapGroups attribute the manager's heap. The built-in kinds reach the
// cache as protobuf, decoded by each type's generated code: their bytes
// are found by kind (typedDecode). The kinds served by CRDs (captf's and
// Cluster API's) are decoded from JSON by the same reflection for every
// kind, the unstructured copies of Clusters by the unstructured decoder.
var heapGroups = []heapGroup{
	{"Secret data the manager keeps (the Secrets it reads whole)", []string{"engine.(*secretFiller)"}},
	{"CRD kinds, decoded from JSON into the cache (captf's and Cluster API's)", []string{"sigs.k8s.io/json.", "encoding/json.", "serializer/json."}},
	{"built-in kinds decoded from protobuf, each object's outer struct (before its kind's code runs)", []string{"serializer/protobuf."}},
	{"unstructured copies (Cluster API Clusters, owners)", []string{"unstructured.(*unstructuredJSONScheme)", "unstructured.(*Unstructured)"}},
	{"the caches' stores and indexes", []string{"k8s.io/client-go/tools/cache."}},
	{"work queues", []string{"util/workqueue.", "controller/priorityqueue."}},
	{"captf's engine, other", []string{"github.com/captf/captf/"}},
	{"HTTP/2 and TLS buffers", []string{"golang.org/x/net/http2.", "net/http.", "crypto/tls."}},
	{"goroutine stacks' records", []string{"runtime.malg"}},
	{"package variables (made at start)", []string{"runtime.doInit"}},
}

// groupHeap sums traces by kind (the built-in kinds decoded from
// protobuf) or else by heapGroups; what no rule takes is "other".
func groupHeap(traces []trace) map[string]int64 {
	out := map[string]int64{}
	for _, tr := range traces {
		out[heapGroupOf(tr.frames)] += tr.bytes
	}
	return out
}

func heapGroupOf(frames []string) string {
	for _, f := range frames {
		// What the cache's transforms keep of a Job or a pod.
		switch {
		case strings.Contains(f, "engine.stripJob"):
			return "Job (decoded from protobuf into the cache)"
		case strings.Contains(f, "engine.stripPod"):
			return "Pod (decoded from protobuf into the cache)"
		}
	}
	for i := len(frames) - 1; i >= 0; i-- {
		if m := typedDecode.FindStringSubmatch(strings.TrimSuffix(frames[i], " (inline)")); m != nil {
			return m[1] + " (decoded from protobuf into the cache)"
		}
	}
	for _, g := range heapGroups {
		for _, f := range frames {
			for _, p := range g.patterns {
				if strings.Contains(f, p) {
					return g.name
				}
			}
		}
	}
	return "other"
}

// heapProfile saves the manager's heap profile (after a garbage
// collection) in a file that outlives the test, and returns its path.
func heapProfile(t *testing.T, mgr *manager) string {
	t.Helper()
	resp, err := http.Get(mgr.pprofURL + "/heap?gc=1")
	if err != nil {
		t.Fatalf("heap profile: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("heap profile: %s", resp.Status)
	}
	f, err := os.CreateTemp("", "captf-scale-heap-*.pb.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Body); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// profileTraces reads a heap profile's stacks with `go tool pprof`.
func profileTraces(t *testing.T, path string) []trace {
	t.Helper()
	out, err := exec.Command("go", "tool", "pprof", "-traces", "-sample_index=inuse_space", path).Output()
	if err != nil {
		t.Fatalf("go tool pprof -traces %s: %v", path, err)
	}
	traces, err := parseTraces(strings.NewReader(string(out)))
	if err != nil {
		t.Fatalf("go tool pprof -traces %s: %v", path, err)
	}
	return traces
}

// sortedGroups is groups, largest first, each with its share of total.
func sortedGroups(groups map[string]int64) string {
	var total int64
	names := make([]string, 0, len(groups))
	for name, b := range groups {
		total += b
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int {
		if groups[a] != groups[b] {
			if groups[a] > groups[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, len(names))
	for _, name := range names {
		share := 0.0
		if total > 0 {
			share = 100 * float64(groups[name]) / float64(total)
		}
		parts = append(parts, fmt.Sprintf("%s %.1f MB (%.0f%%)", name, float64(groups[name])/(1<<20), share))
	}
	return strings.Join(parts, "; ")
}

// heapPhase takes the manager's heap profile and attributes its bytes in
// use (heapGroups), and counts the objects of each kind it caches.
func heapPhase(t *testing.T, s settings, mgr *manager) []string {
	t.Helper()
	path := heapProfile(t, mgr)
	traces := profileTraces(t, path)
	groups := groupHeap(traces)
	var total int64
	for _, b := range groups {
		total += b
	}
	t.Logf("heap profile: %s", path)
	kinds := measureFootprint(t, mgr.kubeconfig)
	mb := func(b int64) float64 { return float64(b) / (1 << 20) }
	var byKind, profiled []string
	var crd int64
	for _, k := range kinds {
		perObject := 0.0
		if k.objects > 0 {
			perObject = float64(k.bytes) / float64(k.objects) / 1024
		}
		byKind = append(byKind, fmt.Sprintf("%s %d objects %.2f MB (%.1f KiB each, %.0f%% of the heap)", k.kind, k.objects, mb(k.bytes), perObject, 100*float64(k.bytes)/float64(total)))
		if g, ok := groups[k.kind+" (decoded from protobuf into the cache)"]; ok {
			profiled = append(profiled, fmt.Sprintf("%s %.2f MB in the cache, %.2f MB in the profile", k.kind, mb(k.bytes), mb(g)))
		} else if !slices.Contains([]string{"Secret", "Job", "Pod"}, k.kind) {
			crd += k.bytes
		}
	}
	return []string{
		fmt.Sprintf("scale: N=%d heap in use by the profile %.1f MB (%s): %s", s.n, mb(total), path, sortedGroups(groups)),
		fmt.Sprintf("scale: N=%d the manager's cache by kind (a cache with its options, filled one kind after another in a process of its own): %s", s.n, strings.Join(byKind, "; ")),
		fmt.Sprintf("scale: N=%d the cache against the profile: CRD kinds %.2f MB in the cache, %.2f MB in the profile (decoded from JSON: %.2f MB, unstructured: %.2f MB); %s",
			s.n, mb(crd), mb(groups[heapGroups[1].name]+groups[heapGroups[3].name]), mb(groups[heapGroups[1].name]), mb(groups[heapGroups[3].name]), strings.Join(profiled, "; ")),
	}
}

// footprintKinds are the kinds the manager caches whose bytes its heap
// profile cannot tell apart (decoded from JSON) or, as a check of the
// method, can (Secret, Job, Pod: decoded from protobuf).
func footprintKinds() []struct {
	name string
	obj  client.Object
	list client.ObjectList
} {
	unstructuredCluster := &unstructured.Unstructured{}
	unstructuredCluster.SetGroupVersionKind(clusterv1.GroupVersion.WithKind("Cluster"))
	unstructuredClusters := &unstructured.UnstructuredList{}
	unstructuredClusters.SetGroupVersionKind(clusterv1.GroupVersion.WithKind("ClusterList"))
	return []struct {
		name string
		obj  client.Object
		list client.ObjectList
	}{
		{"TerraformCluster", &infrav1.TerraformCluster{}, &infrav1.TerraformClusterList{}},
		{"TerraformMachine", &infrav1.TerraformMachine{}, &infrav1.TerraformMachineList{}},
		{"TerraformMachinePool", &infrav1.TerraformMachinePool{}, &infrav1.TerraformMachinePoolList{}},
		{"TerraformPlan", &infrav1.TerraformPlan{}, &infrav1.TerraformPlanList{}},
		{"Cluster", &clusterv1.Cluster{}, &clusterv1.ClusterList{}},
		{"Cluster (unstructured)", unstructuredCluster, unstructuredClusters},
		{"Machine", &clusterv1.Machine{}, &clusterv1.MachineList{}},
		{"MachinePool", &clusterv1.MachinePool{}, &clusterv1.MachinePoolList{}},
		{"Secret", &corev1.Secret{}, &corev1.SecretList{}},
		{"Job", &batchv1.Job{}, &batchv1.JobList{}},
		{"Pod", &corev1.Pod{}, &corev1.PodList{}},
	}
}

// footprint runs in a process of its own (CAPTF_SCALE_FOOTPRINT names the
// kubeconfig): a cache made with the manager's options (engine.CacheOptions,
// its transforms) fills one kind after another, and the live heap after a
// garbage collection grows by what each kind takes. It prints one line a
// kind: "footprint: <objects> <bytes> <kind>".
func footprint(t *testing.T, kubeconfig string) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, infrav1.AddToScheme, clusterv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	opts := engine.CacheOptions()
	opts.Scheme = scheme
	c, err := cache.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Start(ctx) }()
	live := func() int64 {
		var ms goruntime.MemStats
		goruntime.GC()
		goruntime.GC()
		goruntime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	kinds := footprintKinds()
	for i, k := range kinds {
		before := live()
		if _, err := c.GetInformer(ctx, k.obj); err != nil {
			t.Fatalf("%s: %v", k.name, err)
		}
		if err := c.List(ctx, k.list); err != nil {
			t.Fatalf("%s: %v", k.name, err)
		}
		n := meta.LenList(k.list)
		// The copies the list holds are not the cache's.
		kinds[i].list, k.list = nil, nil
		fmt.Printf("footprint: %d %d %s\n", n, live()-before, k.name)
	}
}

// kindBytes is what one kind takes in a cache: its objects and bytes.
type kindBytes struct {
	kind           string
	objects, bytes int64
}

// parseFootprint reads footprint's lines among a test binary's output.
func parseFootprint(r io.Reader) ([]kindBytes, error) {
	var out []kindBytes
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "footprint: ")
		if !ok {
			continue
		}
		f := strings.SplitN(rest, " ", 3)
		if len(f) != 3 {
			return nil, fmt.Errorf("footprint line %q: want objects, bytes and a kind", sc.Text())
		}
		objects, err1 := strconv.ParseInt(f[0], 10, 64)
		b, err2 := strconv.ParseInt(f[1], 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("footprint line %q: %w", sc.Text(), err)
		}
		out = append(out, kindBytes{kind: f[2], objects: objects, bytes: b})
	}
	return out, sc.Err()
}

// measureFootprint runs footprint in a new process of the test binary
// against the API server of kubeconfig.
func measureFootprint(t *testing.T, kubeconfig string) []kindBytes {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestScale$", "-test.count=1")
	cmd.Env = append(os.Environ(), "CAPTF_SCALE_FOOTPRINT="+kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("footprint: %v\n%s", err, out)
	}
	kinds, err := parseFootprint(strings.NewReader(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	if len(kinds) != len(footprintKinds()) {
		t.Fatalf("footprint: %d kinds measured, want %d:\n%s", len(kinds), len(footprintKinds()), out)
	}
	return kinds
}
