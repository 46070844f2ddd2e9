package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/captf/captf/internal/runner"
	"github.com/captf/captf/internal/version"
)

type result struct {
	Code           int
	Stdout, Stderr string
}

func runArgs(args ...string) result {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

// TestVersion: --version prints the stamped version and runs no Job (no
// report is written).
func TestVersion(t *testing.T) {
	defer func(s string) { version.Stamp = s }(version.Stamp)
	version.Stamp = "v0.7.1"
	msg := filepath.Join(t.TempDir(), "message")
	got := runArgs("--version", "--termination-message-path="+msg)
	if diff := cmp.Diff(result{0, "captf-runner version v0.7.1\n", ""}, got); diff != "" {
		t.Errorf("--version (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(msg); !os.IsNotExist(err) {
		t.Errorf("--version wrote a report: %v", err)
	}
}

// TestInstallCopiesItself: install DEST copies the running binary (here
// the test binary) to DEST, mode 0755; a missing or extra argument is bad
// usage.
func TestInstallCopiesItself(t *testing.T) {
	dest := filepath.Join(t.TempDir(), "captf-runner")
	if got := runArgs("install", dest); got.Code != runner.ExitOK {
		t.Fatalf("install: %+v", got)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(dest)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the copy differs from the running binary")
	}
	if info, err := os.Stat(dest); err != nil || info.Mode().Perm() != 0o755 {
		t.Errorf("the copy's mode: %v %v, want 0755", info.Mode(), err)
	}
	for _, args := range [][]string{{"install"}, {"install", dest, "extra"}} {
		if got := runArgs(args...); got.Code != runner.ExitBadInput {
			t.Errorf("%q: exit %d, want %d", args, got.Code, runner.ExitBadInput)
		}
	}
}
