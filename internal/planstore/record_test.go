package planstore

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/captf/captf/pkg/fingerprint"
)

var update = flag.Bool("update", false, "rewrite golden files")

// computeFile fingerprints a plan document with Detail, as the CLI does.
func computeFile(t *testing.T, path string) *fingerprint.Result {
	t.Helper()
	h, err := fingerprint.New(benchKey)
	if err != nil {
		t.Fatal(err)
	}
	h.Detail = true
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := h.Compute(f)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRecordFormat pins the bytes of a record: any change of the format
// (a field, its name, its order, how a value is written) fails it, and a
// record in that format must still be read back. The plan has an update
// with sensitive attributes, a create_before_destroy replacement and its
// deposed object at one address, an address with characters JSON escapes,
// an import, a move, a forget and outputs. The golden record was written by
// the release that introduced the format.
func TestRecordFormat(t *testing.T) {
	fresh := computeFile(t, "testdata/plan.json")
	s := Store{Dir: t.TempDir()}
	now := time.Date(2026, 11, 30, 1, 2, 3, 0, time.FixedZone("CET", 3600))
	if err := s.Save(fresh, now); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(s.path(fresh.Report.PlanHash))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(got, []byte("CANARY")) {
		t.Errorf("the record holds a plan value:\n%s", got)
	}
	golden := filepath.Join("testdata", "record.golden.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(string(want), string(got)); d != "" {
		t.Errorf("record format (-golden +got):\n%s", d)
	}

	// The golden record reads back as the plan it was made from.
	old := Store{Dir: t.TempDir()}
	if err := os.WriteFile(old.path(fresh.Report.PlanHash), want, 0o600); err != nil {
		t.Fatal(err)
	}
	rec, err := old.Load(fresh.Report.PlanHash)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(now.UTC(), rec.CreatedAt); d != "" {
		t.Errorf("createdAt (-want +got):\n%s", d)
	}
	if d := cmp.Diff(fresh.Report, rec.Report); d != "" {
		t.Errorf("report (-want +got):\n%s", d)
	}
	if d := cmp.Diff(changesOf(fresh.Changes), changesOf(rec.Changes), cmpopts.EquateEmpty()); d != "" {
		t.Errorf("changes (-want +got):\n%s", d)
	}
	if d := fingerprint.Compare(rec.Changes, fresh.Changes); len(d) != 0 {
		t.Errorf("the record differs from its own plan: %+v", d)
	}
}

func changesOf(c []fingerprint.Change) []fingerprint.Change { return c }
