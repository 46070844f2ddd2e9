// Package gcptest is a test server in the shapes of Google Cloud's REST
// APIs, for the gcp-apply capability's tests and the command line's
// end-to-end test. It serves the kinds no emulator here serves — Compute
// Engine addresses and forwarding rules, Cloud Run services — and, for
// tests that need every kind behind one endpoint, Pub/Sub, Cloud Storage
// and Spanner too. It is not Google: it answers what captf calls, in the
// shapes Google's REST API reference gives for them, and nothing else.
//
//   - Pub/Sub v1: PUT, GET, PATCH ({topic|subscription, updateMask}) and
//     DELETE of projects/{p}/topics/{t} and subscriptions/{s}, and their
//     lists; a subscription gets ackDeadlineSeconds 10,
//     messageRetentionDuration "604800s" and pushConfig {}.
//   - Cloud Storage JSON v1: POST storage/v1/b?project=, GET, PATCH,
//     DELETE storage/v1/b/{b} and the list; a bucket gets id, selfLink,
//     projectNumber, location "US" and storageClass "STANDARD" by default.
//   - Spanner v1: POST projects/{p}/instances ({instanceId, instance}),
//     GET, PATCH ({instance, fieldMask}), DELETE, the list, and the
//     operation a write answers (done at once); an instance gets state
//     READY.
//   - Compute Engine v1: POST regions/{r}/addresses and forwardingRules,
//     GET, DELETE, POST …/{name}/setLabels (412 when labelFingerprint is
//     not the current one) and the lists. Each write answers a
//     compute#operation that is RUNNING until its first GET. A resource gets
//     id, selfLink, region as a URL, creationTimestamp, labelFingerprint; an
//     address without one is given address 203.0.113.N, addressType
//     EXTERNAL and status RESERVED; a forwarding rule without an IPAddress
//     is given 198.51.100.N and IPProtocol TCP.
//   - Cloud Run v2: POST projects/{p}/locations/{l}/services?serviceId=,
//     GET, PATCH, DELETE and the list; a write answers an operation that
//     is not done until its first GET. A service gets uid, uri
//     https://{name}-{hash}-{region}.a.run.app, generation and createTime.
//   - Errors: {"error":{"code":…,"message":…,"status":…}} with Google's
//     statuses: NOT_FOUND (404), ALREADY_EXISTS (409), INVALID_ARGUMENT
//     (400), FAILED_PRECONDITION (412), and any fault a test injects with
//     Fail.
//
// The server records every request it answers, so a test can say that
// nothing was written.
package gcptest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
)

// Request is one request the server answered.
type Request struct {
	Method        string
	Path          string
	Query         string
	Body          []byte
	Authorization string
	Status        int
}

// Fault makes requests fail: those of Method (any when empty) whose path
// ends with PathSuffix. Times bounds how many; 0 is every one.
type Fault struct {
	Method, PathSuffix string
	HTTP               int
	Status, Message    string
	Times              int
}

// Server is a running test server.
type Server struct {
	URL string

	mu        sync.Mutex
	resources map[string]map[string]any // by full name, e.g. projects/p/topics/t
	ops       map[string]map[string]any // pending operations by path
	requests  []Request
	faults    []*Fault
	serial    int
}

// New starts a server that stops when the test ends.
func New(t testing.TB) *Server {
	s := &Server{resources: map[string]map[string]any{}, ops: map[string]map[string]any{}}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Fail injects a fault.
func (s *Server) Fail(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &f)
}

// Requests returns what the server answered so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Writes returns the requests that were not GETs.
func (s *Server) Writes() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.Method != http.MethodGet {
			out = append(out, r)
		}
	}
	return out
}

// Resource returns a copy of the resource of a full name (projects/p/…,
// b/{bucket} for a bucket), or nil.
func (s *Server) Resource(name string) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return clone(s.resources[name])
}

// Edit changes a stored resource as an outside writer would.
func (s *Server) Edit(name string, f func(map[string]any)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.resources[name]; r != nil {
		f(r)
	}
}

// State is every resource with its content, for a test to say nothing
// changed.
func (s *Server) State() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, _ := json.Marshal(s.resources)
	return string(b)
}

// route is one collection of the API: its path pattern (the collection's
// parent in groups), the prefix a stored name drops and the kind it
// serves.
type route struct {
	re   *regexp.Regexp
	kind string
}

var routes = []route{
	{regexp.MustCompile(`^/v1/(projects/[^/]+/topics)(?:/([^/]+))?$`), "topic"},
	{regexp.MustCompile(`^/v1/(projects/[^/]+/subscriptions)(?:/([^/]+))?$`), "subscription"},
	{regexp.MustCompile(`^/storage/v1/(b)(?:/([^/]+))?$`), "bucket"},
	{regexp.MustCompile(`^/v1/(projects/[^/]+/instances)(?:/([^/]+))?$`), "instance"},
	{regexp.MustCompile(`^/compute/v1/(projects/[^/]+/regions/[^/]+/addresses)(?:/([^/]+))?(/setLabels)?$`), "address"},
	{regexp.MustCompile(`^/compute/v1/(projects/[^/]+/regions/[^/]+/forwardingRules)(?:/([^/]+))?(/setLabels)?$`), "forwardingRule"},
	{regexp.MustCompile(`^/v2/(projects/[^/]+/locations/[^/]+/services)(?:/([^/]+))?$`), "service"},
}

var listKeys = map[string]string{
	"topic": "topics", "subscription": "subscriptions", "bucket": "items", "instance": "instances",
	"address": "items", "forwardingRule": "items", "service": "services",
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Body: body, Authorization: r.Header.Get("Authorization")}
	status, answer := s.answer(r, body)
	rec.Status = status
	s.requests = append(s.requests, rec)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(answer)
}

func apiError(code int, status, format string, args ...any) (int, any) {
	return code, map[string]any{"error": map[string]any{"code": code, "message": fmt.Sprintf(format, args...), "status": status}}
}

func (s *Server) answer(r *http.Request, body []byte) (int, any) {
	for _, f := range s.faults {
		if (f.Method == "" || f.Method == r.Method) && strings.HasSuffix(r.URL.Path, f.PathSuffix) && f.Times >= 0 {
			if f.Times > 0 {
				f.Times--
				if f.Times == 0 {
					f.Times = -1
				}
			}
			return apiError(f.HTTP, f.Status, "%s", f.Message)
		}
	}
	if op, ok := s.ops[r.URL.Path]; ok && r.Method == http.MethodGet {
		delete(s.ops, r.URL.Path)
		if op["kind"] == "compute#operation" {
			op["status"] = "DONE"
		} else {
			op["done"] = true
		}
		return http.StatusOK, op
	}
	for _, rt := range routes {
		m := rt.re.FindStringSubmatch(r.URL.Path)
		if m == nil {
			continue
		}
		parent, name := m[1], m[2]
		if rt.kind == "bucket" {
			parent = "b"
		}
		setLabels := len(m) > 3 && m[3] != ""
		return s.handle(r, body, rt.kind, parent, name, setLabels)
	}
	return apiError(http.StatusNotFound, "NOT_FOUND", "no such API: %s %s", r.Method, r.URL.Path)
}

func (s *Server) handle(r *http.Request, body []byte, kind, parent, name string, setLabels bool) (int, any) {
	var in map[string]any
	if len(body) > 0 {
		if err := json.Unmarshal(body, &in); err != nil {
			return apiError(http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid JSON payload received.")
		}
	}
	q := r.URL.Query()
	if name == "" {
		switch r.Method {
		case http.MethodGet:
			if kind == "bucket" {
				parent = "b"
			}
			var items []any
			for _, k := range sortedKeys(s.resources) {
				res := s.resources[k]
				if strings.HasPrefix(k, parent+"/") && strings.Count(k, "/") == strings.Count(parent, "/")+1 &&
					(kind != "bucket" || res["projectNumber"] == projectNumber(q.Get("project"))) {
					items = append(items, clone(res))
				}
			}
			return http.StatusOK, map[string]any{listKeys[kind]: items}
		case http.MethodPost:
			switch kind {
			case "bucket":
				name, _ = in["name"].(string)
				in["projectNumber"] = projectNumber(q.Get("project"))
			case "instance":
				name, _ = in["instanceId"].(string)
				in, _ = in["instance"].(map[string]any)
			case "service":
				name = q.Get("serviceId")
			default:
				name, _ = in["name"].(string)
			}
			if name == "" || in == nil {
				return apiError(http.StatusBadRequest, "INVALID_ARGUMENT", "the resource's name is missing")
			}
			return s.create(kind, parent, name, in)
		}
		return apiError(http.StatusMethodNotAllowed, "INVALID_ARGUMENT", "method %s", r.Method)
	}
	full := parent + "/" + name
	cur := s.resources[full]
	switch {
	case r.Method == http.MethodGet:
		if cur == nil {
			return notFound(kind, full)
		}
		return http.StatusOK, clone(cur)
	case r.Method == http.MethodPut && (kind == "topic" || kind == "subscription"):
		if cur != nil {
			return apiError(http.StatusConflict, "ALREADY_EXISTS", "Resource already exists in the project (resource=%s).", name)
		}
		return s.create(kind, parent, name, in)
	case r.Method == http.MethodDelete:
		if cur == nil {
			return notFound(kind, full)
		}
		delete(s.resources, full)
		return s.done(kind, full, map[string]any{})
	case cur == nil:
		return notFound(kind, full)
	case setLabels && r.Method == http.MethodPost:
		if in["labelFingerprint"] != cur["labelFingerprint"] {
			return apiError(http.StatusPreconditionFailed, "FAILED_PRECONDITION", "Labels fingerprint either invalid or resource labels have changed")
		}
		cur["labels"] = in["labels"]
		cur["labelFingerprint"] = fingerprint(in["labels"])
		return s.done(kind, full, cur)
	case r.Method == http.MethodPatch:
		fields, mask := in, ""
		switch kind {
		case "topic", "subscription":
			fields, _ = in[kind].(map[string]any)
			mask, _ = in["updateMask"].(string)
		case "instance":
			fields, _ = in["instance"].(map[string]any)
			mask, _ = in["fieldMask"].(string)
		}
		if mask != "" {
			for _, f := range strings.Split(mask, ",") {
				if v, ok := fields[f]; ok {
					cur[f] = v
				} else {
					delete(cur, f)
				}
			}
		} else {
			for k, v := range fields {
				cur[k] = v
			}
		}
		if kind == "service" {
			cur["generation"] = fmt.Sprint(s.next())
		}
		return s.done(kind, full, cur)
	}
	return apiError(http.StatusMethodNotAllowed, "INVALID_ARGUMENT", "method %s", r.Method)
}

func notFound(kind, full string) (int, any) {
	return apiError(http.StatusNotFound, "NOT_FOUND", "%s not found: %s", kind, full)
}

func (s *Server) next() int {
	s.serial++
	return s.serial
}

// create stores a resource with what the API adds to it.
func (s *Server) create(kind, parent, name string, in map[string]any) (int, any) {
	full := parent + "/" + name
	if s.resources[full] != nil {
		return apiError(http.StatusConflict, "ALREADY_EXISTS", "%s already exists: %s", kind, full)
	}
	res := clone(in)
	n := s.next()
	switch kind {
	case "topic", "instance", "service":
		res["name"] = full
	case "subscription":
		res["name"] = full
		setDefault(res, "ackDeadlineSeconds", 10)
		setDefault(res, "messageRetentionDuration", "604800s")
		setDefault(res, "pushConfig", map[string]any{})
	case "bucket":
		res["name"], res["id"] = name, name
		res["kind"] = "storage#bucket"
		res["selfLink"] = "https://www.googleapis.com/storage/v1/b/" + name
		setDefault(res, "location", "US")
		setDefault(res, "storageClass", "STANDARD")
		res["timeCreated"] = "2026-01-01T00:00:00.000Z"
		res["metageneration"] = "1"
	case "address", "forwardingRule":
		res["name"] = name
		res["id"] = fmt.Sprint(4000000000000000000 + n)
		res["kind"] = "compute#" + kind
		region := parent[:strings.LastIndex(parent, "/")]
		res["region"] = "https://www.googleapis.com/compute/v1/" + region
		res["selfLink"] = "https://www.googleapis.com/compute/v1/" + full
		res["creationTimestamp"] = "2026-01-01T00:00:00.000-07:00"
		res["labelFingerprint"] = fingerprint(res["labels"])
		if kind == "address" {
			setDefault(res, "address", fmt.Sprintf("203.0.113.%d", n%250+1))
			setDefault(res, "addressType", "EXTERNAL")
			setDefault(res, "networkTier", "PREMIUM")
			res["status"] = "RESERVED"
		} else {
			setDefault(res, "IPAddress", fmt.Sprintf("198.51.100.%d", n%250+1))
			setDefault(res, "IPProtocol", "TCP")
		}
	}
	switch kind {
	case "instance":
		res["state"] = "READY"
		if nc, ok := res["nodeCount"].(float64); ok {
			res["processingUnits"] = nc * 1000
		}
	case "service":
		sum := sha256.Sum256([]byte(full))
		region := strings.Split(full, "/")[3]
		res["uid"] = hex.EncodeToString(sum[:8])
		res["uri"] = fmt.Sprintf("https://%s-%s-%s.a.run.app", name, hex.EncodeToString(sum[:5]), region)
		res["generation"] = "1"
		res["createTime"] = "2026-01-01T00:00:00Z"
	}
	s.resources[full] = res
	return s.done(kind, full, res)
}

// done answers a write as the API does: the resource itself (Pub/Sub,
// Cloud Storage), or an operation.
func (s *Server) done(kind, full string, res map[string]any) (int, any) {
	n := s.next()
	switch kind {
	case "address", "forwardingRule":
		project := strings.Split(full, "/")[1]
		region := strings.Split(full, "/")[3]
		name := fmt.Sprintf("operation-%d", n)
		op := map[string]any{"kind": "compute#operation", "name": name, "status": "RUNNING", "targetLink": "https://www.googleapis.com/compute/v1/" + full,
			"selfLink": fmt.Sprintf("https://www.googleapis.com/compute/v1/projects/%s/regions/%s/operations/%s", project, region, name)}
		s.ops[fmt.Sprintf("/compute/v1/projects/%s/regions/%s/operations/%s", project, region, name)] = clone(op)
		return http.StatusOK, op
	case "service":
		parts := strings.Split(full, "/")
		name := fmt.Sprintf("projects/%s/locations/%s/operations/op-%d", parts[1], parts[3], n)
		op := map[string]any{"name": name, "done": false, "metadata": map[string]any{"@type": "type.googleapis.com/google.cloud.run.v2.Service"}}
		final := clone(op)
		final["response"] = clone(res)
		s.ops["/v2/"+name] = final
		return http.StatusOK, op
	case "instance":
		name := full + fmt.Sprintf("/operations/op-%d", n)
		return http.StatusOK, map[string]any{"name": name, "done": true, "response": clone(res)}
	}
	return http.StatusOK, clone(res)
}

// projectNumber stands for a project's number in a bucket.
func projectNumber(project string) string {
	sum := sha256.Sum256([]byte(project))
	return fmt.Sprint(uint64(sum[0])<<16 | uint64(sum[1])<<8 | uint64(sum[2]))
}

func fingerprint(labels any) string {
	b, _ := json.Marshal(labels)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

func setDefault(m map[string]any, k string, v any) {
	if _, ok := m[k]; !ok {
		m[k] = v
	}
}

func clone(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	b, _ := json.Marshal(m)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
