package runner

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/captf/captf/pkg/fingerprint"
)

// StateDir is the directory captf keeps in a root module (or, for
// previews, a repository): its keys, value-free plan records, preview
// outputs and the private directories of running commands. It holds a
// .gitignore that ignores all of it.
const StateDir = ".captf"

// KeyFile is the name of the per-root plan key inside StateDir.
const KeyFile = "plan-key"

// MaxKeySize is the largest key file captf reads, in bytes. A key is 32
// random bytes; a file of kilobytes is the wrong file (a device such as
// /dev/zero, a log), and is refused before it is read whole.
const MaxKeySize = 4096

// ReadKey reads a plan key file, as ReadKeyFile does, with no warning about
// its mode.
func ReadKey(ctx context.Context, path string) ([]byte, error) {
	return ReadKeyFile(ctx, path, "plan key", nil)
}

// ReadKeyFile reads a key file of captf (what names it in errors: "plan
// key", "preview key") and refuses one shorter than
// fingerprint.MinKeySize or longer than MaxKeySize. It follows a symbolic
// link: the path was named on purpose (a mounted Secret is one). When warn
// is not nil it gets a warning about a regular file that group or others
// may read. The read ends when ctx does, so that a FIFO or a terminal that
// never delivers a key does not hold off Ctrl-C. The key is never printed.
func ReadKeyFile(ctx context.Context, path, what string, warn io.Writer) ([]byte, error) {
	type result struct {
		key     []byte
		warning string
		err     error
	}
	done := make(chan result, 1)
	// Opening a FIFO or reading a terminal blocks in the kernel, where no
	// context reaches. The read runs aside; when ctx ends first it is
	// abandoned, blocked, until the process exits.
	go func() {
		key, warning, err := readKey(path, what)
		done <- result{key, warning, err}
	}()
	select {
	case r := <-done:
		if r.warning != "" && warn != nil {
			fmt.Fprintf(warn, "captf: warning: %s\n", r.warning)
		}
		return r.key, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("read %s %s: %w", what, path, context.Cause(ctx))
	}
}

func readKey(path, what string) (key []byte, warning string, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", fmt.Errorf("%w: %s file %s does not exist", ErrBadInput, what, path)
	}
	if err != nil {
		return nil, "", fmt.Errorf("%w: read %s: %w", ErrBadInput, what, err)
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o044 != 0 {
		warning = fmt.Sprintf("%s file %s can be read by others than its owner (mode %04o); chmod 600 it", what, path, info.Mode().Perm())
	}
	key, err = io.ReadAll(io.LimitReader(f, MaxKeySize+1))
	if err != nil {
		return nil, "", fmt.Errorf("%w: read %s: %w", ErrBadInput, what, err)
	}
	if len(key) > MaxKeySize {
		return nil, "", fmt.Errorf("%w: %s file %s holds more than %d bytes; a key is %d random bytes (is it the right file?)", ErrBadInput, what, path, MaxKeySize, fingerprint.MinKeySize)
	}
	if len(key) < fingerprint.MinKeySize {
		return nil, "", fmt.Errorf("%w: %s file %s holds %d bytes; at least %d are needed", ErrBadInput, what, path, len(key), fingerprint.MinKeySize)
	}
	return key, warning, nil
}

// RootKey returns the plan key of a root module, DIR/.captf/plan-key,
// creating it on first use: 32 random bytes, mode 0600. An existing key
// that is too short is refused, never replaced, since hashes approved under
// it would silently stop matching.
func RootKey(ctx context.Context, dir string, warn io.Writer) ([]byte, error) {
	return StateKey(ctx, dir, KeyFile, "plan key", warn)
}

// StateKey returns the key DIR/.captf/NAME (what names it in errors),
// creating it on first use as RootKey creates the plan key: 32 random
// bytes, mode 0600, in a StateDir git ignores. An existing key that is too
// short is refused, never replaced. Neither the key nor StateDir may be a
// symbolic link: a default path nobody named must not make another file
// (/etc/passwd, say) the key.
func StateKey(ctx context.Context, dir, name, what string, warn io.Writer) ([]byte, error) {
	if err := checkStateDir(dir); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, StateDir, name)
	if info, err := os.Lstat(path); err == nil {
		if !info.Mode().IsRegular() {
			return nil, fmt.Errorf("%w: %s file %s is %s, not a regular file; captf reads its default key only from a file of its own (put the key itself there, or name the key file with a flag)", ErrBadInput, what, path, fileKind(info))
		}
		return ReadKeyFile(ctx, path, what, warn)
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
		return StateKey(ctx, dir, name, what, warn)
	} else if err != nil {
		return nil, fmt.Errorf("create %s: %w", what, err)
	}
	return key, nil
}

// fileKind names what a file that is not a regular one is.
func fileKind(info fs.FileInfo) string {
	switch m := info.Mode(); {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	}
	return "a special file"
}

// checkStateDir refuses a DIR/.captf that exists and is not a directory of
// its own: captf writes keys and private files there and never follows a
// link out of the root.
func checkStateDir(dir string) error {
	sd := filepath.Join(dir, StateDir)
	info, err := os.Lstat(sd)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrBadInput, sd, err)
	}
	if !info.IsDir() {
		return fmt.Errorf("%w: %s is %s, not a directory; captf keeps its keys and private files there and does not follow a link out of the root (remove it)", ErrBadInput, sd, fileKind(info))
	}
	return nil
}

// EnsureStateDir creates DIR/.captf (mode 0700) with a .gitignore that keeps
// everything in it out of version control. A DIR/.captf that is a symbolic
// link (or no directory) is refused.
func EnsureStateDir(dir string) error {
	if err := checkStateDir(dir); err != nil {
		return err
	}
	sd := filepath.Join(dir, StateDir)
	if err := os.MkdirAll(sd, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", sd, err)
	}
	ignore := filepath.Join(sd, ".gitignore")
	if _, err := os.Lstat(ignore); err == nil {
		return nil
	}
	if err := os.WriteFile(ignore, []byte("# captf's keys and plan records: never commit them\n*\n"), 0o600); err != nil {
		return fmt.Errorf("create %s: %w", ignore, err)
	}
	return nil
}
