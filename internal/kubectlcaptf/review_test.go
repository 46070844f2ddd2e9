package kubectlcaptf

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseResources(t *testing.T) {
	got := parseResources([]string{
		"aws_lb.api (update)",
		"data.aws_ami.ubuntu (read)",
		"module.net.aws_subnet.a[\"x (y)\"] (create, import)",
		"aws_instance.control_plane (replace)",
		"terraform_data.old (delete)",
		"google_compute_instance.vm (moved from google_compute_instance.old)",
	})
	want := []resourceRow{
		{Address: "aws_instance.control_plane", Labels: "replace", Action: "replace", Provider: "aws", Destructive: true},
		{Address: "terraform_data.old", Labels: "delete", Action: "delete", Provider: "terraform", Destructive: true},
		{Address: "aws_lb.api", Labels: "update", Action: "update", Provider: "aws"},
		{Address: "data.aws_ami.ubuntu", Labels: "read", Action: "read", Provider: "aws"},
		{Address: "module.net.aws_subnet.a[\"x (y)\"]", Labels: "create, import", Action: "create", Provider: "aws"},
		{Address: "google_compute_instance.vm", Labels: "moved from google_compute_instance.old", Action: "moved from google_compute_instance.old", Provider: "google"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parseResources (-want +got):\n%s", diff)
	}
}

// TestReviewGuard: the server refuses, before any handler runs (the
// server has no API client here), a request for another Host, from another
// Origin or site, without the token, and a change without the CSRF token;
// every answer carries the Content-Security-Policy.
func TestReviewGuard(t *testing.T) {
	s, err := newReviewServer(nil, "default", "alice", "127.0.0.1:8765", nil)
	if err != nil {
		t.Fatal(err)
	}
	h := s.Handler()
	const self = "http://127.0.0.1:8765"
	approve := "/plans/default/demo-1/approve?token=" + s.token
	form := func(csrf string) string { return url.Values{"csrf": {csrf}, "plan-hash": {"p2:00"}}.Encode() }
	cases := []struct {
		reason, method, target, host, body string
		headers                            map[string]string
		want                               string
	}{
		{reason: "no token", target: "/", want: "lacks the token"},
		{reason: "a wrong token", target: "/?token=" + strings.Repeat("A", 43), want: "lacks the token"},
		{reason: "the token of a static file is checked too", target: "/static/review.js", want: "lacks the token"},
		{reason: "a rebound DNS name", target: "/?token=" + s.token, host: "evil.example:8765", want: "not to Host evil.example:8765"},
		{reason: "localhost is another origin", target: "/?token=" + s.token, host: "localhost:8765", want: "not to Host localhost:8765"},
		{reason: "a foreign Origin", target: "/?token=" + s.token, headers: map[string]string{"Origin": "http://evil.example"}, want: "another origin"},
		{reason: "a cross-site fetch", target: "/?token=" + s.token, headers: map[string]string{"Sec-Fetch-Site": "cross-site"}, want: "another site"},
		{reason: "a POST without Origin", method: "POST", target: approve, body: form(s.csrf), want: "needs the form of this page"},
		{reason: "a POST without the CSRF token", method: "POST", target: approve, body: form(""), headers: map[string]string{"Origin": self}, want: "needs the form of this page"},
		{reason: "a POST with the URL token as CSRF token", method: "POST", target: approve, body: form(s.token), headers: map[string]string{"Origin": self}, want: "needs the form of this page"},
		{reason: "a POST from a foreign Origin with the CSRF token", method: "POST", target: approve, body: form(s.csrf), headers: map[string]string{"Origin": "http://evil.example"}, want: "another origin"},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			r := httptest.NewRequest(or(tc.method, "GET"), tc.target, strings.NewReader(tc.body))
			r.Host = or(tc.host, "127.0.0.1:8765")
			if tc.body != "" {
				r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			}
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), tc.want) {
				t.Errorf("%s %s: %d %q, want 403 with %q", r.Method, tc.target, w.Code, w.Body.String(), tc.want)
			}
			if csp := w.Header().Get("Content-Security-Policy"); csp != contentSecurityPolicy {
				t.Errorf("Content-Security-Policy %q", csp)
			}
		})
	}

	// With the token, from its own origin, a static file is served.
	r := httptest.NewRequest("GET", "/static/review.js?token="+s.token, nil)
	r.Host = "127.0.0.1:8765"
	r.Header.Set("Sec-Fetch-Site", "same-origin")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "EventSource") || w.Header().Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("GET /static/review.js with the token: %d %.80q %v", w.Code, w.Body.String(), w.Header())
	}
}

func TestListenLoopback(t *testing.T) {
	for _, address := range []string{"0.0.0.0:0", ":0", "192.0.2.1:0", "localhost:0", "example.com:80"} {
		if l, err := listenLoopback(address); err == nil {
			l.Close()
			t.Errorf("listenLoopback(%q) listened on %s, want an error", address, l.Addr())
		}
	}
	l, err := listenLoopback("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
