package planstore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/captf/captf/pkg/fingerprint"
)

func TestSaveLoadPrune(t *testing.T) {
	s := Store{Dir: filepath.Join(t.TempDir(), "plans")}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	results := make([]*fingerprint.Result, Keep+3)
	for i := range results {
		var changes fingerprint.DetailBuilder
		if err := changes.Add(fingerprint.Change{Address: "a.b", Actions: "create", Labels: "create", Digest: fmt.Sprintf("%064x", i), Paths: map[string]string{"x": strings.Repeat("f", 64)}}); err != nil {
			t.Fatal(err)
		}
		results[i] = &fingerprint.Result{
			Report:  fingerprint.Report{Add: i, Resources: []string{"a.b (create)"}, PlanHash: fmt.Sprintf("p2:%064x", i)},
			Changes: changes.Detail(),
		}
		if err := s.Save(results[i], now); err != nil {
			t.Fatal(err)
		}
		// Distinct modification times, oldest first.
		if err := os.Chtimes(s.path(results[i].Report.PlanHash), now, now.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.prune(); err != nil {
		t.Fatal(err)
	}
	last := results[len(results)-1]
	got, err := s.Load(last.Report.PlanHash)
	if err != nil {
		t.Fatal(err)
	}
	if !got.CreatedAt.Equal(now) {
		t.Errorf("createdAt %v, want %v", got.CreatedAt, now)
	}
	if d := cmp.Diff(last.Report, got.Report); d != "" {
		t.Errorf("report (-want +got):\n%s", d)
	}
	if d := cmp.Diff(changesOf(last.Changes), changesOf(got.Changes)); d != "" {
		t.Errorf("changes (-want +got):\n%s", d)
	}
	if _, err := s.Load(results[0].Report.PlanHash); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the oldest record survived pruning: %v", err)
	}
	entries, _ := os.ReadDir(s.Dir)
	if len(entries) != Keep {
		t.Errorf("%d records kept, want %d", len(entries), Keep)
	}
	for _, e := range entries {
		if info, _ := e.Info(); info.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v", e.Name(), info.Mode().Perm())
		}
	}
}
