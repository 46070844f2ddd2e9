package planstore

import (
	"bytes"
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// changesOf is every change of d, as a record holds them.
func changesOf(d *fingerprint.Detail) []fingerprint.Change { return slices.Collect(d.All()) }

// TestCompare reads the golden record one change at a time and says what
// moved in a plan made later: changed paths, a changed replacement (with
// its deposed object), a resource gone and one added, a changed output.
func TestCompare(t *testing.T) {
	plan, err := os.ReadFile("testdata/plan.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]string{
		{"CANARY-RECORD-tag2", "CANARY-RECORD-tag3"},
		{"CANARY-RECORD-p2", "CANARY-RECORD-p3"},
		{"CANARY-RECORD-ami2", "CANARY-RECORD-ami3"},
		{`aws_s3_bucket.b[\"a<b&c>\"]`, "aws_s3_bucket.c"},
		{"CANARY-RECORD-output", "CANARY-RECORD-output2"},
	} {
		if !bytes.Contains(plan, []byte(r[0])) {
			t.Fatalf("testdata/plan.json has no %s", r[0])
		}
		plan = bytes.ReplaceAll(plan, []byte(r[0]), []byte(r[1]))
	}
	later := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(later, plan, 0o600); err != nil {
		t.Fatal(err)
	}
	fresh := computeFile(t, later)

	s := Store{Dir: t.TempDir()}
	golden, err := os.ReadFile("testdata/record.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	const approved = "p2:e39a7038cb1d30f58f9b08d21df364b9d59b822fc7826f4282ddec2e67d65fc4"
	if err := os.WriteFile(s.path(approved), golden, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := s.Compare(approved, fresh.Changes)
	if err != nil {
		t.Fatal(err)
	}
	want := []fingerprint.Difference{
		{Address: "aws_db.main", Kind: fingerprint.Changed, Labels: "update", Paths: []string{"creds", "tags.env"}},
		{Address: "aws_instance.cbd", Kind: fingerprint.Changed, Labels: "replace"},
		{Address: `aws_s3_bucket.b["a<b&c>"]`, Kind: fingerprint.Gone, Labels: "create"},
		{Address: "aws_s3_bucket.c", Kind: fingerprint.Added, Labels: "create"},
		{Address: "output.endpoint", Kind: fingerprint.Changed, Labels: "create", Paths: []string{"(value)"}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Compare (-want +got):\n%s", d)
	}
	// Reading the record whole says the same.
	rec, err := s.Load(approved)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, fingerprint.Compare(rec.Changes, fresh.Changes)); d != "" {
		t.Errorf("Compare of the loaded record (-want +got):\n%s", d)
	}

	if _, err := s.Compare("p2:"+strings.Repeat("0", 64), fresh.Changes); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Compare without a record: %v, want fs.ErrNotExist", err)
	}
}

// TestBadRecord: a damaged record is refused with the file and the place
// in it, by Load and by Compare alike; never a panic, never a partial
// answer.
func TestBadRecord(t *testing.T) {
	golden, err := os.ReadFile("testdata/record.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	fresh := computeFile(t, "testdata/plan.json")
	const hash = "p2:e39a7038cb1d30f58f9b08d21df364b9d59b822fc7826f4282ddec2e67d65fc4"
	for _, c := range []struct {
		reason string
		record string
		want   string
	}{
		{"empty", "", "unexpected EOF"},
		{"not JSON", "nope", "invalid character 'o' in literal null (expecting 'u')"},
		{"cut before its end", string(golden[:len(golden)-2]), "changes: unexpected EOF"},
		{"not an object", "[]", "found [ where { belongs"},
		{"truncated", string(golden[:len(golden)/2]), "changes: [2]: unexpected EOF"},
		{"data after it", string(golden) + "{}", "data after the record"},
		{"changes not a list", `{"changes":{}}`, "changes: found { where a list belongs"},
		{"a change not an object", `{"changes":[1]}`, "changes: [0]: json: cannot unmarshal number into Go value of type fingerprint.Change"},
		{"a bad digest", strings.Replace(string(golden), `"digest":"3ee8b232`, `"digest":"XXe8b232`, 1), "changes: [2] (aws_instance.cbd): digest: character 1 is not a lower-case hex digit"},
		{"a bad report", `{"report":{"add":"x"}}`, "report: json: cannot unmarshal string into Go struct field Report.add of type int"},
	} {
		t.Run(c.reason, func(t *testing.T) {
			s := Store{Dir: t.TempDir()}
			path := s.path(hash)
			if err := os.WriteFile(path, []byte(c.record), 0o600); err != nil {
				t.Fatal(err)
			}
			want := "plan record " + path + ": " + c.want
			if _, err := s.Load(hash); err == nil || err.Error() != want {
				t.Errorf("Load = %v\nwant %s", err, want)
			}
			if c.reason == "a bad digest" {
				// Compare compares digests as they are written.
				return
			}
			if d, err := s.Compare(hash, fresh.Changes); err == nil || err.Error() != want || d != nil {
				t.Errorf("Compare = %v, %v\nwant %s", d, err, want)
			}
		})
	}
}
