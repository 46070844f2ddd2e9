package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/captf/captf/internal/modulelint"
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
		t.Run("project file "+name, func(t *testing.T) {
			o := captfWithin(t, 10*time.Second, "preview", "plan", "--file", target).want(t, runner.ExitBadInput)
			if !strings.Contains(o.stderr, "project file: "+target+" is a ") {
				t.Errorf("stderr does not say the project file is not a regular file:\n%s", o.stderr)
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

// TestLintInterrupted: Ctrl-C stops captf lint of a large module between
// files: exit 1, saying why, not a run to the end and exit 0.
func TestLintInterrupted(t *testing.T) {
	var file strings.Builder
	for i := 0; file.Len() < modulelint.MaxModuleBytes/2*3/4; i++ {
		fmt.Fprintf(&file, "variable \"v%d\" {\n  type = list(object({a = string, b = number}))\n}\n", i)
	}
	files := map[string]string{}
	for i := range 2 {
		files[fmt.Sprintf("f%d.tf", i)] = strings.ReplaceAll(file.String(), "\"v", fmt.Sprintf("\"f%d_v", i))
	}
	dir := module(t, files)
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(50*time.Millisecond, func() { cancel(errors.New("interrupt signal received")) })
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"lint", dir, "--role", "cluster"}, &stdout, &stderr, nil)
	if code != runner.ExitFailure || !strings.Contains(stderr.String(), "interrupt signal received") {
		t.Errorf("exit %d, want %d saying it was interrupted; stderr:\n%s", code, runner.ExitFailure, stderr.String())
	}
}

// TestLintBounds: a module too large is refused before it is parsed; a file
// of random bytes gives at most MaxFindings findings and one that says
// more were left out; an expression nested 100,000 deep is a finding, not
// a stack overflow.
func TestLintBounds(t *testing.T) {
	big := strings.Repeat("# a comment line that fills the file up to its limit\n", (modulelint.MaxFileBytes-1)/53)
	t.Run("module too large", func(t *testing.T) {
		dir := module(t, map[string]string{"a.tf": big, "b.tf": big, "c.tf": big})
		o := captfWithin(t, 20*time.Second, "lint", dir, "--role", "cluster").want(t, runner.ExitBadInput)
		if !strings.Contains(o.stderr, "its configuration files hold more than 4 MiB") {
			t.Errorf("stderr does not give the limit:\n%s", o.stderr)
		}
	})
	t.Run("file too large", func(t *testing.T) {
		dir := module(t, map[string]string{"a.tf": big + strings.Repeat("#\n", 100)})
		o := captfWithin(t, 20*time.Second, "lint", dir, "--role", "cluster").want(t, runner.ExitBadInput)
		if !strings.Contains(o.stderr, "a.tf holds more than 2 MiB") {
			t.Errorf("stderr does not give the limit:\n%s", o.stderr)
		}
	})
	t.Run("random bytes", func(t *testing.T) {
		noise := make([]byte, 1<<20)
		rand.NewChaCha8([32]byte{1}).Read(noise)
		dir := module(t, map[string]string{"noise.tf": string(noise)})
		o := captfWithin(t, 20*time.Second, "lint", dir, "--role", "cluster", "--json").want(t, runner.ExitFailure)
		var r lintReport
		if err := json.Unmarshal([]byte(o.stdout), &r); err != nil {
			t.Fatal(err)
		}
		if n := len(r.Findings); n != modulelint.MaxFindings+1 || r.Findings[n-1].Rule != modulelint.RuleTruncated {
			t.Errorf("%d findings, the last %+v; want %d and one of rule %s", n, r.Findings[n-1], modulelint.MaxFindings+1, modulelint.RuleTruncated)
		}
	})
	for name, src := range map[string]string{
		"hcl":  "output \"x\" {\n  value = " + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + "\n}\n",
		"json": `{"output": {"x": {"value": ` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + "}}}",
	} {
		t.Run("nested 100,000 deep, "+name, func(t *testing.T) {
			file := "deep.tf"
			if name == "json" {
				file += ".json"
			}
			dir := module(t, map[string]string{file: src})
			o := captfWithin(t, 20*time.Second, "lint", dir, "--role", "cluster").want(t, runner.ExitFailure)
			if !strings.Contains(o.stdout, file+":") || !strings.Contains(o.stdout, "nested more than 200 deep") {
				t.Errorf("no finding says %s is nested too deep:\n%s", file, o.stdout)
			}
		})
	}
}

// TestPreviewValuesLinkOutside: a tracked values file that is a link out
// of the repository is treated as a path outside it: not read into the
// digest, and a hole says so.
func TestPreviewValuesLinkOutside(t *testing.T) {
	root := fixtureRepo(t, "testdata/preview")
	outside := filepath.Join(t.TempDir(), "values.yaml")
	write(t, outside, []byte("replicas: 1\n"), 0o644)
	write(t, filepath.Join(root, "captf.yaml"), []byte("components:\n  a:\n    steps:\n      - kind: shell\n        name: s\n        inputs: {run: 'true', values: v.yaml}\n"), 0o644)
	link(t, outside, filepath.Join(root, "v.yaml"))
	gitRun(t, root, "add", "captf.yaml", "v.yaml")
	first := captf(t, "preview", "plan", "--json").want(t, 0)
	if !strings.Contains(first.stdout, "unbound: values v.yaml is a link out of the repository") {
		t.Errorf("no hole names the link out of the repository:\n%s", first.stdout)
	}
	write(t, outside, []byte("replicas: 2\n"), 0o644)
	second := captf(t, "preview", "plan", "--json").want(t, 0)
	digest := func(o outcome) string {
		var doc struct{ Digest string }
		if err := json.Unmarshal([]byte(o.stdout), &doc); err != nil {
			t.Fatalf("%v\n%s", err, o.stdout)
		}
		return doc.Digest
	}
	if digest(first) != digest(second) {
		t.Error("the digest moved with a file outside the repository: the file was read")
	}
}
