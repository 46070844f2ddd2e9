package kubectlcaptf

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/captf/api/v1alpha1"
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

// TestWaitingRows: a TerraformMachine's plan, which counts a replacement
// as an add and a destroy, is listed with its replacements apart, as a
// TerraformPlan's summary counts them; the approving command names the
// annotation of the plan's reason.
func TestWaitingRows(t *testing.T) {
	created := metav1.NewTime(now.Add(-2 * time.Minute))
	m := &infrav1.TerraformMachine{ObjectMeta: metav1.ObjectMeta{Name: "demo-node-0", Namespace: "infra"}}
	m.Status.Plan = &infrav1.PlanStatus{
		PlanHash: "p2:" + strings.Repeat("ab", 32), InputsHash: "h2:" + strings.Repeat("cd", 32),
		Add: 2, Change: 1, Destroy: 1, OutputChanges: 1, CreatedAt: created, Reason: infrav1.ReasonDestructive,
		Resources: []string{"aws_instance.node (replace)", "aws_eip.node (create)", "aws_route53_record.node (update)"},
	}
	row := machineRow(m, now)
	want := waitingRow{Namespace: "infra", Name: "demo-node-0", Kind: "TerraformMachine", Target: "demo-node-0",
		Reason: infrav1.ReasonDestructive, Created: created.UTC(), Age: "2m",
		Counts: counts{Create: 1, Update: 1, Replace: 1}, Outputs: 1, Path: "/machines/infra/demo-node-0"}
	if diff := cmp.Diff(want, row); diff != "" {
		t.Errorf("machineRow (-want +got):\n%s", diff)
	}
	if got, want := newMachinePage(m, now).Command, "kubectl annotate terraformmachine demo-node-0 -n infra captf.io/approve-destructive-plan=p2:"+strings.Repeat("ab", 32)+" --overwrite"; got != want {
		t.Errorf("the machine's command is %q, want %q", got, want)
	}

	plans := examplePlans()
	var all []infrav1.TerraformPlan
	for _, p := range plans {
		all = append(all, *p)
	}
	page := newPlanPage(plans[0], all, now)
	if page.Command != "kubectl captf approve demo-3f9a1c07be -n default --plan-hash "+plans[0].Spec.PlanHash || !page.Approvable {
		t.Errorf("the pending plan's page: command %q, approvable %v", page.Command, page.Approvable)
	}
	var recent []string
	for _, r := range page.Recent {
		recent = append(recent, r.Name+" "+string(r.Phase))
	}
	if diff := cmp.Diff([]string{"demo-3f9a1c07be Pending", "demo-0a0b0c0d0e Superseded"}, recent); diff != "" {
		t.Errorf("recent plans of TerraformCluster/demo, newest first (-want +got):\n%s", diff)
	}
	if page.Resources[0].Address != "aws_instance.control_plane" || !page.Resources[0].Destructive || page.Destructive != 1 {
		t.Errorf("the destructive row is not first: %+v", page.Resources)
	}
	if newPlanPage(plans[2], all, now).Approvable {
		t.Error("a superseded plan's page offers Approve")
	}
}

// TestMachineApply: a machine's page shows the apply Job status names,
// the one that runs or else the last, never a drift check's; and how it
// stands from the last run.
func TestMachineApply(t *testing.T) {
	const hash = "p2:ab"
	active := &infrav1.ActiveJob{Name: "m-apply-2", Operation: infrav1.OperationApply}
	applied := &infrav1.RunStatus{Job: "m-apply-1", Operation: infrav1.OperationApply, Succeeded: true}
	cases := []struct {
		reason     string
		active     *infrav1.ActiveJob
		last       *infrav1.RunStatus
		job, state string
	}{
		{reason: "nothing ran", job: ""},
		{reason: "a drift check runs", active: &infrav1.ActiveJob{Name: "m-drift", Operation: infrav1.OperationDrift}, last: applied, job: ""},
		{reason: "a drift check ran last", last: &infrav1.RunStatus{Job: "m-drift", Operation: infrav1.OperationDrift}, job: ""},
		{reason: "the apply runs", active: active, last: applied, job: "m-apply-2", state: "Approved: the apply of p2:ab runs."},
		{reason: "the apply succeeded", last: applied, job: "m-apply-1", state: "Applied: the apply of p2:ab planned exactly the approved changes and applied them."},
		{reason: "the plan moved", last: &infrav1.RunStatus{Job: "m-apply-1", Operation: infrav1.OperationApply, Error: &infrav1.RunError{Kind: infrav1.ErrorKindPlanChanged}},
			job: "m-apply-1", state: "Failed: the apply of p2:ab found other changes than the approved ones and applied nothing."},
		{reason: "the apply failed", last: &infrav1.RunStatus{Job: "m-apply-1", Operation: infrav1.OperationApply, Error: &infrav1.RunError{Kind: "failed"}},
			job: "m-apply-1", state: "Failed: the apply of p2:ab did not succeed; the machine's conditions say why."},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			m := &infrav1.TerraformMachine{}
			m.Status.ActiveJob, m.Status.LastRun = tc.active, tc.last
			job := machineApplyJob(m)
			if job != tc.job {
				t.Fatalf("machineApplyJob = %q, want %q", job, tc.job)
			}
			if job == "" {
				return
			}
			if got := applyStatus(m, job, hash); got != tc.state {
				t.Errorf("applyStatus = %q, want %q", got, tc.state)
			}
		})
	}
}
