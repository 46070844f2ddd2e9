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

	"github.com/captf/captf/internal/planconfig"
	"github.com/captf/captf/pkg/fingerprint"
)

// TestRuntimeRecord: what a plan runs at apply is recorded by the first
// plan of its hash and never replaced; an empty list is a record too.
func TestRuntimeRecord(t *testing.T) {
	s := Store{Dir: filepath.Join(t.TempDir(), "plans")}
	h := "p2:" + strings.Repeat("a", 64)
	if _, err := s.LoadRuntime(h); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("load before any save: %v", err)
	}
	first := []planconfig.Block{{Address: "terraform_data.a", Block: `provisioner "local-exec" #0`, Digest: strings.Repeat("1", 64)}}
	later := []planconfig.Block{{Address: "terraform_data.a", Block: `provisioner "local-exec" #0`, Digest: strings.Repeat("2", 64)}}
	for i, blocks := range [][]planconfig.Block{first, later} {
		got, err := s.SaveRuntime(h, blocks)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(first, got); d != "" {
			t.Errorf("save %d returned (-first +got):\n%s", i, d)
		}
	}
	if got, err := s.LoadRuntime(h); err != nil || !cmp.Equal(first, got) {
		t.Errorf("load: %v, %+v", err, got)
	}
	if info, err := os.Stat(s.RuntimeFile(h)); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("runtime record: %v, mode %v", err, info.Mode().Perm())
	}
	empty := "p2:" + strings.Repeat("b", 64)
	if _, err := s.SaveRuntime(empty, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := s.LoadRuntime(empty); err != nil || got == nil || len(got) != 0 {
		t.Errorf("load of an empty record: %v, %#v", err, got)
	}
}

// TestRuntimeRecordPruned: a runtime record goes with its plan's record
// and does not count as one.
func TestRuntimeRecordPruned(t *testing.T) {
	s := Store{Dir: filepath.Join(t.TempDir(), "plans")}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	var hashes []string
	for i := range Keep + 1 {
		var changes fingerprint.DetailBuilder
		if err := changes.Add(fingerprint.Change{Address: "a.b", Actions: "create", Labels: "create", Digest: fmt.Sprintf("%064x", i)}); err != nil {
			t.Fatal(err)
		}
		r := &fingerprint.Result{Report: fingerprint.Report{PlanHash: fmt.Sprintf("p2:%064x", i)}, Changes: changes.Detail()}
		hashes = append(hashes, r.Report.PlanHash)
		if _, err := s.SaveRuntime(r.Report.PlanHash, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.Save(r, now); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(s.path(r.Report.PlanHash), now, now.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.prune(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LoadRuntime(hashes[0]); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the oldest plan's runtime record survived pruning: %v", err)
	}
	for _, h := range hashes[1:] {
		if _, err := s.Load(h); err != nil {
			t.Errorf("record %s: %v", h, err)
		}
		if _, err := s.LoadRuntime(h); err != nil {
			t.Errorf("runtime record %s: %v", h, err)
		}
	}
}
