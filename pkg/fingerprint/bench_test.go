package fingerprint

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The benchmarks measure, in one run on the same bytes, the fingerprint's
// throughput beside crypto/sha256's (the goal: at least half), and the peak
// memory of fingerprinting a generated plan of 100,000 resource changes
// (~50 MB; the goal: at most 64 MB). hack/bench.sh prints the ratios.
//
//	go test -run '^$' -bench . -benchtime 5x ./pkg/fingerprint

// realPlan is the real 2,000-resource plan terraform made (see
// hack/gen-testplans.sh): 1,710 updates, 190 replacements, 100 deletes.
func realPlan(tb testing.TB) []byte {
	tb.Helper()
	f, err := os.Open("testdata/plans/real-2000.json.gz")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		tb.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// writeGenerated writes a plan of n resource changes shaped like
// terraform's, sorted by address as terraform writes them: a mix of creates, in-place updates, replacements, deletes,
// imports and moves, with unknown and sensitive markers, large integers,
// escapes, and planned_values and prior_state sections to skip.
func writeGenerated(w io.Writer, n int) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	fmt.Fprint(bw, `{"format_version":"1.2","terraform_version":"1.11.4","variables":{"gen":{"value":2}},"planned_values":{"root_module":{"resources":[`)
	for i := range n / 10 {
		if i > 0 {
			bw.WriteByte(',')
		}
		fmt.Fprintf(bw, `{"address":"terraform_data.r[%d]","mode":"managed","type":"terraform_data","values":{"input":{"name":"r-%d"}}}`, i, i)
	}
	fmt.Fprint(bw, `]}},"resource_changes":[`)
	for i := range n {
		if i > 0 {
			bw.WriteByte(',')
		}
		// Addresses in the order terraform writes them: sorted.
		head := fmt.Sprintf(`{"address":"module.m%02d.terraform_data.r[\"k%06d\"]","module_address":"module.m%02d","mode":"managed","type":"terraform_data","name":"r","index":"k%06d","provider_name":"terraform.io/builtin/terraform",`, i/2000, i, i/2000, i)
		bw.WriteString(head)
		switch i % 10 {
		case 0, 1, 2:
			fmt.Fprintf(bw, `"change":{"actions":["create"],"before":null,"after":{"input":{"big":1844674407370955%04d,"name":"r-%d","note":"line\nbreak \u00e9","size":%d},"triggers_replace":null},"after_unknown":{"id":true,"input":{},"output":true},"before_sensitive":false,"after_sensitive":{"input":{"note":true},"output":{}}}}`, i%10000, i, i*7)
		case 3, 4, 5, 6:
			fmt.Fprintf(bw, `"change":{"actions":["update"],"before":{"id":"id-%08d","input":{"gen":1,"name":"r-%d","ports":[80,443,%d]},"triggers_replace":0},"after":{"id":"id-%08d","input":{"gen":2,"name":"r-%d","ports":[80,443,%d]},"triggers_replace":0},"after_unknown":{"input":{"ports":[false,false,false]},"output":true},"before_sensitive":{"input":{"ports":[false,false,false]}},"after_sensitive":{"input":{}}}}`, i, i, 8000+i%1000, i, i, 8000+i%1000)
		case 7:
			fmt.Fprintf(bw, `"change":{"actions":["delete","create"],"before":{"id":"id-%08d","input":"x","triggers_replace":1},"after":{"input":"x","triggers_replace":2},"after_unknown":{"id":true,"output":true},"before_sensitive":{},"after_sensitive":{}},"action_reason":"replace_because_cannot_update"}`, i)
		case 8:
			fmt.Fprintf(bw, `"change":{"actions":["delete"],"before":{"id":"id-%08d","input":"gone"},"after":null,"after_unknown":{},"before_sensitive":{},"after_sensitive":false}}`, i)
		default:
			fmt.Fprintf(bw, `"previous_address":"terraform_data.old[%d]","change":{"actions":["no-op"],"before":{"id":"id-%08d"},"after":{"id":"id-%08d"},"after_unknown":{},"before_sensitive":{},"after_sensitive":{},"importing":{"id":"imp-%d"}}}`, i, i, i, i)
		}
	}
	fmt.Fprint(bw, `],"output_changes":{"count":{"actions":["update"],"before":1,"after":2,"after_unknown":false,"before_sensitive":false,"after_sensitive":false}},"prior_state":{"format_version":"1.0","values":{"root_module":{"resources":[`)
	for i := range n / 10 {
		if i > 0 {
			bw.WriteByte(',')
		}
		fmt.Fprintf(bw, `{"address":"terraform_data.r[%d]","values":{"id":"id-%08d","input":{"name":"r-%d","esc":"q\"uote\\"}}}`, i, i, i)
	}
	fmt.Fprint(bw, `]}}},"configuration":{"root_module":{}},"timestamp":"2026-11-29T00:00:00Z","applyable":true,"complete":true,"errored":false}`)
	return bw.Flush()
}

var generated = sync.OnceValues(func() ([]byte, error) {
	var b bytes.Buffer
	err := writeGenerated(&b, 100_000)
	return b.Bytes(), err
})

func generatedPlan(tb testing.TB) []byte {
	tb.Helper()
	b, err := generated()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestGeneratedPlanIsValid(t *testing.T) {
	var b bytes.Buffer
	if err := writeGenerated(&b, 1000); err != nil {
		t.Fatal(err)
	}
	r := computeDetail(t, b.String())
	if r.Report.Add != 400 || r.Report.Change != 400 || r.Report.Destroy != 200 || len(r.Changes) != 1001 {
		t.Errorf("generated plan of 1,000: add %d change %d destroy %d lines %d", r.Report.Add, r.Report.Change, r.Report.Destroy, len(r.Changes))
	}
}

func BenchmarkFingerprint(b *testing.B) {
	for _, in := range []struct {
		name string
		plan func(testing.TB) []byte
	}{{"real-2000", realPlan}, {"generated-100k", generatedPlan}} {
		plan := in.plan(b)
		b.Run(in.name+"/fingerprint", func(b *testing.B) {
			h, err := New(testKey)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(plan)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := h.Compute(bytes.NewReader(plan)); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(in.name+"/sha256", func(b *testing.B) {
			b.SetBytes(int64(len(plan)))
			for b.Loop() {
				sha256.Sum256(plan)
			}
		})
	}
}

// BenchmarkPeakMemory fingerprints the generated 100,000-change plan from a
// file in a fresh process (this test binary, re-run by TestMain) and reports
// that process's peak resident memory. With Detail, as the CLI runs it.
func BenchmarkPeakMemory(b *testing.B) {
	path := filepath.Join(b.TempDir(), "plan.json")
	if err := os.WriteFile(path, generatedPlan(b), 0o600); err != nil {
		b.Fatal(err)
	}
	for _, detail := range []string{"", "detail"} {
		b.Run("generated-100k"+map[string]string{"": "", "detail": "/detail"}[detail], func(b *testing.B) {
			var peak int64
			for b.Loop() {
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), "CAPTF_FINGERPRINT_FILE="+path, "CAPTF_FINGERPRINT_DETAIL="+detail)
				out, err := cmd.Output()
				if err != nil {
					b.Fatalf("%v: %s", err, out)
				}
				// The child reports its own high-water mark: the rusage of a
				// child also counts the parent's pages it shared before exec.
				var hash string
				var kb int64
				if _, err := fmt.Sscan(string(out), &hash, &kb); err != nil {
					b.Fatalf("child output %q: %v", out, err)
				}
				peak = max(peak, kb)
			}
			b.ReportMetric(float64(peak)/1024, "peak-RSS-MB")
		})
	}
}

// highWaterKB is this process's peak resident memory (VmHWM) in kB.
func highWaterKB() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb
		}
	}
	return -1
}

// TestMain doubles as the child of BenchmarkPeakMemory: it fingerprints a
// file as a stream and exits.
func TestMain(m *testing.M) {
	if path := os.Getenv("CAPTF_FINGERPRINT_FILE"); path != "" {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		h, err := New(testKey)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		h.Detail = os.Getenv("CAPTF_FINGERPRINT_DETAIL") != ""
		r, err := h.Compute(bufio.NewReader(f))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(r.Report.PlanHash, highWaterKB())
		os.Exit(0)
	}
	os.Exit(m.Run())
}
