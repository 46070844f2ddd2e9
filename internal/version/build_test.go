package version

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBuildFromACheckout builds cmd/captf as a developer does, with go
// build in a git checkout, and runs captf version: it names the commit,
// and says when the tree was modified. go test itself records no commit
// in the test binary, hence the build.
//
// The checkout is a copy of this source tree committed into a new
// repository: this tree may be a linked git worktree, where Go records
// no commit (golang/go#58218), or hold changes not committed yet.
func TestBuildFromACheckout(t *testing.T) {
	src := moduleRoot(t)
	dir := filepath.Join(t.TempDir(), "captf")
	copySources(t, src, dir)
	git(t, dir, "init", "-q")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", "a checkout")
	commit := strings.TrimSpace(git(t, dir, "rev-parse", "HEAD"))

	bin := filepath.Join(t.TempDir(), "captf") // outside the checkout, which it would modify
	captfVersion := func() string {
		t.Helper()
		// -buildvcs=true over any GOFLAGS=-buildvcs=false of the machine:
		// the default (auto) records the commit as well.
		build := exec.Command("go", "build", "-buildvcs=true", "-o", bin, "./cmd/captf")
		build.Dir = dir
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		out, err := exec.Command(bin, "version").Output()
		if err != nil {
			t.Fatalf("captf version: %v", err)
		}
		return string(out)
	}

	if diff := cmp.Diff("captf version devel+"+commit[:12]+"\n", captfVersion()); diff != "" {
		t.Errorf("a clean checkout (-want +got):\n%s", diff)
	}
	readme := filepath.Join(dir, "README.md")
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(readme, append(b, "\nAn uncommitted line.\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("captf version devel+"+commit[:12]+"-dirty\n", captfVersion()); diff != "" {
		t.Errorf("a modified checkout (-want +got):\n%s", diff)
	}
}

// moduleRoot is the directory of the go.mod this test is built from.
func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// copySources copies the files git would commit in src (tracked, and
// untracked but not ignored) to dst.
func copySources(t *testing.T, src, dst string) {
	t.Helper()
	list := git(t, src, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	for _, rel := range strings.Split(strings.TrimSuffix(list, "\x00"), "\x00") {
		from := filepath.Join(src, rel)
		info, err := os.Lstat(from)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted and not committed yet
		}
		if err != nil {
			t.Fatal(err)
		}
		to := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(from)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, to); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
}

// git runs git in dir with no configuration of the machine's user, and
// returns its standard output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=captf", "GIT_AUTHOR_EMAIL=captf@example.com",
		"GIT_COMMITTER_NAME=captf", "GIT_COMMITTER_EMAIL=captf@example.com")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}
