package testnode

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ServeLogs makes the containers' logs readable through the API server,
// as kubectl logs reads them: it serves the kubelet's container log
// endpoint (/containerLogs/NAMESPACE/POD/CONTAINER, over TLS with a
// certificate of its own, which an API server without
// --kubelet-certificate-authority does not check) and registers a Node
// named name at that address, on which the pods of later Jobs run. Call it
// before Start. Only a whole log is served: no follow, tail or timestamps.
func (n *Node) ServeLogs(t testing.TB, name string) {
	t.Helper()
	stop, err := n.RunLogs(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
}

// RunLogs is ServeLogs for a program rather than a test: stop stops the
// server. The Node object stays: it goes with the API server.
func (n *Node) RunLogs(name string) (stop func(), err error) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{ns}/{pod}/{container}", func(w http.ResponseWriter, r *http.Request) {
		key := r.PathValue("ns") + "/" + r.PathValue("pod") + "/" + r.PathValue("container")
		n.mu.Lock()
		path, ok := n.logs[key]
		n.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		b, err := os.ReadFile(path)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write(b)
	})
	srv := httptest.NewTLSServer(mux)
	host, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		srv.Close()
		return nil, err
	}
	p, _ := strconv.Atoi(port)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	ctx := context.Background()
	if err := n.Client.Create(ctx, node); err != nil {
		srv.Close()
		return nil, fmt.Errorf("testnode: register node: %w", err)
	}
	node.Status = corev1.NodeStatus{
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: host}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(p)}},
	}
	if err := n.Client.Status().Update(ctx, node); err != nil {
		srv.Close()
		return nil, fmt.Errorf("testnode: node status: %w", err)
	}
	n.mu.Lock()
	n.nodeName = name
	n.mu.Unlock()
	return srv.Close, nil
}

// Logs returns the log of every container the node ran, by
// "<namespace>/<pod>/<container>".
func (n *Node) Logs() (map[string][]byte, error) {
	n.mu.Lock()
	paths := maps.Clone(n.logs)
	n.mu.Unlock()
	logs := make(map[string][]byte, len(paths))
	for key, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		logs[key] = b
	}
	return logs, nil
}
