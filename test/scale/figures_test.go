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
