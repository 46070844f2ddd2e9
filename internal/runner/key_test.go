package runner

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadKeyFileRefuses: a key file much larger than a key (a device
// that never ends, say) is refused without being read whole.
func TestReadKeyFileRefuses(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, bytes.Repeat([]byte{7}, MaxKeySize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	exact := filepath.Join(dir, "exact")
	if err := os.WriteFile(exact, bytes.Repeat([]byte{7}, MaxKeySize), 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"/dev/zero": "holds more than 4096 bytes",
		big:         "holds more than 4096 bytes",
		dir:         "is a directory",
	} {
		_, err := ReadKey(context.Background(), path)
		if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want bad input saying %q", path, err, want)
		}
	}
	if k, err := ReadKey(context.Background(), exact); err != nil || len(k) != MaxKeySize {
		t.Errorf("a key of exactly %d bytes: %d bytes, %v", MaxKeySize, len(k), err)
	}
}

// TestDefaultKeyLinks: the default key paths, and .captf itself, are
// never followed when they are links (a link would make /etc/passwd the
// key); a key named explicitly may be one (a mounted Secret is).
func TestDefaultKeyLinks(t *testing.T) {
	target := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(target, bytes.Repeat([]byte{9}, 32), 0o600); err != nil {
		t.Fatal(err)
	}
	link := func(t *testing.T, dir, rel string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, rel)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(dir, rel)); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name, link, key, want string
	}{
		{"plan key", ".captf/plan-key", "plan-key", ".captf/plan-key is a symbolic link, not a regular file"},
		{"preview key", ".captf/preview-key", "preview-key", ".captf/preview-key is a symbolic link, not a regular file"},
		{"state dir", ".captf", "plan-key", ".captf is a symbolic link, not a directory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if c.link == ".captf" {
				other := t.TempDir()
				if err := os.WriteFile(filepath.Join(other, c.key), bytes.Repeat([]byte{9}, 32), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(other, filepath.Join(dir, ".captf")); err != nil {
					t.Fatal(err)
				}
			} else {
				link(t, dir, c.link)
			}
			_, err := StateKey(context.Background(), dir, c.key, "key", nil)
			if !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want bad input saying %q", err, c.want)
			}
			if c.link == ".captf" {
				if err := EnsureStateDir(dir); !errors.Is(err, ErrBadInput) {
					t.Errorf("EnsureStateDir through a link: %v", err)
				}
			}
		})
	}
	if _, err := ReadKey(context.Background(), target); err != nil {
		t.Errorf("a named key file: %v", err)
	}
	named := filepath.Join(t.TempDir(), "key")
	if err := os.Symlink(target, named); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadKey(context.Background(), named); err != nil {
		t.Errorf("a named key file that is a link: %v", err)
	}
}

// TestKeyModeWarning: a key others can read is used, with a warning.
func TestKeyModeWarning(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	for mode, warned := range map[os.FileMode]bool{0o600: false, 0o400: false, 0o640: true, 0o604: true, 0o644: true} {
		if err := os.WriteFile(key, bytes.Repeat([]byte{1}, 32), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(key, mode); err != nil {
			t.Fatal(err)
		}
		var warn bytes.Buffer
		if _, err := ReadKeyFile(context.Background(), key, "plan key", &warn); err != nil {
			t.Fatalf("mode %04o: %v", mode, err)
		}
		if got := strings.Contains(warn.String(), "can be read by others than its owner"); got != warned {
			t.Errorf("mode %04o: warning %q, want one: %v", mode, warn.String(), warned)
		}
		os.Remove(key)
	}
}

// TestReadKeyInterrupted: a key read from a FIFO nobody writes returns
// when the context ends.
func TestReadKeyInterrupted(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := ReadKey(ctx, fifo)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want the context's", err)
	}
}
