package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/captf/captf/internal/runner"
	"github.com/captf/captf/internal/tftest"
)

// TestDefaultKeyIsNoLink: when the default plan key, or .captf itself, is
// a symbolic link, captf refuses before anything runs instead of making the
// link's target (here /etc/passwd) the key.
func TestDefaultKeyIsNoLink(t *testing.T) {
	tmp := setup(t)
	bin := tftest.Terraform(t)
	elsewhere := filepath.Join(tmp, "elsewhere")
	if err := os.MkdirAll(elsewhere, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(elsewhere, runner.KeyFile)); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		link func(t *testing.T, stateDir string)
		want string
	}{
		{"the key", func(t *testing.T, stateDir string) {
			if err := os.MkdirAll(stateDir, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("/etc/passwd", filepath.Join(stateDir, runner.KeyFile)); err != nil {
				t.Fatal(err)
			}
		}, "plan-key is a symbolic link, not a regular file"},
		{"the state directory", func(t *testing.T, stateDir string) {
			if err := os.Symlink(elsewhere, stateDir); err != nil {
				t.Fatal(err)
			}
		}, ".captf is a symbolic link, not a directory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := tftest.CopyRoot(t, "testdata/roots/canary")
			c.link(t, filepath.Join(dir, runner.StateDir))
			for _, cmd := range []string{"plan", "apply"} {
				out := captf(t, cmd, dir, "--binary", bin.Path).want(t, runner.ExitBadInput)
				if !strings.Contains(out.stderr, c.want) {
					t.Errorf("%s: stderr %q does not say %q", cmd, out.stderr, c.want)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, ".terraform")); err == nil {
				t.Error("terraform ran although the key was refused")
			}
		})
	}
}

// TestKeyModeWarning: a key file that group or others can read is used,
// with a warning on stderr; one of mode 0600 gets none.
func TestKeyModeWarning(t *testing.T) {
	tmp := setup(t)
	plan := filepath.Join(tmp, "plan.json")
	write(t, plan, []byte(`{"format_version":"1.2","planned_values":{},"resource_changes":[]}`), 0o600)
	key := filepath.Join(tmp, "key")
	write(t, key, bytes.Repeat([]byte{4}, 32), 0o600)
	const warning = "captf: warning: plan key file "
	if out := captf(t, "fingerprint", "--plan-key-file", key, plan).want(t, 0); out.stderr != "" {
		t.Errorf("mode 0600: stderr %q", out.stderr)
	}
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	out := captf(t, "fingerprint", "--plan-key-file", key, plan).want(t, 0)
	if want := warning + key + " can be read by others than its owner (mode 0644); chmod 600 it\n"; out.stderr != want {
		t.Errorf("mode 0644: stderr %q, want %q", out.stderr, want)
	}
}
