package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/captf/captf/internal/runner"
)

// TestRunDirSweep: a command's private directory survives another
// command's sweep while its lock is held, and a directory nobody holds (a
// killed command's) is removed by the next command. TestBinary kills real
// commands.
func TestRunDirSweep(t *testing.T) {
	root := t.TempDir()
	live, err := openRunDir(root)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	left := filepath.Join(root, runner.StateDir, TmpDir, "run-left")
	if err := os.MkdirAll(filepath.Join(left, "captf-plan-1"), 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(left, "captf-plan-1", "plan.tfplan"), []byte("plan"), 0o600)

	next, err := openRunDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(live.path); err != nil {
		t.Errorf("the sweep removed a live command's directory: %v", err)
	}
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Errorf("the sweep left a dead command's directory: %v", err)
	}
	if info, err := os.Stat(next.path); err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("the new directory: %v, %v", info, err)
	}
	next.Close()
	if _, err := os.Stat(next.path); !os.IsNotExist(err) {
		t.Errorf("Close left %s: %v", next.path, err)
	}
}
