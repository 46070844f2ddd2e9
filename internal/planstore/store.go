// Package planstore keeps value-free records of the plans captf made in a
// root module, so that a refused apply can say what moved relative to the
// plan that was approved. A record holds the report and, per change, the
// address, actions and keyed digests by attribute path; never a value.
package planstore

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	CreatedAt time.Time
	Report    fingerprint.Report
	Changes   *fingerprint.Detail
}

// The file of a record is a JSON object: {"createdAt": …, "report": …,
// "changes": [fingerprint.Change, …]}. It is written and read one change at
// a time, so a plan of 100,000 changes is never held as JSON or as Change
// values.
type recordHead struct {
	CreatedAt time.Time          `json:"createdAt"`
	Report    fingerprint.Report `json:"report"`
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
	tmp, err := os.CreateTemp(s.Dir, ".record-*")
	if err != nil {
		return fmt.Errorf("save plan record: %w", err)
	}
	defer os.Remove(tmp.Name())
	w := bufio.NewWriterSize(tmp, 64<<10)
	err = writeRecord(w, &Record{CreatedAt: now.UTC(), Report: r.Report, Changes: r.Changes})
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
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

// writeRecord writes r as the JSON object json.Marshal would make of it,
// one change at a time.
func writeRecord(w *bufio.Writer, r *Record) error {
	head, err := json.Marshal(recordHead{CreatedAt: r.CreatedAt, Report: r.Report})
	if err != nil {
		return err
	}
	if _, err := w.Write(head[:len(head)-1]); err != nil {
		return err
	}
	if r.Changes == nil {
		_, err = w.WriteString(`,"changes":null}`)
		return err
	}
	if _, err := w.WriteString(`,"changes":[`); err != nil {
		return err
	}
	for i := range r.Changes.Len() {
		b, err := json.Marshal(r.Changes.Change(i))
		if err != nil {
			return err
		}
		if i > 0 {
			// A bufio.Writer keeps an error for the next write.
			w.WriteByte(',')
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	_, err = w.WriteString("]}")
	return err
}

// Load returns the record of a plan hash, or fs.ErrNotExist.
func (s Store) Load(hash string) (*Record, error) {
	f, err := os.Open(s.path(hash))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var changes fingerprint.DetailBuilder
	head, listed, err := readRecord(bufio.NewReaderSize(f, 64<<10), changes.Add)
	if err != nil {
		return nil, fmt.Errorf("plan record %s: %w", f.Name(), err)
	}
	r := &Record{CreatedAt: head.CreatedAt, Report: head.Report}
	if listed {
		r.Changes = changes.Detail()
	}
	return r, nil
}

// errStopped ends the reading of a record early.
var errStopped = errors.New("stopped")

// Compare says what differs between the plan recorded under the hash
// approved and a fresh plan. It reads the record one change at a time and
// never holds the approved plan's changes. Without such a record it
// returns fs.ErrNotExist.
func (s Store) Compare(approved string, fresh *fingerprint.Detail) ([]fingerprint.Difference, error) {
	f, err := os.Open(s.path(approved))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var readErr error
	changes := func(yield func(fingerprint.Change) bool) {
		_, _, readErr = readRecord(bufio.NewReaderSize(f, 64<<10), func(c fingerprint.Change) error {
			if !yield(c) {
				return errStopped
			}
			return nil
		})
	}
	diffs, err := fingerprint.CompareChanges(changes, fresh)
	if err == nil {
		err = readErr
	}
	if err != nil {
		return nil, fmt.Errorf("plan record %s: %w", f.Name(), err)
	}
	return diffs, nil
}

// readRecord reads a record and hands its changes to each, one at a time.
// listed says whether the record has a list of changes (not null).
func readRecord(rd io.Reader, each func(fingerprint.Change) error) (head recordHead, listed bool, err error) {
	dec := json.NewDecoder(rd)
	if err := expect(dec, json.Delim('{')); err != nil {
		return head, false, err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return head, false, err
		}
		switch tok {
		case "createdAt":
			err = dec.Decode(&head.CreatedAt)
		case "report":
			err = dec.Decode(&head.Report)
		case "changes":
			listed, err = readChanges(dec, each)
		default:
			var skip json.RawMessage
			err = dec.Decode(&skip)
		}
		if err != nil {
			return head, false, fmt.Errorf("%s: %w", tok, err)
		}
	}
	if err := expect(dec, json.Delim('}')); err != nil {
		return head, false, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return head, false, errors.New("data after the record")
	}
	return head, listed, nil
}

// readChanges reads the list of changes, or null (listed is then false).
func readChanges(dec *json.Decoder, each func(fingerprint.Change) error) (listed bool, err error) {
	tok, err := dec.Token()
	if err != nil || tok == nil {
		return false, err
	}
	if tok != json.Delim('[') {
		return false, fmt.Errorf("found %v where a list belongs", tok)
	}
	for i := 0; dec.More(); i++ {
		var c fingerprint.Change
		if err := dec.Decode(&c); err != nil {
			return true, fmt.Errorf("[%d]: %w", i, err)
		}
		if err := each(c); err != nil {
			return true, fmt.Errorf("[%d] (%s): %w", i, c.Address, err)
		}
	}
	return true, expect(dec, json.Delim(']'))
}

// expect reads the next token and refuses anything but want.
func expect(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	if err != nil {
		return err
	}
	if tok != want {
		return fmt.Errorf("found %v where %v belongs", tok, want)
	}
	return nil
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
		if !strings.HasSuffix(e.Name(), ".json") || strings.HasSuffix(e.Name(), runtimeSuffix) {
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
		os.Remove(filepath.Join(s.Dir, strings.TrimSuffix(r.name, ".json")+runtimeSuffix))
	}
	return nil
}
