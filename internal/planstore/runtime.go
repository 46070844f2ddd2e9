package planstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/captf/captf/internal/planconfig"
)

// runtimeSuffix ends the file that records what a plan runs at apply
// outside it, beside the plan's record.
const runtimeSuffix = ".runtime.json"

func (s Store) runtimePath(hash string) string {
	return filepath.Join(s.Dir, strings.ReplaceAll(hash, ":", "-")+runtimeSuffix)
}

// runtimeRecord is the file's content: the blocks with their keyed
// digests, never a value.
type runtimeRecord struct {
	Blocks []planconfig.Block `json:"blocks"`
}

// SaveRuntime records the blocks the plan hash runs at apply, unless a
// plan of that hash recorded them before: the first record of a hash is
// the one its approval was given for, and a later plan of the same hash
// does not replace it. It returns the blocks recorded for hash, new or
// old.
func (s Store) SaveRuntime(hash string, blocks []planconfig.Block) ([]planconfig.Block, error) {
	if old, err := s.LoadRuntime(hash); err == nil {
		return old, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if blocks == nil {
		blocks = []planconfig.Block{}
	}
	b, err := json.Marshal(runtimeRecord{Blocks: blocks})
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("save runtime record: %w", err)
	}
	tmp, err := os.CreateTemp(s.Dir, ".runtime-*")
	if err != nil {
		return nil, fmt.Errorf("save runtime record: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("save runtime record: %w", err)
	}
	// A link never replaces a file: of two plans of one hash at once, the
	// first to link wins, and the other reads what it recorded.
	if err := os.Link(tmp.Name(), s.runtimePath(hash)); errors.Is(err, fs.ErrExist) {
		return s.LoadRuntime(hash)
	} else if err != nil {
		return nil, fmt.Errorf("save runtime record: %w", err)
	}
	return blocks, nil
}

// LoadRuntime returns the blocks recorded for a plan hash, or
// fs.ErrNotExist.
func (s Store) LoadRuntime(hash string) ([]planconfig.Block, error) {
	b, err := os.ReadFile(s.runtimePath(hash))
	if err != nil {
		return nil, err
	}
	var r runtimeRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("runtime record %s: %w", s.runtimePath(hash), err)
	}
	if r.Blocks == nil {
		return nil, fmt.Errorf("runtime record %s: no list of blocks", s.runtimePath(hash))
	}
	return r.Blocks, nil
}

// RuntimeFile is the file that records what the plan hash runs at apply.
func (s Store) RuntimeFile(hash string) string { return s.runtimePath(hash) }
