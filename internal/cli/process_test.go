package cli

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/captf/captf/internal/runner"
	"github.com/captf/captf/internal/tftest"
)

// These tests run the captf binary as a separate process, for what only a
// process shows: signals.

// buildCaptf builds cmd/captf into a temporary directory.
func buildCaptf(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "captf")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/captf").CombinedOutput(); err != nil {
		t.Fatalf("build captf: %v\n%s", err, out)
	}
	return bin
}

func TestBinary(t *testing.T) {
	setup(t)
	captfBin := buildCaptf(t)
	tf := tftest.Terraform(t)

	t.Run("signal during key read", func(t *testing.T) { signalDuringKeyRead(t, captfBin, tf.Path) })
}

// signalDuringKeyRead: a key read from a FIFO nobody writes, or from a
// stdin that never ends, gives way to SIGINT and SIGTERM: captf exits
// promptly, non-zero, and says why.
func signalDuringKeyRead(t *testing.T, captfBin, tf string) {
	dir := tftest.CopyRoot(t, "testdata/roots/canary")
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
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(captfBin, "plan", dir, "--binary", tf, "--plan-key-file", c.keyFile)
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
			want := "captf: read plan key " + c.keyFile + ": " + map[syscall.Signal]string{syscall.SIGINT: "interrupt", syscall.SIGTERM: "terminated"}[c.sig] + " signal received\n"
			if stderr.String() != want {
				t.Errorf("stderr %q, want %q", stderr.String(), want)
			}
		})
	}
}
