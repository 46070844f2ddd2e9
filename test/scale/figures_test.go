package scale

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// metrics is one scrape of the manager's /metrics: each sample's value by
// its line's name and labels as written ("name{a=\"b\"}").
type metrics map[string]float64

// parseMetrics reads the Prometheus text format; comments and blank lines
// are skipped, a line it cannot read is an error naming the line.
func parseMetrics(r io.Reader) (metrics, error) {
	m := metrics{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		i := strings.LastIndexByte(text, ' ')
		if i < 0 {
			return nil, fmt.Errorf("metrics line %d: no value in %q", line, text)
		}
		v, err := strconv.ParseFloat(text[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d: %w", line, err)
		}
		m[text[:i]] = v
	}
	return m, sc.Err()
}

// sum adds the samples of name whose labels contain every one of match
// (each written as `key="value"`).
func (m metrics) sum(name string, match ...string) float64 {
	var total float64
	for k, v := range m {
		n, labels, _ := strings.Cut(k, "{")
		if n != name {
			continue
		}
		ok := true
		for _, l := range match {
			if !strings.Contains(labels, l) {
				ok = false
			}
		}
		if ok {
			total += v
		}
	}
	return total
}

// byLabel sums name's samples by the value of one label.
func (m metrics) byLabel(name, label string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		n, labels, _ := strings.Cut(k, "{")
		if n != name {
			continue
		}
		_, rest, ok := strings.Cut(labels, label+`="`)
		if !ok {
			continue
		}
		val, _, _ := strings.Cut(rest, `"`)
		out[val] += v
	}
	return out
}

func scrape(t *testing.T, url string) metrics {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %s", url, resp.Status)
	}
	m, err := parseMetrics(resp.Body)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	return m
}

// quantile is the nearest-rank q-quantile of sorted durations: the
// smallest value with at least q of all at or below it.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// procMemory reads VmHWM and VmRSS of a process, in bytes.
func procMemory(pid int) (hwm, rss int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("memory of process %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok || (key != "VmHWM" && key != "VmRSS") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("memory of process %d: %s: %w", pid, key, err)
		}
		if key == "VmHWM" {
			hwm = kb * 1024
		} else {
			rss = kb * 1024
		}
	}
	if hwm == 0 || rss == 0 {
		return 0, 0, fmt.Errorf("memory of process %d: no VmHWM or VmRSS in /proc", pid)
	}
	return hwm, rss, nil
}

func TestQuantile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var d []time.Duration
		for _, x := range v {
			d = append(d, time.Duration(x)*time.Millisecond)
		}
		return d
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		reason string
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{"no samples", nil, 0.5, 0},
		{"one sample is every quantile", ms(7), 0.99, 7 * time.Millisecond},
		{"median of an odd count", ms(1, 2, 3), 0.5, 2 * time.Millisecond},
		{"median of an even count is the lower middle", ms(1, 2, 3, 4), 0.5, 2 * time.Millisecond},
		{"p99 of 100 is the 99th", ms(hundred...), 0.99, 99 * time.Millisecond},
		{"p90 of 100 is the 90th", ms(hundred...), 0.9, 90 * time.Millisecond},
		{"max", ms(hundred...), 1, 100 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.reason, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, quantile(tt.sorted, tt.q)); diff != "" {
				t.Errorf("quantile(%v) (-want +got):\n%s", tt.q, diff)
			}
		})
	}
}

func TestParseMetrics(t *testing.T) {
	text := `# HELP rest_client_requests_total Number of HTTP requests.
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="127.0.0.1:1",method="GET"} 120
rest_client_requests_total{code="200",host="127.0.0.1:1",method="PATCH"} 30
rest_client_requests_total{code="409",host="127.0.0.1:1",method="PATCH"} 2
go_memstats_heap_inuse_bytes 1.2345e+07
controller_runtime_reconcile_total{controller="terraformcluster",result="success"} 41
`
	m, err := parseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{
		"requests":  m.sum("rest_client_requests_total"),
		"patches":   m.sum("rest_client_requests_total", `method="PATCH"`),
		"conflicts": m.sum("rest_client_requests_total", `code="409"`),
		"heap":      m.sum("go_memstats_heap_inuse_bytes"),
		"reconcile": m.sum("controller_runtime_reconcile_total", `controller="terraformcluster"`),
		"absent":    m.sum("workqueue_depth"),
	}
	want := map[string]float64{"requests": 152, "patches": 32, "conflicts": 2, "heap": 12345000, "reconcile": 41, "absent": 0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sums (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]float64{"GET": 120, "PATCH": 32}, m.byLabel("rest_client_requests_total", "method")); diff != "" {
		t.Errorf("by method (-want +got):\n%s", diff)
	}

	if _, err := parseMetrics(strings.NewReader("up one\n")); err == nil || !strings.Contains(err.Error(), "metrics line 1") {
		t.Errorf("a bad value: error %v, want one naming line 1", err)
	}
}

// sortedDurations returns d sorted, leaving d as it was.
func sortedDurations(d []time.Duration) []time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s
}

func TestParseTraces(t *testing.T) {
	text := `File: manager
Type: inuse_space
Time: 2026-12-05 12:23:33 UTC
-----------+-------------------------------------------------------
     bytes:  112B
      112B   main.f
             main.main
-----------+-------------------------------------------------------
     bytes:  2kB
    1.50MB   sigs.k8s.io/json/internal/golang/encoding/json.(*decodeState).object
             k8s.io/client-go/rest/watch.(*Decoder).Decode
-----------+-------------------------------------------------------
         0   sync.(*Once).Do (inline)
             runtime.main
-----------+-------------------------------------------------------
`
	got, err := parseTraces(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := []trace{
		{112, []string{"main.f", "main.main"}},
		{1572864, []string{"sigs.k8s.io/json/internal/golang/encoding/json.(*decodeState).object", "k8s.io/client-go/rest/watch.(*Decoder).Decode"}},
		{0, []string{"sync.(*Once).Do (inline)", "runtime.main"}},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(trace{})); diff != "" {
		t.Errorf("traces (-want +got):\n%s", diff)
	}
	bad := "-----------+---\n   12QB   main.f\n"
	if _, err := parseTraces(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "traces line 2") {
		t.Errorf("a bad size: error %v, want one naming line 2", err)
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "112B": 112, "26.50kB": 27136, "1.50MB": 1572864, "2GB": 2 << 30} {
		got, err := parseBytes(in)
		if err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := parseBytes("1.5 MB"); err == nil {
		t.Error("parseBytes(\"1.5 MB\"): no error")
	}
}

func TestHeapGroupOf(t *testing.T) {
	tests := []struct {
		reason string
		frames []string
		want   string
	}{
		{"a Secret decoded from protobuf: the outermost typed Unmarshal names the kind", []string{
			"k8s.io/apimachinery/pkg/apis/meta/v1.(*ObjectMeta).Unmarshal",
			"k8s.io/api/core/v1.(*Secret).Unmarshal",
			"k8s.io/client-go/rest/watch.(*Decoder).Decode",
		}, "Secret (decoded from protobuf into the cache)"},
		{"a pod inside a Job's template is the Job's", []string{
			"k8s.io/api/core/v1.(*PodTemplateSpec).Unmarshal",
			"k8s.io/api/batch/v1.(*Job).Unmarshal (inline)",
		}, "Job (decoded from protobuf into the cache)"},
		{"a CRD kind decoded from JSON", []string{
			"reflect.unsafe_New",
			"sigs.k8s.io/json/internal/golang/encoding/json.(*decodeState).object",
			"k8s.io/client-go/tools/cache.(*Reflector).watch",
		}, "CRD kinds, decoded from JSON into the cache (captf's and Cluster API's)"},
		{"the Secret data the engine keeps", []string{
			"maps.Clone",
			"github.com/captf/captf/internal/controller/engine.(*secretFiller).fill",
		}, "Secret data the manager keeps (the Secrets it reads whole)"},
		{"a Job as the cache's transform keeps it", []string{
			"github.com/captf/captf/internal/controller/engine.stripJob",
			"k8s.io/client-go/tools/cache.(*RealFIFO).addToItems_locked",
		}, "Job (decoded from protobuf into the cache)"},
		{"an object's outer struct, decoded from protobuf", []string{
			"reflect.New",
			"k8s.io/apimachinery/pkg/runtime.(*Scheme).New",
			"k8s.io/apimachinery/pkg/runtime/serializer/protobuf.unmarshalToObject",
		}, "built-in kinds decoded from protobuf, each object's outer struct (before its kind's code runs)"},
		{"a package variable", []string{"k8s.io/api/core/v1.init", "runtime.doInit1", "runtime.doInit (inline)"}, "package variables (made at start)"},
		{"nothing known", []string{"main.f"}, "other"},
	}
	for _, tt := range tests {
		t.Run(tt.reason, func(t *testing.T) {
			if got := heapGroupOf(tt.frames); got != tt.want {
				t.Errorf("heapGroupOf = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseRechecks(t *testing.T) {
	text := `{"level":"info","ts":"2026-12-05T12:51:15.5Z","msg":"Starting workers","controller":"terraformmachine","worker count":8}
{"level":"Level(-5)","ts":"2026-12-05T12:51:16.123456789Z","msg":"Reconciling","controller":"terraformcluster","namespace":"default","name":"a","reconcileID":"1"}
{"level":"Level(-5)","ts":"2026-12-05T12:51:16.223456789Z","msg":"Reconcile done, requeueing after 1m0s","controller":"terraformcluster","namespace":"default","name":"a","reconcileID":"1"}
{"level":"error","ts":"2026-12-05T12:51:16.3Z","msg":"Reconciler error","controller":"terraformmachine","namespace":"default","name":"b","error":"boom"}
{"level":"Level(-5)","ts":"2026-12-05T12:51:17Z","msg":"Reconcile successful","controller":"terraformmachinepool","namespace":"default","name":"c"}
{"level":"Level(-5)","ts":"2026-12-05T12:51:17Z","msg":"Reconcile done, requeueing","controller":"terraformmachine","namespace":"default","name":"d"}
{"level":"Level(-5)","ts":"not a time","msg":"Reconcile successful","controller":"terraformmachine","namespace":"default","name":"e"}
manager: a line that is not JSON "Reconcile successful"
`
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	want := []recheck{
		{"terraformcluster/default/a", at("2026-12-05T12:51:16.223456789Z")},
		{"terraformmachinepool/default/c", at("2026-12-05T12:51:17Z")},
		{"terraformmachine/default/d", at("2026-12-05T12:51:17Z")},
	}
	if diff := cmp.Diff(want, parseRechecks(strings.NewReader(text)), cmp.AllowUnexported(recheck{})); diff != "" {
		t.Errorf("rechecks (-want +got):\n%s", diff)
	}
}

func TestClassifyJobs(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	job := func(d time.Duration, op, kind, owner string) jobSeen {
		return jobSeen{at: at(d), op: op, ownerKind: kind, owner: owner}
	}
	pool, cluster := "TerraformMachinePool", "TerraformCluster"
	before := []jobSeen{
		job(0, "apply", pool, "p"), job(time.Second, "refresh", pool, "p"),
		job(61*time.Second, "refresh", pool, "p"), job(121*time.Second, "refresh", pool, "p"), job(241*time.Second, "refresh", pool, "p"),
		job(0, "apply", pool, "q"), job(time.Second, "refresh", pool, "q"), job(61*time.Second, "refresh", pool, "q"),
		job(0, "apply", cluster, "c"), job(0, "apply", cluster, "d"),
	}
	after := []jobSeen{
		// p's gaps were 60, 60, 120 s: one 100 s after its last is early.
		job(341*time.Second, "refresh", pool, "p"),
		// q's were 60 s: 119 s after its last is due (not early).
		job(180*time.Second, "refresh", pool, "q"),
		// c applied 10 minutes before: a drift check is early; d's after 30.
		job(10*time.Minute, "drift", cluster, "c"),
		job(31*time.Minute, "drift", cluster, "d"),
		job(31*time.Minute, "plan", cluster, "d"),
	}
	got := classifyJobs(before, after, 30*time.Minute)
	if got.total() != 5 || got.early() != 3 {
		t.Errorf("total %d, early %d (%s); want 5 and 3", got.total(), got.early(), got)
	}
	if want := "drift 2, 1 of them early; plan 1; refresh 2, 1 of them early"; got.String() != want {
		t.Errorf("counts %q, want %q", got, want)
	}
	if got := classifyJobs(before, nil, 30*time.Minute).String(); got != "none" {
		t.Errorf("no Job after: %q, want none", got)
	}
}

func TestParseFootprint(t *testing.T) {
	text := "=== RUN   TestScale\nfootprint: 100 2048000 TerraformCluster\nfootprint: 3 -512 Cluster (unstructured)\n--- PASS: TestScale\n"
	got, err := parseFootprint(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := []kindBytes{{"TerraformCluster", 100, 2048000}, {"Cluster (unstructured)", 3, -512}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(kindBytes{})); diff != "" {
		t.Errorf("footprint (-want +got):\n%s", diff)
	}
	if _, err := parseFootprint(strings.NewReader("footprint: many 1 Job\n")); err == nil {
		t.Error("a count that is no number: no error")
	}
}
