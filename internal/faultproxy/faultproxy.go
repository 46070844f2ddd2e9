// Package faultproxy puts a fault-injecting HTTP proxy between a client
// (the manager binary) and a real kube-apiserver, for tests that prove the
// client keeps its invariants when single requests fail: the k-th request
// matching a rule is answered with a conflict, an internal error, a
// timeout or a dropped connection, or — the fault a real cluster produces
// and a fake client cannot — it is forwarded so the write lands, and only
// then answered with an error or a dropped connection. Every request is
// recorded, so a test can enumerate a flow's writes and fault each one.
//
// The client speaks plain HTTP to 127.0.0.1 without credentials; the proxy
// talks TLS to the API server with the credentials of the rest.Config it
// was given (impersonation included), so the API server sees the identity
// the test chose. Watches stream through (no buffering).
//
// Gate (gate.go) is the same idea for the other direction: a TCP forwarder
// in front of a webhook server that the API server calls, which can be
// closed to make the webhook unreachable while its server keeps running.
package faultproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Fault is what the proxy does to the request a rule picks.
type Fault string

const (
	// Pass forwards the request unchanged (with Rule.After, a point to act
	// at, such as killing the client right after a write landed).
	Pass Fault = "pass"
	// Conflict answers 409 with the Status the API server gives a stale
	// resourceVersion; nothing is forwarded.
	Conflict Fault = "conflict"
	// ServerError answers 500 (an InternalError Status); nothing is
	// forwarded.
	ServerError Fault = "500"
	// Timeout holds the request without forwarding it for Proxy.Hold, then
	// drops the connection.
	Timeout Fault = "timeout"
	// Drop closes the connection without an answer; nothing is forwarded.
	Drop Fault = "drop"
	// CommitThenError forwards the request, so the write happens, and
	// answers 500: the client believes a write failed that landed.
	CommitThenError Fault = "commit-500"
	// CommitThenDrop forwards the request and closes the connection
	// without an answer.
	CommitThenDrop Fault = "commit-drop"
)

// Faults lists every fault but Pass, in a fixed order.
var Faults = []Fault{Conflict, ServerError, Timeout, Drop, CommitThenError, CommitThenDrop}

// Rule picks the Nth request (1-based, counted from when the rule was
// set) that matches Verb, Resource and, when set, Namespace and Name.
type Rule struct {
	// Verb is the HTTP method: POST, PUT, PATCH or DELETE (or GET).
	Verb string
	// Resource is the plural resource, with "/subresource" when the
	// request is to one, e.g. "terraformclusters/status", "jobs".
	Resource string
	// Namespace, when set, must equal the request's namespace.
	Namespace string
	// Name, when set, must match the object's name: from the path, or for
	// a create, from metadata.name of the JSON body.
	Name *regexp.Regexp
	// Nth is which matching request the fault hits.
	Nth   int
	Fault Fault
	// After, when set, is called once the Nth request has been answered by
	// the API server and before the client hears anything back.
	After func()
}

// Request is one request that went through the proxy.
type Request struct {
	Method    string
	Path      string
	Namespace string
	// Resource is the plural resource with "/subresource", empty for a
	// request that is not for a resource (discovery, /version).
	Resource string
	Name     string
	Watch    bool
	// Status is the status code the client got: 0 when the connection was
	// dropped (or the request is still in flight).
	Status int
	// Upstream is the status the API server answered with: 0 when the
	// request was never forwarded.
	Upstream int
	// Fault is the fault applied to it, empty when none.
	Fault Fault
}

// Write says whether the request asked to change something.
func (r Request) Write() bool {
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return r.Resource != ""
	}
	return false
}

// Key is "METHOD resource", how rules select requests.
func (r Request) Key() string { return r.Method + " " + r.Resource }

// Proxy is a running proxy.
type Proxy struct {
	// URL is where clients reach it: http://127.0.0.1:PORT.
	URL string
	// Hold is how long a Timeout fault holds a request (default 10s).
	Hold time.Duration

	rp      *httputil.ReverseProxy
	info    *request.RequestInfoFactory
	server  *http.Server
	closing context.Context

	mu    sync.Mutex
	rules []*armed
	log   []Request
}

type armed struct {
	Rule
	seen  int
	fired bool
}

// Start starts a proxy to the API server of upstream on a free port of
// 127.0.0.1 and stops it when the test ends.
func Start(t testing.TB, upstream *rest.Config) *Proxy {
	t.Helper()
	p, err := New(upstream)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.URL = "http://" + l.Addr().String()
	go func() { _ = p.server.Serve(l) }()
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// New returns a proxy to the API server of upstream, to be served with
// ServeHTTP (Start serves it).
func New(upstream *rest.Config) (*Proxy, error) {
	target, err := url.Parse(upstream.Host)
	if err != nil {
		return nil, fmt.Errorf("API server address: %w", err)
	}
	if target.Scheme == "" {
		target.Scheme = "https"
	}
	rt, err := rest.TransportFor(upstream)
	if err != nil {
		return nil, fmt.Errorf("transport to the API server: %w", err)
	}
	closing, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		Hold: 10 * time.Second,
		rp: &httputil.ReverseProxy{
			Rewrite: func(r *httputil.ProxyRequest) {
				r.SetURL(target)
				r.Out.Host = target.Host
			},
			Transport: rt,
			// Watches are long-lived responses that must reach the client
			// event by event.
			FlushInterval: -1,
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				w.WriteHeader(http.StatusBadGateway)
			},
		},
		info: &request.RequestInfoFactory{
			APIPrefixes:          sets.NewString("api", "apis"),
			GrouplessAPIPrefixes: sets.NewString("api"),
		},
		closing: closing,
	}
	p.server = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	p.server.RegisterOnShutdown(cancel)
	return p, nil
}

// Close stops serving and releases held requests.
func (p *Proxy) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := p.server.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		// Watches never end by themselves.
		return p.server.Close()
	}
	return err
}

// Kubeconfig writes a kubeconfig that points at the proxy and returns its
// path.
func (p *Proxy) Kubeconfig(t testing.TB) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["proxy"] = &clientcmdapi.Cluster{Server: p.URL}
	cfg.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	cfg.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	cfg.CurrentContext = "proxy"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Set replaces the rules; each counts its matches from now on.
func (p *Proxy) Set(rules ...Rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = p.rules[:0]
	for _, r := range rules {
		p.rules = append(p.rules, &armed{Rule: r})
	}
}

// Fired says which of the rules last Set hit their request, in order.
func (p *Proxy) Fired() []bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]bool, len(p.rules))
	for i, r := range p.rules {
		out[i] = r.fired
	}
	return out
}

// Mark is the position of the next request in the record, for Since.
func (p *Proxy) Mark() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.log)
}

// Since returns the requests recorded from mark on, in the order they
// arrived.
func (p *Proxy) Since(mark int) []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Request(nil), p.log[mark:]...)
}

// ServeHTTP records the request, applies the fault a rule picks for it,
// and otherwise forwards it.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := p.describe(r)
	p.mu.Lock()
	idx := len(p.log)
	p.log = append(p.log, rec)
	rule := p.pick(rec)
	p.mu.Unlock()

	// The record is written before the client hears back, so a client
	// that read its answer finds its request recorded.
	set := func(status, upstream int) {
		p.mu.Lock()
		p.log[idx].Status, p.log[idx].Upstream = status, upstream
		p.mu.Unlock()
	}
	if rule == nil {
		p.rp.ServeHTTP(&statusWriter{ResponseWriter: w, set: set}, r)
		return
	}
	switch rule.Fault {
	case Conflict:
		writeStatus(w, set, 0, apierrors.NewConflict(groupResource(r, p.info), rec.Name, errors.New("the object has been modified; please apply your changes to the latest version and try again (faultproxy)")))
		return
	case ServerError:
		writeStatus(w, set, 0, apierrors.NewInternalError(errors.New("faultproxy: injected internal error")))
		return
	case Timeout:
		select {
		case <-time.After(p.Hold):
		case <-r.Context().Done():
		case <-p.closing.Done():
		}
		drop(w)
		return
	case Drop:
		drop(w)
		return
	}
	// The write goes through; the client may or may not hear of it.
	out := httptest.NewRecorder()
	p.rp.ServeHTTP(out, r)
	if rule.After != nil {
		rule.After()
	}
	switch rule.Fault {
	case CommitThenError:
		writeStatus(w, set, out.Code, apierrors.NewInternalError(errors.New("faultproxy: injected internal error after the write")))
	case CommitThenDrop:
		set(0, out.Code)
		drop(w)
	default:
		set(out.Code, out.Code)
		for k, v := range out.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(out.Code)
		_, _ = io.Copy(w, out.Body)
	}
}

// pick counts the request against every rule and returns the rule whose
// turn it is, if any. Called with p.mu held.
func (p *Proxy) pick(rec Request) *armed {
	var hit *armed
	for _, r := range p.rules {
		if r.Verb != rec.Method || r.Resource != rec.Resource || (r.Namespace != "" && r.Namespace != rec.Namespace) ||
			(r.Name != nil && !r.Name.MatchString(rec.Name)) {
			continue
		}
		r.seen++
		if r.seen == r.Nth && hit == nil {
			r.fired = true
			hit = r
		}
	}
	if hit != nil {
		// The record says what was done, so a test can print it.
		p.log[len(p.log)-1].Fault = hit.Fault
	}
	return hit
}

func (p *Proxy) describe(r *http.Request) Request {
	rec := Request{Method: r.Method, Path: r.URL.Path}
	info, err := p.info.NewRequestInfo(r)
	if err != nil || !info.IsResourceRequest {
		return rec
	}
	rec.Namespace, rec.Name, rec.Resource = info.Namespace, info.Name, info.Resource
	if info.Subresource != "" {
		rec.Resource += "/" + info.Subresource
	}
	rec.Watch = info.Verb == "watch"
	if r.Method == http.MethodPost && rec.Name == "" && r.Body != nil {
		rec.Name = createdName(r)
	}
	return rec
}

// createdName reads metadata.name from a create's body (JSON, or the
// protobuf that client-go sends for built-in kinds) and puts the body back.
func createdName(r *http.Request) string {
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return ""
	}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		var obj struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if json.Unmarshal(body, &obj) != nil {
			return ""
		}
		return obj.Metadata.Name
	}
	obj, _, err := builtin.Decode(body, nil, nil)
	if err != nil {
		return ""
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	return m.GetName()
}

// builtin decodes the built-in kinds in any of their encodings.
var builtin = serializer.NewCodecFactory(clientgoscheme.Scheme).UniversalDeserializer()

func groupResource(r *http.Request, f *request.RequestInfoFactory) schema.GroupResource {
	info, err := f.NewRequestInfo(r)
	if err != nil {
		return schema.GroupResource{}
	}
	return schema.GroupResource{Group: info.APIGroup, Resource: info.Resource}
}

// writeStatus answers with err's Status as the API server encodes it, so
// client-go decodes the same error (apierrors.IsConflict and so on).
func writeStatus(w http.ResponseWriter, set func(status, upstream int), upstream int, err *apierrors.StatusError) {
	st := err.Status()
	st.Kind, st.APIVersion = "Status", "v1"
	b, _ := json.Marshal(st)
	set(int(st.Code), upstream)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.Code))
	_, _ = w.Write(b)
}

// drop closes the client's connection without an answer.
func drop(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// Not hijackable (HTTP/2): abort the response instead.
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}

// statusWriter records the status code written through it and keeps the
// writer's flushing and hijacking reachable.
type statusWriter struct {
	http.ResponseWriter
	set   func(status, upstream int)
	wrote bool
}

func (s *statusWriter) WriteHeader(code int) {
	if !s.wrote {
		s.wrote = true
		s.set(code, code)
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if !s.wrote {
		s.WriteHeader(http.StatusOK)
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
