package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/captf/captf/internal/runner"
	"github.com/captf/captf/internal/tftest"
)

// TestMessagesNameTheCause: when captf cannot use a directory, a
// repository or a binary, it says why, not a likelier cause that is not
// the one.
func TestMessagesNameTheCause(t *testing.T) {
	setup(t)
	root := tftest.CopyRoot(t, "testdata/roots/canary")
	work := t.TempDir()
	t.Chdir(work)
	loop := filepath.Join(work, "loop")
	if err := os.Symlink(loop, loop); err != nil {
		t.Fatal(err)
	}
	t.Run("a symbolic link loop is no missing directory", func(t *testing.T) {
		for _, args := range [][]string{{"plan", loop}, {"lint", loop, "--role", "cluster"}, {"preview", "plan", "--root", loop}} {
			o := captf(t, args...).want(t, runner.ExitBadInput)
			if !strings.Contains(o.stderr, "too many levels of symbolic links") {
				t.Errorf("captf %s: stderr does not give the cause:\n%s", strings.Join(args, " "), o.stderr)
			}
		}
	})
	t.Run("git's refusal of a repository", func(t *testing.T) {
		// git refuses a repository for other reasons than there being
		// none: another owner ("dubious ownership"), or, as here, a
		// config it cannot read. Its own words are the cause.
		repo := t.TempDir()
		gitRun(t, repo, "init", "-q", "-b", "main")
		write(t, filepath.Join(repo, ".git", "config"), []byte("[core\n"), 0o644)
		o := captf(t, "preview", "plan", "--root", repo).want(t, runner.ExitBadInput)
		if !strings.Contains(o.stderr, "git refuses it: fatal: bad config line 1") {
			t.Errorf("stderr does not give git's reason:\n%s", o.stderr)
		}
	})
	t.Run("a binary that writes no plan", func(t *testing.T) {
		o := captf(t, "plan", root, "--binary", "/bin/true").want(t, runner.ExitFailure)
		if !strings.Contains(o.stderr, "/bin/true plan succeeded but wrote no plan file") {
			t.Errorf("stderr does not give the cause:\n%s", o.stderr)
		}
	})
}
