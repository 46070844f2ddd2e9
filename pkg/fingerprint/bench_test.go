package fingerprint

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/captf/captf/internal/benchplan"
)

// The benchmarks measure, in one run on the same bytes, the fingerprint's
// throughput beside crypto/sha256's (the floor: at least 0.2 of it), and the peak
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

var generated = sync.OnceValues(func() ([]byte, error) {
	var b bytes.Buffer
	err := benchplan.Write(&b, 100_000, 0)
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
	if err := benchplan.Write(&b, 1000, 0); err != nil {
		t.Fatal(err)
	}
	r := computeDetail(t, b.String())
	if r.Report.Add != 400 || r.Report.Change != 400 || r.Report.Destroy != 200 || r.Changes.Len() != 1001 {
		t.Errorf("generated plan of 1,000: add %d change %d destroy %d lines %d", r.Report.Add, r.Report.Change, r.Report.Destroy, r.Changes.Len())
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
		b.Run(in.name+"/detail", func(b *testing.B) {
			h, err := New(testKey)
			if err != nil {
				b.Fatal(err)
			}
			h.Detail = true
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
// that process's peak resident memory, without and with Detail. What the
// CLI does with the detail (write the record, read the approved one,
// compare) is measured by internal/planstore's BenchmarkPeakMemory.
func BenchmarkPeakMemory(b *testing.B) {
	path := filepath.Join(b.TempDir(), "plan.json")
	if err := os.WriteFile(path, generatedPlan(b), 0o600); err != nil {
		b.Fatal(err)
	}
	for _, child := range []string{"stream", "detail"} {
		name := "generated-100k"
		if child == "detail" {
			name += "/detail"
		}
		b.Run(name, func(b *testing.B) {
			var peak float64
			var hash string
			for b.Loop() {
				fields, mb := benchplan.PeakMemory(b, child, "CAPTF_FINGERPRINT_FILE="+path)
				if hash != "" && fields[0] != hash {
					b.Fatalf("the hash moved between runs: %s, then %s", hash, fields[0])
				}
				hash = fields[0]
				peak = max(peak, mb)
			}
			b.ReportMetric(peak, "peak-RSS-MB")
		})
	}
}

// TestMain doubles as the child of BenchmarkPeakMemory: it fingerprints a
// file as a stream, prints the hash and its peak memory, and exits.
func TestMain(m *testing.M) {
	if child := os.Getenv(benchplan.PeakEnv); child != "" {
		f, err := os.Open(os.Getenv("CAPTF_FINGERPRINT_FILE"))
		if err != nil {
			benchplan.Fail(err)
		}
		h, err := New(testKey)
		if err != nil {
			benchplan.Fail(err)
		}
		h.Detail = child == "detail"
		r, err := h.Compute(bufio.NewReader(f))
		if err != nil {
			benchplan.Fail(err)
		}
		benchplan.Report(r.Report.PlanHash)
	}
	os.Exit(m.Run())
}
