package cli

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/captf/captf/internal/runner"
	"github.com/captf/captf/internal/tftest"
	"github.com/captf/captf/internal/version"
)

// These tests run the captf binary as a separate process, for what only a
// process shows: signals, a kill, a printed command pasted into a shell.

// buildCaptf builds cmd/captf, and beside it cmd/captf-preview, into a
// temporary directory and returns captf's path.
func buildCaptf(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, cmd := range []string{"captf", PreviewBinary} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, cmd), "../../cmd/"+cmd).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", cmd, err, out)
		}
	}
	return filepath.Join(dir, "captf")
}

// wrapTerraform writes a shell script that runs before, then execs the
// real terraform (at $REAL) with its arguments: a way to hold terraform at
// a step or to play a concurrent run, with the real binary doing the work.
func wrapTerraform(t *testing.T, real, before string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "terraform")
	script := "#!/bin/sh\nREAL='" + real + "'\n" + before + "\nexec \"$REAL\" \"$@\"\n"
	write(t, path, []byte(script), 0o755)
	return path
}

func TestBinary(t *testing.T) {
	setup(t)
	captfBin := buildCaptf(t)
	tf := tftest.Terraform(t)

	t.Run("signal during key read", func(t *testing.T) { signalDuringKeyRead(t, captfBin, tf.Path) })
	t.Run("killed runs leave nothing", func(t *testing.T) { killedRuns(t, captfBin, tf.Path) })
	t.Run("pasted apply command", func(t *testing.T) { pastedApplyCommand(t, captfBin, tf.Path) })
	t.Run("stdout closed early", func(t *testing.T) { stdoutClosedEarly(t, captfBin, tf.Path) })
	t.Run("preview hand-off", func(t *testing.T) { previewHandOff(t, captfBin) })
	t.Run("preview link loop", func(t *testing.T) { previewLinkLoop(t, captfBin) })
	t.Run("permission denied", func(t *testing.T) { permissionDenied(t, captfBin) })
}

// permissionDenied: a module folder captf may not reach (its parent
// cannot be searched) is reported as that, not as one that is not a
// directory. As root (CI), captf runs as nobody (65534) under a
// root-owned parent of mode 0700; as another user, under a parent of its
// own of mode 0000.
func permissionDenied(t *testing.T, captfBin string) {
	// A folder every user may enter, for the binary and the working
	// directory: under /tmp itself, as t.TempDir's and the tests' TMPDIR
	// are 0700.
	open, err := os.MkdirTemp("/tmp", "captf-perm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(open) })
	raw, err := os.ReadFile(captfBin)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(open, "captf")
	write(t, bin, raw, 0o755)
	locked := filepath.Join(open, "locked")
	module := filepath.Join(locked, "q")
	if err := os.MkdirAll(module, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(module, "main.tf"), []byte("output \"x\" { value = 1 }\n"), 0o644)
	if err := os.Chmod(open, 0o755); err != nil {
		t.Fatal(err)
	}
	mode := os.FileMode(0o700)
	if os.Geteuid() != 0 {
		mode = 0
	}
	if err := os.Chmod(locked, mode); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(locked, 0o755) })
	for _, args := range [][]string{{"plan", module}, {"lint", module, "--role", "cluster"}} {
		cmd := exec.Command(bin, args...)
		cmd.Dir = open
		cmd.Env = append(os.Environ(), "HOME="+open)
		if os.Geteuid() == 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		}
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != runner.ExitBadInput || !strings.Contains(string(out), module+": permission denied") {
			t.Errorf("captf %s: exit %d, want %d naming the permission denied:\n%s", strings.Join(args, " "), code, runner.ExitBadInput, out)
		}
	}
}

// previewHandOff: `captf preview ARGS` is the preview binary's command,
// with its exit codes and output, found beside captf (through a symbolic
// link too) or on PATH; without it, captf says how to install it.
func previewHandOff(t *testing.T, captfBin string) {
	run := func(t *testing.T, bin, path string, args ...string) (int, string, string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "PATH="+path)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if _, ok := err.(*exec.ExitError); err != nil && !ok {
			t.Fatal(err)
		}
		return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
	}
	emptyPath := t.TempDir()
	linked := filepath.Join(t.TempDir(), "captf")
	if err := os.Symlink(captfBin, linked); err != nil {
		t.Fatal(err)
	}
	alone := filepath.Join(t.TempDir(), "captf")
	raw, err := os.ReadFile(captfBin)
	if err != nil {
		t.Fatal(err)
	}
	write(t, alone, raw, 0o755)

	for _, bin := range []string{captfBin, linked} {
		code, _, stderr := run(t, bin, emptyPath, "preview", "nope")
		if want := `captf: bad input: unknown command "nope" for "captf preview"`; code != runner.ExitBadInput || !strings.HasPrefix(stderr, want) {
			t.Errorf("%s preview nope: exit %d, stderr %q; want exit %d and %q", bin, code, stderr, runner.ExitBadInput, want)
		}
		code, stdout, _ := run(t, bin, emptyPath, "preview", "apply", "--help")
		if code != 0 || !strings.Contains(stdout, "captf preview apply --expect-digest cs1:...") {
			t.Errorf("%s preview apply --help: exit %d, stdout %q", bin, code, stdout)
		}
	}
	// A released captf names its own version; one built from source, the
	// build that puts the preview binary beside it.
	_, ver, _ := run(t, alone, emptyPath, "version")
	ver = strings.TrimSpace(strings.TrimPrefix(ver, "captf version "))
	want := "install it beside captf: go install github.com/captf/captf/cmd/captf-preview@" + ver
	if strings.HasPrefix(ver, "devel") {
		want = "install it beside captf: go build -o " + filepath.Join(filepath.Dir(alone), PreviewBinary) + " ./cmd/captf-preview"
	}
	code, _, stderr := run(t, alone, emptyPath, "preview", "plan")
	if code != runner.ExitFailure || !strings.Contains(stderr, want) {
		t.Errorf("captf without captf-preview: exit %d, stderr %q; want exit %d naming %q", code, stderr, runner.ExitFailure, want)
	}
	code, _, stderr = run(t, alone, filepath.Dir(captfBin), "preview", "nope")
	if code != runner.ExitBadInput {
		t.Errorf("captf-preview on PATH: exit %d, stderr %q; want %d", code, stderr, runner.ExitBadInput)
	}

	// Both of one version: no word of it. A captf of another version
	// hands off all the same, with a warning naming both versions.
	if code, _, stderr := run(t, captfBin, emptyPath, "preview", "apply", "--help"); code != 0 || strings.Contains(stderr, "warning") {
		t.Errorf("one version: exit %d, stderr %q", code, stderr)
	}
	skewed := filepath.Join(t.TempDir(), "captf")
	build := exec.Command("go", "build", "-ldflags", "-X "+version.StampVariable+"=v0.0.0-skew", "-o", skewed, "../../cmd/captf")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build a captf of another version: %v\n%s", err, out)
	}
	if err := os.Symlink(filepath.Join(filepath.Dir(captfBin), PreviewBinary), filepath.Join(filepath.Dir(skewed), PreviewBinary)); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := run(t, skewed, emptyPath, "preview", "apply", "--help")
	want = "captf: warning: captf v0.0.0-skew handed off to captf-preview " + ver + "; install both at one version\n"
	if code != 0 || stderr != want || !strings.Contains(stdout, "captf preview apply --expect-digest cs1:...") {
		t.Errorf("another version: exit %d, stderr %q, stdout %q; want exit 0 and stderr %q", code, stderr, stdout, want)
	}
}

// TestCaptfLinksNoDeployTools: captf's own commands start without the
// preview's deploy-tool clients, whose package initialisation would cost
// every `captf plan` ~30 ms; they live in captf-preview.
func TestCaptfLinksNoDeployTools(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "../../cmd/captf").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "k8s.io/") || strings.HasPrefix(pkg, "github.com/aws/") || strings.HasPrefix(pkg, "github.com/captf/captf/internal/preview/") && pkg != "github.com/captf/captf/internal/preview/terraform" {
			t.Errorf("cmd/captf links %s", pkg)
		}
	}
}

// signalDuringKeyRead: a key read from a FIFO nobody writes, or from a
// stdin that never ends, gives way to SIGINT and SIGTERM: captf exits
// promptly, non-zero, and says why. So does captf preview, which runs in
// the preview binary captf hands off to.
func signalDuringKeyRead(t *testing.T, captfBin, tf string) {
	dir := tftest.CopyRoot(t, "testdata/roots/canary")
	repo := t.TempDir()
	gitRun(t, repo, "init", "-q", "-b", "main")
	write(t, filepath.Join(repo, "captf.yaml"), []byte("components:\n  infra:\n    steps:\n      - kind: terraform-apply\n        inputs: {root: infra}\n"), 0o644)
	if err := os.Mkdir(filepath.Join(repo, "infra"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(repo, "infra", "main.tf"), []byte(`resource "terraform_data" "a" {}`+"\n"), 0o644)
	fifo := filepath.Join(t.TempDir(), "key.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, keyFile string
		sig           syscall.Signal
	}{
		{"fifo/SIGINT", fifo, syscall.SIGINT},
		{"fifo/SIGTERM", fifo, syscall.SIGTERM},
		{"stdin/SIGINT", "/dev/stdin", syscall.SIGINT},
		{"stdin/SIGTERM", "/dev/stdin", syscall.SIGTERM},
		{"preview/fifo/SIGINT", fifo, syscall.SIGINT},
		{"preview/stdin/SIGTERM", "/dev/stdin", syscall.SIGTERM},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(captfBin, "plan", dir, "--binary", tf, "--plan-key-file", c.keyFile)
			what := "plan key"
			if strings.HasPrefix(c.name, "preview/") {
				cmd = exec.Command(captfBin, "preview", "plan", "--root", repo, "--key-file", c.keyFile)
				what = "preview key"
			}
			// A pipe whose writer stays open and silent.
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			time.Sleep(500 * time.Millisecond) // captf is in the read by now
			if err := cmd.Process.Signal(c.sig); err != nil {
				t.Fatal(err)
			}
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				<-exited
				t.Fatalf("captf still runs 10 s after %v; stderr:\n%s", c.sig, stderr.String())
			}
			if code := cmd.ProcessState.ExitCode(); code != runner.ExitFailure {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, runner.ExitFailure, stderr.String())
			}
			want := "captf: read " + what + " " + c.keyFile + ": " + map[syscall.Signal]string{syscall.SIGINT: "interrupt", syscall.SIGTERM: "terminated"}[c.sig] + " signal received\n"
			if stderr.String() != want {
				t.Errorf("stderr %q, want %q", stderr.String(), want)
			}
		})
	}
}

// killedRuns SIGKILLs captf plan and captf apply (and terraform with them)
// while terraform holds the saved plan file, then checks that the leftovers
// are in DIR/.captf/tmp, not in the system's temporary directory, and that
// the next run removes them.
func killedRuns(t *testing.T, captfBin, tf string) {
	tmp := os.Getenv("TMPDIR")
	dir := tftest.CopyRoot(t, "testdata/roots/canary")
	mark := filepath.Join(t.TempDir(), "held")
	// terraform is held with the plan file written: once plan has written
	// it (HOLD_AT=plan), or before apply.
	held := wrapTerraform(t, tf, `if [ "$1" = "$HOLD_AT" ]; then
  if [ "$1" = plan ]; then "$REAL" "$@" || exit; fi
  : > "`+mark+`"; sleep 60
fi`)

	kill := func(t *testing.T, at string, args ...string) {
		t.Helper()
		os.Remove(mark)
		cmd := exec.Command(captfBin, args...)
		cmd.Env = append(os.Environ(), "HOLD_AT="+at)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(2 * time.Minute)
		for {
			if _, err := os.Stat(mark); err == nil {
				break
			}
			if time.Now().After(deadline) {
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				cmd.Wait()
				t.Fatalf("terraform never reached %s:\n%s", at, out.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
		// The whole process group: captf, the wrapper and its sleep.
		if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
	}
	leftovers := func(t *testing.T) []string {
		t.Helper()
		var found []string
		for _, root := range []string{filepath.Join(dir, runner.StateDir, TmpDir), tmp} {
			filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
				if err == nil && (strings.HasSuffix(path, ".tfplan") || strings.HasPrefix(d.Name(), "captf-") || strings.HasPrefix(d.Name(), "run-")) {
					found = append(found, path)
				}
				return nil
			})
		}
		return found
	}
	kill(t, "plan", "plan", dir, "--binary", held)
	left := leftovers(t)
	if len(left) == 0 || !strings.HasPrefix(left[0], filepath.Join(dir, runner.StateDir, TmpDir)) {
		t.Fatalf("after a killed plan, leftovers %v: want the plan file under DIR/.captf/tmp", left)
	}
	for _, p := range left {
		if strings.HasPrefix(p, tmp) && !strings.HasPrefix(p, dir) {
			t.Errorf("a killed plan left %s in the system's temporary directory", p)
		}
	}
	approved := captf(t, "plan", dir, "--binary", tf, "--json").want(t, 0).report(t)
	if left := leftovers(t); len(left) != 0 {
		t.Errorf("the next plan did not remove the leftovers: %v", left)
	}

	kill(t, "apply", "apply", dir, "--binary", held, "--expect-plan", approved.PlanHash)
	if left := leftovers(t); !containsSuffix(left, ".tfplan") {
		t.Fatalf("after a killed apply, leftovers %v: want the plan file under DIR/.captf/tmp", left)
	}
	captf(t, "apply", dir, "--binary", tf, "--expect-plan", approved.PlanHash).want(t, 0)
	if left := leftovers(t); len(left) != 0 {
		t.Errorf("the next apply did not remove the leftovers: %v", left)
	}
}

func containsSuffix(paths []string, suffix string) bool {
	for _, p := range paths {
		if strings.HasSuffix(p, suffix) {
			return true
		}
	}
	return false
}

// pastedApplyCommand: the apply command captf prints for a DIR that starts
// with "-" works when pasted into a shell as it is.
func pastedApplyCommand(t *testing.T, captfBin, tf string) {
	work := t.TempDir()
	src := tftest.CopyRoot(t, "testdata/roots/canary")
	if err := os.Rename(src, filepath.Join(work, "-root")); err != nil {
		t.Fatal(err)
	}
	t.Chdir(work)
	out := captf(t, "plan", "--binary", tf, "--", "-root").want(t, 0)
	var line string
	sc := bufio.NewScanner(strings.NewReader(out.stdout))
	for sc.Scan() {
		if sc.Text() == "To apply exactly this plan:" && sc.Scan() {
			line = strings.TrimSpace(sc.Text())
		}
	}
	if !strings.HasPrefix(line, "captf apply ./-root ") {
		t.Fatalf("apply command %q, want it to name ./-root\n%s", line, out.stdout)
	}
	sh := exec.Command("sh", "-c", line)
	sh.Env = append(os.Environ(), "PATH="+filepath.Dir(captfBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	if b, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("the pasted command %q: %v\n%s", line, err, b)
	} else if !strings.Contains(string(b), "captf: applied the approved plan") {
		t.Errorf("the pasted command did not apply:\n%s", b)
	}
}

// stdoutClosedEarly: `captf plan DIR | head -c300` closes captf's stdout
// while it still writes. captf exits 1 with the write error, as it does on
// Ctrl-C, not killed by SIGPIPE, and no plan file outlives the run.
func stdoutClosedEarly(t *testing.T, captfBin, tf string) {
	dir := tftest.CopyRoot(t, "testdata/roots/canary")
	for i := range 3 {
		cmd := exec.Command(captfBin, "plan", dir, "--binary", tf)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(stdout, make([]byte, 300)); err != nil {
			t.Fatal(err)
		}
		stdout.Close()
		cmd.Wait()
		if code := cmd.ProcessState.ExitCode(); code != runner.ExitFailure {
			t.Errorf("run %d: %v, want exit %d; stderr:\n%s", i, cmd.ProcessState, runner.ExitFailure, stderr.String())
		}
		if !strings.Contains(stderr.String(), "broken pipe") {
			t.Errorf("run %d: stderr does not give the write error:\n%s", i, stderr.String())
		}
		var left []string
		filepath.WalkDir(filepath.Join(dir, runner.StateDir, TmpDir), func(path string, d os.DirEntry, err error) error {
			if err == nil && path != filepath.Join(dir, runner.StateDir, TmpDir) {
				left = append(left, path)
			}
			return nil
		})
		if len(left) != 0 {
			t.Errorf("run %d left %v", i, left)
		}
	}
}

// previewLinkLoop: a captf-preview beside captf that is a symbolic link
// loop is reported as such, not as missing.
func previewLinkLoop(t *testing.T, captfBin string) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "captf")
	raw, err := os.ReadFile(captfBin)
	if err != nil {
		t.Fatal(err)
	}
	write(t, bin, raw, 0o755)
	loop := filepath.Join(dir, PreviewBinary)
	if err := os.Symlink(loop, loop); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "preview", "plan")
	cmd.Env = append(os.Environ(), "PATH="+t.TempDir())
	out, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != runner.ExitFailure || !strings.Contains(string(out), "too many levels of symbolic links") {
		t.Errorf("exit %d, want %d naming the link loop:\n%s", code, runner.ExitFailure, out)
	}
}
