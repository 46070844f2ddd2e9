package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/captf/captf/internal/preview/capabilities"
	"github.com/captf/captf/internal/runner"
	"github.com/captf/captf/internal/tftest"
)

// These tests give captf's commands input that never ends or never comes:
// a link to /dev/zero, a named pipe nobody writes. captf refuses what is
// not a regular file before reading it, with a documented exit code.

// captfWithin runs the command line in-process and fails the test when it
// has not returned within limit: a read that hangs or grows without
// bound.
func captfWithin(t *testing.T, limit time.Duration, args ...string) outcome {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, &stdout, &stderr, capabilities.All(&stderr)) }()
	select {
	case code := <-done:
		return outcome{code, stdout.String(), stderr.String()}
	case <-time.After(limit):
		cancel()
		select {
		case <-done:
			t.Fatalf("captf %s still ran after %v; it returned only once cancelled", strings.Join(args, " "), limit)
		case <-time.After(5 * time.Second):
			t.Fatalf("captf %s still ran after %v and did not stop when cancelled", strings.Join(args, " "), limit)
		}
	}
	return outcome{}
}

// specialFiles are a named pipe nobody writes and a link to /dev/zero.
func specialFiles(t *testing.T) map[string]string {
	t.Helper()
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	return map[string]string{"fifo": fifo, "/dev/zero": "/dev/zero"}
}

// link makes path a symbolic link to target.
func link(t *testing.T, target, path string) {
	t.Helper()
	os.Remove(path)
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
}

func TestLintRefusesSpecialFiles(t *testing.T) {
	for name, target := range specialFiles(t) {
		t.Run(name, func(t *testing.T) {
			dir := module(t, map[string]string{"main.tf": lintClean})
			link(t, target, filepath.Join(dir, "x.tf"))
			o := captfWithin(t, 10*time.Second, "lint", dir, "--role", "cluster").want(t, runner.ExitBadInput)
			if !strings.Contains(o.stderr, "x.tf is a ") || !strings.Contains(o.stderr, "not a regular file") {
				t.Errorf("stderr does not say x.tf is not a regular file:\n%s", o.stderr)
			}
		})
	}
}

func TestPreviewRefusesSpecialFiles(t *testing.T) {
	fixtureRepo(t, "testdata/preview")
	for name, target := range specialFiles(t) {
		t.Run("seed "+name, func(t *testing.T) {
			o := captfWithin(t, 10*time.Second, "preview", "plan", "--seed-outputs", target).want(t, runner.ExitBadInput)
			if !strings.Contains(o.stderr, "seed outputs: "+target+" is a ") {
				t.Errorf("stderr does not say the seed file is not a regular file:\n%s", o.stderr)
			}
		})
		t.Run("out "+name, func(t *testing.T) {
			out := t.TempDir()
			link(t, target, filepath.Join(out, DocumentFile))
			o := captfWithin(t, 10*time.Second, "preview", "apply", "--out", out, "--expect-digest", "cs1:"+strings.Repeat("0", 64)).want(t, runner.ExitBadInput)
			if !strings.Contains(o.stderr, DocumentFile+" is a ") {
				t.Errorf("stderr does not say %s is not a regular file:\n%s", DocumentFile, o.stderr)
			}
		})
	}
}

// TestPreviewShellValuesSpecialFile: a step's values file that is a named
// pipe or a tracked link to /dev/zero is not read; the digest cannot name
// it, and the member says so in a hole.
func TestPreviewShellValuesSpecialFile(t *testing.T) {
	root := fixtureRepo(t, "testdata/preview")
	for name, target := range specialFiles(t) {
		t.Run(name, func(t *testing.T) {
			write(t, filepath.Join(root, "captf.yaml"), []byte("components:\n  a:\n    steps:\n      - kind: shell\n        name: s\n        inputs: {run: 'true', values: v.yaml}\n"), 0o644)
			link(t, target, filepath.Join(root, "v.yaml"))
			gitRun(t, root, "add", "captf.yaml", "v.yaml")
			o := captfWithin(t, 10*time.Second, "preview", "plan", "--json").want(t, 0)
			if !strings.Contains(o.stdout, "unbound: values v.yaml is a ") {
				t.Errorf("no hole names v.yaml:\n%s\nstderr:\n%s", o.stdout, o.stderr)
			}
		})
	}
}

// TestCLIConfigSpecialFile: a TF_CLI_CONFIG_FILE that is not a regular
// file is refused before terraform runs.
func TestCLIConfigSpecialFile(t *testing.T) {
	setup(t)
	tf := tftest.Terraform(t)
	for name, target := range specialFiles(t) {
		t.Run(name, func(t *testing.T) {
			dir := tftest.CopyRoot(t, "testdata/roots/canary")
			t.Setenv("TF_CLI_CONFIG_FILE", target)
			o := captfWithin(t, 10*time.Second, "plan", dir, "--binary", tf.Path).want(t, runner.ExitBadInput)
			if !strings.Contains(o.stderr, "TF_CLI_CONFIG_FILE: "+target+" is a ") {
				t.Errorf("stderr does not say TF_CLI_CONFIG_FILE is not a regular file:\n%s", o.stderr)
			}
		})
	}
}
