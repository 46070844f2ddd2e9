package faultproxy

import (
	"bufio"
	"context"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// upstream is a TLS server answering like the API server for ConfigMaps:
// it echoes a ConfigMap named after the path and counts the writes that
// reached it. A watch streams one line, then a second once released.
type upstream struct {
	srv     *httptest.Server
	writes  atomic.Int32
	release chan struct{}
	// seen is called with each write that reached the server.
	seen func()
}

func startUpstream(t *testing.T) *upstream {
	u := &upstream{release: make(chan struct{})}
	u.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") == "true" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, "{\"type\":\"ADDED\"}\n")
			http.NewResponseController(w).Flush()
			<-u.release
			_, _ = io.WriteString(w, "{\"type\":\"MODIFIED\"}\n")
			return
		}
		if r.Method != http.MethodGet {
			u.writes.Add(1)
			if u.seen != nil {
				u.seen()
			}
		}
		name := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"`+name+`","namespace":"ns","resourceVersion":"1"}}`)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstream) config() *rest.Config {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: u.srv.Certificate().Raw})
	return &rest.Config{Host: u.srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
}

// clientFor is a controller-runtime client that reaches the proxy through
// the kubeconfig the proxy writes, as the manager does.
func clientFor(t *testing.T, p *Proxy) client.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", p.Kubeconfig(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout = 5 * time.Second
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("ConfigMap"), meta.RESTScopeNamespace)
	c, err := client.New(cfg, client.Options{Scheme: scheme, Mapper: mapper})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func patch(c client.Client, name string) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
	return c.Patch(context.Background(), cm, client.RawPatch(types.MergePatchType, []byte(`{"data":{"k":"v"}}`)))
}

func TestFaults(t *testing.T) {
	for _, tc := range []struct {
		fault Fault
		// is says whether the error of the faulted call is the expected one.
		is func(error) bool
		// landed: the faulted write reached the API server.
		landed bool
		status int
	}{
		{Conflict, apierrors.IsConflict, false, http.StatusConflict},
		{ServerError, apierrors.IsInternalError, false, http.StatusInternalServerError},
		{Timeout, isTransport, false, 0},
		{Drop, isTransport, false, 0},
		{CommitThenError, apierrors.IsInternalError, true, http.StatusInternalServerError},
		{CommitThenDrop, isTransport, true, 0},
	} {
		t.Run(string(tc.fault), func(t *testing.T) {
			u := startUpstream(t)
			p := Start(t, u.config())
			p.Hold = 300 * time.Millisecond
			c := clientFor(t, p)
			// The second PATCH of a ConfigMap named cm-*: the other
			// names, verbs and resources do not count.
			p.Set(Rule{Verb: http.MethodPatch, Resource: "configmaps", Name: regexp.MustCompile(`^cm-`), Nth: 2, Fault: tc.fault})
			mark := p.Mark()
			if err := patch(c, "cm-a"); err != nil {
				t.Fatalf("first patch: %v", err)
			}
			if err := patch(c, "other"); err != nil {
				t.Fatalf("patch of another name: %v", err)
			}
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "cm-b"}, &corev1.ConfigMap{}); err != nil {
				t.Fatalf("get: %v", err)
			}
			before := u.writes.Load()
			err := patch(c, "cm-b")
			if !tc.is(err) {
				t.Errorf("faulted patch: err = %v", err)
			}
			if landed := u.writes.Load() > before; landed != tc.landed {
				t.Errorf("the write landed: %v, want %v", landed, tc.landed)
			}
			if err := patch(c, "cm-c"); err != nil {
				t.Errorf("the patch after the fault: %v", err)
			}
			if fired := p.Fired(); len(fired) != 1 || !fired[0] {
				t.Errorf("fired %v", fired)
			}
			reqs := p.Since(mark)
			var writes []Request
			for _, r := range reqs {
				if r.Write() {
					writes = append(writes, r)
				}
			}
			if len(reqs) != 5 || len(writes) != 4 {
				t.Fatalf("recorded %+v", reqs)
			}
			got := writes[2]
			if got.Key() != "PATCH configmaps" || got.Name != "cm-b" || got.Namespace != "ns" || got.Fault != tc.fault || got.Status != tc.status {
				t.Errorf("the faulted request was recorded as %+v", got)
			}
			if (got.Upstream != 0) != tc.landed {
				t.Errorf("upstream status %d, landed %v", got.Upstream, tc.landed)
			}
			if w := writes[3]; w.Fault != "" || w.Status != http.StatusOK {
				t.Errorf("the next write was recorded as %+v", w)
			}
		})
	}
}

func isTransport(err error) bool {
	var st apierrors.APIStatus
	return err != nil && !strings.Contains(err.Error(), "faultproxy") && !isAPIStatus(err, &st)
}

func isAPIStatus(err error, st *apierrors.APIStatus) bool {
	s, ok := err.(apierrors.APIStatus)
	if ok {
		*st = s
	}
	return ok
}

// TestCreateName: a rule with a name pattern finds a create's object by
// the name in its body, and the body still reaches the API server.
func TestCreateName(t *testing.T) {
	u := startUpstream(t)
	p := Start(t, u.config())
	c := clientFor(t, p)
	p.Set(Rule{Verb: http.MethodPost, Resource: "configmaps", Name: regexp.MustCompile(`^wanted$`), Nth: 1, Fault: Conflict})
	if err := c.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "ns"}}); err != nil {
		t.Fatalf("create other: %v", err)
	}
	if err := c.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "wanted", Namespace: "ns"}}); !apierrors.IsConflict(err) {
		t.Errorf("create wanted: err = %v, want a conflict", err)
	}
	if n := u.writes.Load(); n != 1 {
		t.Errorf("%d writes reached the API server, want 1", n)
	}
}

// TestAfter: the hook runs once the write landed and before the client
// hears back, so a test can kill the client at exactly that point.
func TestAfter(t *testing.T) {
	u := startUpstream(t)
	p := Start(t, u.config())
	c := clientFor(t, p)
	var mu sync.Mutex
	var order []string
	u.seen = func() { mu.Lock(); order = append(order, "landed"); mu.Unlock() }
	p.Set(Rule{Verb: http.MethodPatch, Resource: "configmaps", Nth: 1, Fault: Pass, After: func() {
		mu.Lock()
		order = append(order, "hook")
		mu.Unlock()
	}})
	err := patch(c, "cm")
	mu.Lock()
	order = append(order, "answered")
	got := strings.Join(order, ",")
	mu.Unlock()
	if err != nil || got != "landed,hook,answered" {
		t.Errorf("err %v, order %s", err, got)
	}
}

// TestWatchStreams: a watch's events reach the client as they come.
func TestWatchStreams(t *testing.T) {
	u := startUpstream(t)
	p := Start(t, u.config())
	resp, err := http.Get(p.URL + "/api/v1/namespaces/ns/configmaps?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewReader(resp.Body)
	first := make(chan string, 1)
	go func() { l, _ := lines.ReadString('\n'); first <- l }()
	select {
	case l := <-first:
		if !strings.Contains(l, "ADDED") {
			t.Errorf("first event %q", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first event did not stream through")
	}
	close(u.release)
	if l, _ := lines.ReadString('\n'); !strings.Contains(l, "MODIFIED") {
		t.Errorf("second event %q", l)
	}
	if reqs := p.Since(0); len(reqs) != 1 || !reqs[0].Watch || reqs[0].Resource != "configmaps" {
		t.Errorf("recorded %+v", reqs)
	}
}

func TestGate(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	g := StartGate(t, "127.0.0.1:0", echo.Addr().String())
	roundTrip := func() error {
		c, err := net.DialTimeout("tcp", g.Addr, time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := io.WriteString(c, "ping\n"); err != nil {
			return err
		}
		_, err = bufio.NewReader(c).ReadString('\n')
		return err
	}
	if err := roundTrip(); err != nil {
		t.Fatalf("open gate: %v", err)
	}
	g.Shut()
	if err := roundTrip(); err == nil {
		t.Error("a shut gate let a connection through")
	}
	g.Open()
	if err := roundTrip(); err != nil {
		t.Errorf("reopened gate: %v", err)
	}
}
