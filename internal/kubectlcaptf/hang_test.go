package kubectlcaptf

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// silentServer is a TCP listener that accepts connections and never
// answers: an API server that hangs. No real API server can be made to
// hang on purpose, so this one stands in for it.
func silentServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://` + l.Addr().String() + `"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u, namespace: default}}]
current-context: c
`
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

// TestSilentServer: against an API server that never answers, Ctrl-C (the
// command's context ending) stops every command at once, and a request
// gives up after the default request timeout.
func TestSilentServer(t *testing.T) {
	kubeconfig := silentServer(t)
	for _, args := range [][]string{
		{"plans"},
		{"show", "p"},
		{"approve", "p"},
		{"logs", "p", "-f"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(500*time.Millisecond, cancel)
			var out bytes.Buffer
			cmd := NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
			cmd.SetArgs(append(args, "--kubeconfig", kubeconfig))
			done := make(chan error, 1)
			start := time.Now()
			go func() { done <- cmd.ExecuteContext(ctx) }()
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("no error")
				}
				if d := time.Since(start); d > 5*time.Second {
					t.Errorf("returned %v after the context ended", d)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("kubectl captf %s still runs 20 s after its context ended", strings.Join(args, " "))
			}
		})
	}
	t.Run("default request timeout", func(t *testing.T) {
		o := &options{config: genericclioptions.NewConfigFlags(true)}
		o.config.KubeConfig = &kubeconfig
		cfg, err := o.restConfig()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Timeout != DefaultRequestTimeout {
			t.Errorf("request timeout %v, want %v", cfg.Timeout, DefaultRequestTimeout)
		}
	})
}
