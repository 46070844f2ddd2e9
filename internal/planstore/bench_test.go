package planstore

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/captf/captf/internal/benchplan"
	"github.com/captf/captf/pkg/fingerprint"
)

// benchKey is the plan key of the benchmarks.
var benchKey = bytes.Repeat([]byte("k"), fingerprint.MinKeySize)

// BenchmarkPeakMemory measures the peak resident memory of what the CLI
// does with a generated plan of 100,000 changes (~54 MB of JSON), each in a
// fresh process (this test binary, re-run by TestMain): "plan" is `captf
// plan` (fingerprint with Detail, write the record), "apply-refused" is a
// refused `captf apply` (the same, then read the record of the approved
// plan and compare: 1,000 changes moved). The goal is at most 64 MB.
func BenchmarkPeakMemory(b *testing.B) {
	dir := b.TempDir()
	write := func(name string, drift int) string {
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := benchplan.Write(f, 100_000, drift); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		return path
	}
	approvedPlan, freshPlan := write("approved.json", 1), write("fresh.json", 0)
	store := filepath.Join(dir, "plans")
	fields, _ := benchplan.PeakMemory(b, "plan", "CAPTF_PLAN="+approvedPlan, "CAPTF_STORE="+store)
	approved := fields[0]

	for _, child := range []string{"plan", "apply-refused"} {
		b.Run("generated-100k/"+child, func(b *testing.B) {
			var peak float64
			for b.Loop() {
				fields, mb := benchplan.PeakMemory(b, child, "CAPTF_PLAN="+freshPlan, "CAPTF_STORE="+store, "CAPTF_APPROVED="+approved)
				if child == "apply-refused" && (len(fields) != 2 || fields[1] != "1000") {
					b.Fatalf("the refused apply found %v differences, want 1000", fields[1:])
				}
				peak = max(peak, mb)
			}
			b.ReportMetric(peak, "peak-RSS-MB")
		})
	}
}

// TestMain doubles as the child of BenchmarkPeakMemory.
func TestMain(m *testing.M) {
	if child := os.Getenv(benchplan.PeakEnv); child != "" {
		peakChild(child)
	}
	os.Exit(m.Run())
}

// peakChild does what `captf plan` (child "plan") or a refused `captf
// apply` (child "apply-refused") does after terraform show -json, in the
// same order as internal/cli, and reports its peak memory.
func peakChild(child string) {
	h, err := fingerprint.New(benchKey)
	if err != nil {
		benchplan.Fail(err)
	}
	h.Detail = true
	f, err := os.Open(os.Getenv("CAPTF_PLAN"))
	if err != nil {
		benchplan.Fail(err)
	}
	fresh, err := h.Compute(bufio.NewReader(f))
	if err != nil {
		benchplan.Fail(err)
	}
	s := Store{Dir: os.Getenv("CAPTF_STORE")}
	if err := s.Save(fresh, time.Now()); err != nil {
		benchplan.Fail(err)
	}
	if child == "plan" {
		benchplan.Report(fresh.Report.PlanHash)
	}
	diffs, err := s.Compare(os.Getenv("CAPTF_APPROVED"), fresh.Changes)
	if err != nil {
		benchplan.Fail(err)
	}
	benchplan.Report(fresh.Report.PlanHash, strconv.Itoa(len(diffs)))
}
