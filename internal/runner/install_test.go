package runner

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestInstall: the copy has the source's bytes and mode 0755 whatever the
// umask, also over an existing file; a missing source or folder fails.
func TestInstall(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	body := bytes.Repeat([]byte("\x7fELF"), 1000)
	if err := os.WriteFile(src, body, 0o600); err != nil {
		t.Fatal(err)
	}
	existing := filepath.Join(dir, "existing")
	if err := os.WriteFile(existing, []byte("a longer file that was here before the copy, and more"+string(body)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, dest := range []string{filepath.Join(dir, "new"), existing} {
		if err := Install(src, dest); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(dest)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, body) {
			t.Errorf("%s: %d bytes, want the source's %d", dest, len(got), len(body))
		}
		info, err := os.Stat(dest)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(os.FileMode(0o755), info.Mode().Perm()); diff != "" {
			t.Errorf("%s mode (-want +got):\n%s", dest, diff)
		}
	}
	if err := Install(filepath.Join(dir, "missing"), filepath.Join(dir, "x")); err == nil {
		t.Error("a missing source was installed")
	}
	if err := Install(src, filepath.Join(dir, "no-such-folder", "x")); err == nil {
		t.Error("installed into a missing folder")
	}
}
