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
	"sync"
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
	// Cmd is the current process (Restart replaces it).
	Cmd *exec.Cmd
	// LogPath holds the output of every process Start and Restart ran.
	LogPath string

	bin, kubeconfig string
	args            []string
	log             *os.File
	mu              sync.Mutex
	exited          chan struct{}
}

// Start runs bin with args and --health-probe-bind-address on a free port,
// against the API server of kubeconfig, its output in a log file; it
// returns once /readyz answers 200 (or fails the test with the log after a
// minute), and stops the manager, waiting for it, when the test ends —
// before the API server stops, since cleanups run last first.
func Start(t testing.TB, bin, kubeconfig string, args ...string) *Manager {
	t.Helper()
	m := &Manager{LogPath: filepath.Join(t.TempDir(), "manager.log"), bin: bin, kubeconfig: kubeconfig, args: args}
	log, err := os.Create(m.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	m.log = log
	t.Cleanup(func() {
		m.mu.Lock()
		cmd, exited := m.Cmd, m.exited
		m.mu.Unlock()
		if cmd != nil {
			_ = cmd.Process.Signal(syscall.SIGINT)
			<-exited
		}
		log.Close()
	})
	m.run(t)
	return m
}

// run starts one process and waits for it to be ready.
func (m *Manager) run(t testing.TB) {
	t.Helper()
	probes := FreePort(t)
	args := append(append([]string(nil), m.args...), fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probes))
	cmd := exec.Command(m.bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+m.kubeconfig)
	cmd.Stdout, cmd.Stderr = m.log, m.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	m.mu.Lock()
	m.Cmd, m.exited = cmd, exited
	m.mu.Unlock()
	m.WaitFor(t, "/readyz", func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", probes))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// Kill ends the process with SIGKILL, as a node failure or an OOM kill
// would: nothing of it runs after Kill returns. It is safe to call from
// any goroutine (e.g. a fault injected at an exact request) and more than
// once.
func (m *Manager) Kill() {
	m.mu.Lock()
	cmd, exited := m.Cmd, m.exited
	m.mu.Unlock()
	_ = cmd.Process.Kill()
	<-exited
}

// Running says whether the current process has not exited.
func (m *Manager) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	select {
	case <-m.exited:
		return false
	default:
		return true
	}
}

// Restart starts the manager again with the same binary, kubeconfig and
// flags, after the process ended (see Kill), and waits until it is ready.
// Its output goes on in the same log.
func (m *Manager) Restart(t testing.TB) {
	t.Helper()
	if m.Running() {
		t.Fatal("managertest: Restart of a manager that is still running")
	}
	m.run(t)
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
