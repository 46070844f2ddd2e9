package gcp

// The tests in this file run the capability against
// internal/preview/gcp/gcptest, a test server in the shapes of Google's
// REST API reference, for the kinds no emulator here serves: Compute
// Engine addresses and forwarding rules and Cloud Run services (no
// emulator of either API is installable on the machines captf is built
// on). It is not Google. Pub/Sub, Cloud Storage and Spanner are tested
// against their real emulators in emulator_test.go.

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/captf/captf/internal/preview"
	"github.com/captf/captf/internal/preview/gcp/gcptest"
	"github.com/captf/captf/internal/preview/previewtest"
	"github.com/captf/captf/pkg/changeset"
)

// canary is the access token: every request carries it, and it must
// appear in no plan, error, output, document or note.
const canary = "CANARY-GCP-TOKEN-5e0b"

const computeManifest = `apiVersion: compute.cnrm.cloud.google.com/v1beta1
kind: ComputeAddress
metadata:
  name: web-ip
  labels:
    team: web
spec:
  location: us-central1
  addressType: EXTERNAL
  description: the web front's address
---
apiVersion: compute.cnrm.cloud.google.com/v1beta1
kind: ComputeForwardingRule
metadata:
  name: web-lb
spec:
  location: us-central1
  ipProtocol: TCP
  portRange: "443"
  loadBalancingScheme: EXTERNAL
---
apiVersion: run.cnrm.cloud.google.com/v1beta1
kind: RunService
metadata:
  name: api
spec:
  location: us-central1
  ingress: INGRESS_TRAFFIC_ALL
  template:
    containers:
      - image: us-docker.pkg.dev/cloudrun/container/hello:v1
`

const (
	addressAddress = "ComputeAddress/proj-a/us-central1/web-ip"
	ruleAddress    = "ComputeForwardingRule/proj-a/us-central1/web-lb"
	serviceAddress = "RunService/proj-a/us-central1/api"
	addressName    = "projects/proj-a/regions/us-central1/addresses/web-ip"
	ruleName       = "projects/proj-a/regions/us-central1/forwardingRules/web-lb"
	serviceName    = "projects/proj-a/locations/us-central1/services/api"
)

// step is one gcp-apply step over main.yaml, which the test rewrites.
type step struct {
	t      *testing.T
	root   string
	inputs map[string]any
	key    []byte
	cap    *Capability
	// texts are everything the capability returned, for the canary check.
	texts []string
}

func newStep(t *testing.T, endpoint, manifest string) *step {
	t.Helper()
	t.Setenv(TokenEnv, canary)
	for _, k := range []string{EndpointEnv, ProjectEnv, CloudProjectEnv} {
		t.Setenv(k, "")
	}
	s := &step{t: t, root: t.TempDir(), key: previewtest.Key(), cap: &Capability{Poll: time.Millisecond},
		inputs: map[string]any{"manifest": "main.yaml", "endpoint": endpoint, "project": "proj-a"}}
	s.write(manifest)
	t.Cleanup(s.checkCanary)
	return s
}

func (s *step) write(manifest string) {
	s.t.Helper()
	if err := os.WriteFile(filepath.Join(s.root, "main.yaml"), []byte(manifest), 0o600); err != nil {
		s.t.Fatal(err)
	}
}

// edit replaces old with new in main.yaml.
func (s *step) edit(old, new string) {
	s.t.Helper()
	b, err := os.ReadFile(filepath.Join(s.root, "main.yaml"))
	if err != nil {
		s.t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		s.t.Fatalf("main.yaml does not hold %q", old)
	}
	s.write(strings.Replace(string(b), old, new, 1))
}

func (s *step) req() preview.Request {
	in := map[string]any{}
	for k, v := range s.inputs {
		in[k] = v
	}
	return preview.Request{Component: "web", Environment: "test", Root: s.root, WorkDir: s.t.TempDir(), Inputs: in, Key: s.key}
}

func (s *step) keep(v any, err error) {
	b, _ := json.Marshal(v)
	s.texts = append(s.texts, string(b))
	if p, ok := v.(*preview.Plan); ok && p != nil {
		doc := &changeset.Document{Version: changeset.Version, Members: []changeset.Member{p.Member}, Entries: p.Entries}
		s.texts = append(s.texts, changeset.Note(doc, changeset.NoteOptions{}))
	}
	if err != nil {
		s.texts = append(s.texts, err.Error())
	}
}

func (s *step) plan() *preview.Plan {
	s.t.Helper()
	p, err := s.cap.Plan(context.Background(), s.req())
	s.keep(p, err)
	if err != nil {
		s.t.Fatal(err)
	}
	return p
}

func (s *step) apply(approved *preview.Plan) (preview.Outputs, error) {
	s.t.Helper()
	out, err := s.cap.Apply(context.Background(), s.req(), approved)
	s.keep(out, err)
	return out, err
}

func (s *step) deploy() preview.Outputs {
	s.t.Helper()
	out, err := s.apply(s.plan())
	if err != nil {
		s.t.Fatal(err)
	}
	return out
}

func (s *step) checkCanary() {
	for _, text := range s.texts {
		if strings.Contains(text, canary) {
			s.t.Errorf("the access token shows in %s", text)
		}
	}
}

// actions is each entry as "action address".
func actions(p *preview.Plan) []string {
	var out []string
	for _, e := range p.Entries {
		out = append(out, e.Action+" "+e.Address)
	}
	return out
}

// attributes is each attribute of the entry at address as
// "name: before → after".
func attributes(p *preview.Plan, address string) []string {
	var out []string
	for _, e := range p.Entries {
		if e.Address != address {
			continue
		}
		for _, a := range e.Attributes {
			out = append(out, a.Name+": "+string(a.Before)+" → "+string(a.After))
		}
	}
	return out
}

func holes(p *preview.Plan) []string {
	var out []string
	for _, h := range p.Member.Holes {
		out = append(out, h.Address+": "+h.Reason)
	}
	return out
}

func outputs(o preview.Outputs) map[string]string {
	out := map[string]string{}
	for k, v := range o {
		out[k] = string(v)
	}
	return out
}

func TestCreateNoOpAndOutputs(t *testing.T) {
	srv := gcptest.New(t)
	s := newStep(t, srv.URL, computeManifest)

	p := s.plan()
	if diff := cmp.Diff([]string{"create " + addressAddress, "create " + ruleAddress, "create " + serviceAddress}, actions(p)); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{
		`addressType:  → "EXTERNAL"`,
		`description:  → "the web front's address"`,
		`labels:  → {"captf-stack":"web","managed-by":"captf","team":"web"}`,
	}, attributes(p, addressAddress)); diff != "" {
		t.Errorf("the address's create (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"IPProtocol", "labels", "loadBalancingScheme", "portRange"}, names(p, ruleAddress)); diff != "" {
		t.Errorf("the forwarding rule's fields, renamed as the API names them (-want +got):\n%s", diff)
	}
	if p.Member.Name != "web" || p.Member.Capability != Kind || !strings.HasPrefix(p.Member.PlanDigest, DigestPrefix) || len(p.Member.Holes) != 0 {
		t.Errorf("member %+v", p.Member)
	}
	if diff := cmp.Diff([]string{"api" + "Uri", "web-ipAddress", "web-lbIpAddress"}, p.DeclaredOutputs); diff != "" {
		t.Errorf("declared outputs (-want +got):\n%s", diff)
	}
	if len(p.PlannedOutputs) != 0 {
		t.Errorf("a created resource's output is known before apply: %v", p.PlannedOutputs)
	}
	if w := srv.Writes(); len(w) != 0 {
		t.Fatalf("the plan wrote %d requests: %+v", len(w), w[0])
	}
	for _, r := range srv.Requests() {
		if r.Authorization != "Bearer "+canary {
			t.Errorf("%s %s was sent without the token", r.Method, r.Path)
		}
	}

	out, err := s.apply(p)
	if err != nil {
		t.Fatal(err)
	}
	addr := srv.Resource(addressName)
	rule := srv.Resource(ruleName)
	svc := srv.Resource(serviceName)
	if addr == nil || rule == nil || svc == nil {
		t.Fatalf("not created: address %v, rule %v, service %v", addr, rule, svc)
	}
	if diff := cmp.Diff(map[string]any{"team": "web", ManagedByLabel: ManagedByValue, StackLabel: "web"}, addr["labels"]); diff != "" {
		t.Errorf("the address's labels (-want +got):\n%s", diff)
	}
	if rule["IPProtocol"] != "TCP" || rule["portRange"] != "443" {
		t.Errorf("forwarding rule %v", rule)
	}
	want := map[string]string{
		"apiUri":          `"` + svc["uri"].(string) + `"`,
		"web-ipAddress":   `"` + addr["address"].(string) + `"`,
		"web-lbIpAddress": `"` + rule["IPAddress"].(string) + `"`,
	}
	if diff := cmp.Diff(want, outputs(out)); diff != "" {
		t.Errorf("outputs after apply (-want +got):\n%s", diff)
	}

	// Planned again: every resource holds what the manifest sets, though
	// the API added ids, self links, defaults and the region as a URL.
	again := s.plan()
	if diff := cmp.Diff([]string{"no-op " + addressAddress, "no-op " + ruleAddress, "no-op " + serviceAddress}, actions(again)); diff != "" {
		t.Errorf("entries after apply (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, outputs(again.PlannedOutputs)); diff != "" {
		t.Errorf("planned outputs of resources that stay (-want +got):\n%s", diff)
	}
	got, err := s.cap.Outputs(context.Background(), s.req())
	s.keep(got, err)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, outputs(got)); diff != "" {
		t.Errorf("Outputs (-want +got):\n%s", diff)
	}
}

func names(p *preview.Plan, address string) []string {
	var out []string
	for _, e := range p.Entries {
		if e.Address == address {
			for _, a := range e.Attributes {
				out = append(out, a.Name)
			}
		}
	}
	return out
}

func TestUpdate(t *testing.T) {
	srv := gcptest.New(t)
	s := newStep(t, srv.URL, computeManifest)
	s.deploy()
	s.edit("hello:v1", "hello:v2")
	s.edit("team: web", "team: edge")
	// A forwarding rule has no in-place update: a label that differs
	// stays as it is, and the rule is a no-op.
	s.edit("name: web-lb", "name: web-lb\n  labels:\n    tier: front")

	p := s.plan()
	if diff := cmp.Diff([]string{"update " + addressAddress, "no-op " + ruleAddress, "update " + serviceAddress}, actions(p)); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{
		`labels: {"captf-stack":"web","managed-by":"captf","team":"web"} → {"captf-stack":"web","managed-by":"captf","team":"edge"}`,
	}, attributes(p, addressAddress)); diff != "" {
		t.Errorf("the address's update: only the top-level field that differs, live before, manifest after (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{
		`template: {"containers":[{"image":"us-docker.pkg.dev/cloudrun/container/hello:v1"}]} → {"containers":[{"image":"us-docker.pkg.dev/cloudrun/container/hello:v2"}]}`,
	}, attributes(p, serviceAddress)); diff != "" {
		t.Errorf("the service's update (-want +got):\n%s", diff)
	}
	before := len(srv.Requests())
	if _, err := s.apply(p); err != nil {
		t.Fatal(err)
	}
	var writes []string
	for _, r := range srv.Requests()[before:] {
		if r.Method != http.MethodGet {
			writes = append(writes, r.Method+" "+r.Path)
		}
	}
	if diff := cmp.Diff([]string{
		"POST /compute/v1/" + addressName + "/setLabels",
		"PATCH /v2/" + serviceName,
	}, writes); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	if l := srv.Resource(addressName)["labels"].(map[string]any); l["team"] != "edge" {
		t.Errorf("address labels %v", l)
	}
	if _, ok := srv.Resource(ruleName)["labels"].(map[string]any)["tier"]; ok {
		t.Error("the forwarding rule was updated")
	}
	c := srv.Resource(serviceName)["template"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	if c["image"] != "us-docker.pkg.dev/cloudrun/container/hello:v2" {
		t.Errorf("service image %v", c["image"])
	}
	if diff := cmp.Diff([]string{"no-op " + addressAddress, "no-op " + ruleAddress, "no-op " + serviceAddress}, actions(s.plan())); diff != "" {
		t.Errorf("entries after the update (-want +got):\n%s", diff)
	}
}

func TestHoles(t *testing.T) {
	srv := gcptest.New(t)
	s := newStep(t, srv.URL, computeManifest)
	s.deploy()
	// A compute field that cannot change in place, a kind with no
	// mapping, and a read that is neither 200 nor 404.
	s.edit("addressType: EXTERNAL", "addressType: INTERNAL")
	s.edit("hello:v1", "hello:v2")
	s.write(readFile(t, s.root, "main.yaml") + `---
apiVersion: iam.cnrm.cloud.google.com/v1beta1
kind: IAMPolicyMember
metadata:
  name: api-invoker
spec:
  member: allUsers
  role: roles/run.invoker
`)
	srv.Fail(gcptest.Fault{Method: http.MethodGet, PathSuffix: "/services/api", HTTP: 503, Status: "UNAVAILABLE", Message: "The service is currently unavailable."})

	p := s.plan()
	if diff := cmp.Diff([]string{"no-op " + ruleAddress}, actions(p)); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{
		addressAddress + ": replace required: addressType cannot change in place; the apply leaves the resource alone",
		serviceAddress + ": read " + serviceAddress + ": HTTP 503 UNAVAILABLE: The service is currently unavailable.; it cannot say whether the resource is there, and the apply leaves it alone",
		"IAMPolicyMember/api-invoker: IAMPolicyMember has no REST mapping in captf (iam.cnrm.cloud.google.com/v1beta1); the apply skips it",
	}, holes(p)); diff != "" {
		t.Errorf("holes (-want +got):\n%s", diff)
	}
	before := srv.State()
	if _, err := s.apply(p); err != nil {
		t.Fatal(err)
	}
	if after := srv.State(); after != before {
		t.Errorf("the apply wrote a resource it has a hole for:\nbefore %s\nafter  %s", before, after)
	}
}

func readFile(t *testing.T, root, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestMovedRefusesAndWritesNothing(t *testing.T) {
	srv := gcptest.New(t)
	s := newStep(t, srv.URL, computeManifest)
	s.deploy()
	s.edit("hello:v1", "hello:v2")
	approved := s.plan()

	cases := []struct {
		name string
		move func() (undo func())
	}{
		{"the live side drifted", func() func() {
			srv.Edit(serviceName, func(r map[string]any) { r["ingress"] = "INGRESS_TRAFFIC_INTERNAL_ONLY" })
			return func() { srv.Edit(serviceName, func(r map[string]any) { r["ingress"] = "INGRESS_TRAFFIC_ALL" }) }
		}},
		{"a field the manifest sets drifted", func() func() {
			srv.Edit(addressName, func(r map[string]any) { r["description"] = "changed by hand" })
			return func() { srv.Edit(addressName, func(r map[string]any) { r["description"] = "the web front's address" }) }
		}},
		{"the manifest", func() func() {
			s.edit("portRange: \"443\"", "portRange: \"443\"\n  # a comment moves the bytes")
			return func() { s.edit("\n  # a comment moves the bytes", "") }
		}},
		{"the preview key", func() func() {
			old := s.key
			s.key = []byte("another-preview-key-of-32-bytes!")
			return func() { s.key = old }
		}},
		{"the project override", func() func() {
			s.inputs["project"] = "proj-b"
			return func() { s.inputs["project"] = "proj-a" }
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			undo := c.move()
			defer undo()
			before, writes := srv.State(), len(srv.Writes())
			_, err := s.apply(approved)
			if !errors.Is(err, preview.ErrMoved) || !strings.Contains(err.Error(), "refusing to apply") || !strings.Contains(err.Error(), approved.Member.PlanDigest) {
				t.Fatalf("apply: %v", err)
			}
			if len(srv.Writes()) != writes || srv.State() != before {
				t.Error("a refused apply wrote something")
			}
		})
	}
	if _, err := s.apply(approved); err != nil {
		t.Fatalf("the approved plan, with every move undone: %v", err)
	}
}

func TestPrune(t *testing.T) {
	srv := gcptest.New(t)
	s := newStep(t, srv.URL, computeManifest)
	s.deploy()
	// Another stack's address, and one captf did not create, in the same
	// region: prune never touches them.
	other := newStep(t, srv.URL, strings.Replace(computeManifest[:strings.Index(computeManifest, "---")], "web-ip", "other-ip", 1))
	other.inputs["stack"] = "other"
	other.deploy()
	srv.Edit("projects/proj-a/regions/us-central1/addresses/other-ip", func(map[string]any) {})
	// web-ip was labelled before captf named itself in managed-by: prune
	// still takes it as captf's.
	srv.Edit(addressName, func(r map[string]any) { r["labels"].(map[string]any)[ManagedByLabel] = "chant" })
	// web-ip is dropped, web-ip2 keeps ComputeAddress a manifested kind:
	// prune deletes only resources of the kinds the manifest declares.
	s.edit("name: web-ip", "name: web-ip2")

	if got := actions(s.plan()); len(got) != 3 {
		t.Errorf("without prune: %v", got)
	}
	s.inputs["prune"] = true
	p := s.plan()
	if diff := cmp.Diff([]string{"create ComputeAddress/proj-a/us-central1/web-ip2", "no-op " + ruleAddress, "no-op " + serviceAddress, "delete " + addressAddress}, actions(p)); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	if w := srv.Writes(); len(w) != 0 && w[len(w)-1].Method == http.MethodDelete {
		t.Fatal("the plan deleted")
	}
	if _, err := s.apply(p); err != nil {
		t.Fatal(err)
	}
	if srv.Resource(addressName) != nil {
		t.Error("the dropped address is still there")
	}
	if srv.Resource("projects/proj-a/regions/us-central1/addresses/other-ip") == nil {
		t.Error("prune deleted another stack's address")
	}
	if diff := cmp.Diff([]string{"no-op ComputeAddress/proj-a/us-central1/web-ip2", "no-op " + ruleAddress, "no-op " + serviceAddress}, actions(s.plan())); diff != "" {
		t.Errorf("after the prune (-want +got):\n%s", diff)
	}
}

func TestProjectResolution(t *testing.T) {
	const doc = `apiVersion: compute.cnrm.cloud.google.com/v1beta1
kind: ComputeAddress
metadata:
  name: ip
%s
spec:
  location: europe-west1
%s`
	const annotation = "  annotations:\n    cnrm.cloud.google.com/project-id: from-annotation"
	const projectRef = "  projectRef:\n    external: projects/from-ref"
	cases := []struct {
		name                  string
		step, annotation, ref string
		gcpProject, cloudProj string
		want                  string
		wantErr               string
	}{
		{name: "the step's project first", step: "from-step", annotation: annotation, ref: projectRef, gcpProject: "from-env", cloudProj: "from-cloud", want: "from-step"},
		{name: "then spec.projectRef.external", annotation: annotation, ref: projectRef, gcpProject: "from-env", cloudProj: "from-cloud", want: "from-ref"},
		{name: "then the annotation", annotation: annotation, gcpProject: "from-env", cloudProj: "from-cloud", want: "from-annotation"},
		{name: "then GCP_PROJECT_ID", gcpProject: "from-env", cloudProj: "from-cloud", want: "from-env"},
		{name: "then GOOGLE_CLOUD_PROJECT", cloudProj: "from-cloud", want: "from-cloud"},
		{name: "none", wantErr: "ComputeAddress ip has no project"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := gcptest.New(t)
			s := newStep(t, srv.URL, "")
			s.write(strings.Replace(strings.Replace(doc, "%s", c.annotation, 1), "%s", c.ref, 1))
			s.inputs["project"] = c.step
			t.Setenv(ProjectEnv, c.gcpProject)
			t.Setenv(CloudProjectEnv, c.cloudProj)
			p, err := s.cap.Plan(context.Background(), s.req())
			s.keep(p, err)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{"create ComputeAddress/" + c.want + "/europe-west1/ip"}, actions(p)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if r := srv.Requests(); len(r) != 1 || r[0].Path != "/compute/v1/projects/"+c.want+"/regions/europe-west1/addresses/ip" {
				t.Errorf("requests %+v", r)
			}
		})
	}
}

func TestWaitingInputsAndKey(t *testing.T) {
	srv := gcptest.New(t)
	s := newStep(t, srv.URL, computeManifest)
	req := s.req()
	delete(req.Inputs, "project")
	req.Missing = []string{"network", "network"}
	p, err := s.cap.Plan(context.Background(), req)
	s.keep(p, err)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{": inputs from network; re-checked on apply"}, holes(p)); diff != "" {
		t.Errorf("holes (-want +got):\n%s", diff)
	}
	if len(p.Entries) != 0 || len(srv.Requests()) != 0 || len(p.DeclaredOutputs) != 3 {
		t.Errorf("a step waiting on inputs: entries %v, %d requests, declared %v", p.Entries, len(srv.Requests()), p.DeclaredOutputs)
	}
	if _, err := s.cap.Apply(context.Background(), req, p); err == nil || !strings.Contains(err.Error(), "nothing was applied") {
		t.Errorf("apply with missing inputs: %v", err)
	}

	s.key = []byte("short")
	_, err = s.cap.Plan(context.Background(), s.req())
	if !errors.Is(err, preview.ErrShortKey) || len(srv.Requests()) != 0 {
		t.Errorf("a short key: %v, %d requests", err, len(srv.Requests()))
	}
}

func TestInputs(t *testing.T) {
	t.Setenv(EndpointEnv, "")
	for _, c := range []struct {
		in      map[string]any
		wantErr string
	}{
		{map[string]any{}, "input manifest: missing"},
		{map[string]any{"manifest": "m.yaml", "prune": "yes"}, "input prune: must be true or false, not a string"},
		{map[string]any{"manifest": "m.yaml", "region": "x"}, "input region: unknown input (known: manifest, stack, endpoint, project, prune)"},
		{map[string]any{"manifest": "m.yaml", "stack": "Web"}, `input stack "Web" is not a label value`},
		{map[string]any{"manifest": "m.yaml", "endpoint": "ftp://x"}, `input endpoint (or GCP_ENDPOINT_URL): "ftp://x" is not an http or https URL`},
	} {
		if _, err := parseInputs("web", c.in); err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%v: %v, want %q", c.in, err, c.wantErr)
		}
	}
	t.Setenv(EndpointEnv, "http://127.0.0.1:9/")
	in, err := parseInputs("web", map[string]any{"manifest": "m.yaml", "project": "projects/p"})
	if err != nil || in.Endpoint != "http://127.0.0.1:9" || in.Project != "p" || in.Stack != "web" {
		t.Errorf("%+v, %v", in, err)
	}
}

func TestHolds(t *testing.T) {
	var live map[string]any
	_ = json.Unmarshal([]byte(`{"region":"https://www.googleapis.com/compute/v1/projects/p/regions/r","nodeCount":1,"processingUnits":"1000","labels":{"a":"1","goog-x":"y"},"list":[{"a":1,"b":2}],`+
		`"deadLetterPolicy":{"deadLetterTopic":"projects/p/topics/dead","maxDeliveryAttempts":5},"pushConfig":{},`+
		`"template":{"containers":[{"image":"hello","resources":{"limits":{"cpu":"1000m"}}}],"maxInstanceRequestConcurrency":80}}`), &live)
	for _, c := range []struct {
		field string
		want  any
		holds bool
	}{
		{"region", "r", true},
		{"region", "projects/p/regions/r", true},
		{"region", "egions/r", false},
		{"nodeCount", int64(1), true},
		{"processingUnits", int64(1000), true},
		{"labels", map[string]any{"a": "1"}, true},
		{"labels", map[string]any{"a": "2"}, false},
		{"list", []any{map[string]any{"a": int64(1)}}, true},
		{"list", []any{}, false},
		{"absent", nil, true},
		{"absent", "x", false},
		// Google's JSON leaves a field at its default out.
		{"absent", false, true},
		{"absent", int64(0), true},
		{"absent", "", true},
		{"absent", true, false},
		{"absent", int64(5), false},
		// A subset at every depth: what the API adds below the top
		// level is no change; what the manifest sets there is compared.
		{"deadLetterPolicy", map[string]any{"deadLetterTopic": "projects/p/topics/dead"}, true},
		{"deadLetterPolicy", map[string]any{"deadLetterTopic": "projects/p/topics/dead", "maxDeliveryAttempts": int64(5)}, true},
		{"deadLetterPolicy", map[string]any{"maxDeliveryAttempts": int64(7)}, false},
		{"deadLetterPolicy", map[string]any{"deadLetterTopic": "projects/p/topics/other"}, false},
		{"pushConfig", map[string]any{}, true},
		{"pushConfig", map[string]any{"attributes": map[string]any{}}, true},
		{"pushConfig", map[string]any{"pushEndpoint": "https://x"}, false},
		{"template", map[string]any{"containers": []any{map[string]any{"image": "hello"}}}, true},
		{"template", map[string]any{"containers": []any{map[string]any{"image": "other"}}}, false},
		{"template", map[string]any{"containers": []any{map[string]any{"image": "hello"}, map[string]any{"image": "two"}}}, false},
	} {
		if got := holds(live[c.field], c.want); got != c.holds {
			t.Errorf("holds(%s, %v) = %v", c.field, c.want, got)
		}
	}
}
