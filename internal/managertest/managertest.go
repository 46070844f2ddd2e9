// Package managertest runs the manager binary (cmd/manager) against a
// test's API server as a Deployment would run it, for the tests that need
// the binary itself: flags, probes, logs, webhooks, scale.
package managertest

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// FreePort returns a TCP port of 127.0.0.1 that nothing listens on now.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Build builds cmd/manager (root is the repository root, relative to the
// test) and returns the binary's path.
func Build(t testing.TB, root string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "manager")
	if out, err := exec.Command("go", "build", "-o", bin, filepath.Join(root, "cmd", "manager")).CombinedOutput(); err != nil {
		t.Fatalf("build the manager: %v\n%s", err, out)
	}
	return bin
}

// Manager is a running manager process.
type Manager struct {
	Cmd     *exec.Cmd
	LogPath string
}

// Start runs bin with args and --health-probe-bind-address on a free port,
// against the API server of kubeconfig, its output in a log file; it
// returns once /readyz answers 200 (or fails the test with the log after a
// minute), and stops the manager, waiting for it, when the test ends —
// before the API server stops, since cleanups run last first.
func Start(t testing.TB, bin, kubeconfig string, args ...string) *Manager {
	t.Helper()
	probes := FreePort(t)
	args = append(args, fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probes))
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	m := &Manager{Cmd: cmd, LogPath: filepath.Join(t.TempDir(), "manager.log")}
	log, err := os.Create(m.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		_ = cmd.Wait()
		log.Close()
	})
	m.WaitFor(t, "/readyz", func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", probes))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return m
}

// WaitFor polls ok for up to a minute and fails the test with the
// manager's log if it never holds.
func (m *Manager) WaitFor(t testing.TB, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute; manager log:\n%s", what, m.Log(t))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Log is what the manager wrote so far.
func (m *Manager) Log(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(m.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
