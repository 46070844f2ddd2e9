package runner

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/captf/captf/pkg/fingerprint"
)

// StateDir is the directory captf keeps in a root module (or, for
// previews, a repository): its keys, value-free plan records and preview
// outputs. It holds a .gitignore that ignores all of it.
const StateDir = ".captf"

// KeyFile is the name of the per-root plan key inside StateDir.
const KeyFile = "plan-key"

// ReadKey reads a plan key file and checks its length before anything else
// runs. The key is never printed.
func ReadKey(path string) ([]byte, error) {
	return ReadKeyFile(path, "plan key")
}

// ReadKeyFile reads a key file of captf (what names it in errors: "plan
// key", "preview key") and refuses one shorter than
// fingerprint.MinKeySize. The key is never printed.
func ReadKeyFile(path, what string) ([]byte, error) {
	key, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s file %s does not exist", ErrBadInput, what, path)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: read %s: %w", ErrBadInput, what, err)
	}
	if len(key) < fingerprint.MinKeySize {
		return nil, fmt.Errorf("%w: %s file %s holds %d bytes; at least %d are needed", ErrBadInput, what, path, len(key), fingerprint.MinKeySize)
	}
	return key, nil
}

// RootKey returns the plan key of a root module, DIR/.captf/plan-key,
// creating it on first use: 32 random bytes, mode 0600. An existing key
// that is too short is refused, never replaced, since hashes approved under
// it would silently stop matching.
func RootKey(dir string) ([]byte, error) {
	return StateKey(dir, KeyFile, "plan key")
}

// StateKey returns the key DIR/.captf/NAME (what names it in errors),
// creating it on first use as RootKey creates the plan key: 32 random
// bytes, mode 0600, in a StateDir git ignores. An existing key that is too
// short is refused, never replaced.
func StateKey(dir, name, what string) ([]byte, error) {
	path := filepath.Join(dir, StateDir, name)
	if _, err := os.Stat(path); err == nil {
		return ReadKeyFile(path, what)
	}
	if err := EnsureStateDir(dir); err != nil {
		return nil, err
	}
	key := make([]byte, fingerprint.MinKeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("generate %s: %w", what, err)
	}
	// Write a temporary file and link it into place, so a concurrent run
	// sees either no key or a whole one, and the first writer wins.
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+name+"-*")
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", what, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(key); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("write %s: %w", what, err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("write %s: %w", what, err)
	}
	if err := os.Link(tmp.Name(), path); errors.Is(err, fs.ErrExist) {
		return ReadKeyFile(path, what)
	} else if err != nil {
		return nil, fmt.Errorf("create %s: %w", what, err)
	}
	return key, nil
}

// EnsureStateDir creates DIR/.captf (mode 0700) with a .gitignore that keeps
// everything in it out of version control.
func EnsureStateDir(dir string) error {
	sd := filepath.Join(dir, StateDir)
	if err := os.MkdirAll(sd, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", sd, err)
	}
	ignore := filepath.Join(sd, ".gitignore")
	if _, err := os.Stat(ignore); err == nil {
		return nil
	}
	if err := os.WriteFile(ignore, []byte("# captf's keys and plan records: never commit them\n*\n"), 0o600); err != nil {
		return fmt.Errorf("create %s: %w", ignore, err)
	}
	return nil
}
