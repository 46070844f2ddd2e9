// Package planstore keeps value-free records of the plans captf made in a
// root module, so that a refused apply can say what moved relative to the
// plan that was approved. A record holds the report and, per change, the
// address, actions and keyed digests by attribute path; never a value.
package planstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/captf/captf/pkg/fingerprint"
)

// Keep is how many records a root keeps; older ones are removed.
const Keep = 20

// Record is one plan as captf saw it.
type Record struct {
	CreatedAt time.Time            `json:"createdAt"`
	Report    fingerprint.Report   `json:"report"`
	Changes   []fingerprint.Change `json:"changes"`
}

// Store is the plans directory of one root module.
type Store struct {
	Dir string
}

func (s Store) path(hash string) string {
	return filepath.Join(s.Dir, strings.ReplaceAll(hash, ":", "-")+".json")
}

// Save writes the record of a plan (mode 0600) and prunes old records.
func (s Store) Save(r *fingerprint.Result, now time.Time) error {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("save plan record: %w", err)
	}
	b, err := json.Marshal(Record{CreatedAt: now.UTC(), Report: r.Report, Changes: r.Changes})
	if err != nil {
		return fmt.Errorf("save plan record: %w", err)
	}
	tmp, err := os.CreateTemp(s.Dir, ".record-*")
	if err != nil {
		return fmt.Errorf("save plan record: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("save plan record: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save plan record: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.path(r.Report.PlanHash)); err != nil {
		return fmt.Errorf("save plan record: %w", err)
	}
	return s.prune()
}

// Load returns the record of a plan hash, or fs.ErrNotExist.
func (s Store) Load(hash string) (*Record, error) {
	b, err := os.ReadFile(s.path(hash))
	if err != nil {
		return nil, err
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("plan record %s: %w", hash, err)
	}
	return &r, nil
}

func (s Store) prune() error {
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		return fmt.Errorf("prune plan records: %w", err)
	}
	type rec struct {
		name string
		mod  time.Time
	}
	var recs []rec
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("prune plan records: %w", err)
		}
		recs = append(recs, rec{e.Name(), info.ModTime()})
	}
	slices.SortFunc(recs, func(a, b rec) int { return b.mod.Compare(a.mod) })
	for _, r := range recs[min(Keep, len(recs)):] {
		os.Remove(filepath.Join(s.Dir, r.name))
	}
	return nil
}
