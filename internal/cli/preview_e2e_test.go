package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cftypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/captf/captf/internal/gcpemu"
	"github.com/captf/captf/internal/motoserver"
	"github.com/captf/captf/internal/preview/arm"
	"github.com/captf/captf/internal/preview/arm/armtest"
	"github.com/captf/captf/internal/preview/gcp"
	"github.com/captf/captf/internal/runner"
	"github.com/captf/captf/internal/testenv"
	"github.com/captf/captf/internal/tftest"
	"github.com/captf/captf/pkg/changeset"
)

// The end-to-end test of captf preview across deploy tools (issue 5). The
// fixture testdata/e2e has a terraform root, a manifest directory, a
// CloudFormation template, an ARM template, a Config Connector manifest
// and a shell step in five components (its captf.yaml draws the wiring).
// Everything is real but ARM: terraform, git, a kube-apiserver with etcd
// (internal/testenv), a moto_server (internal/motoserver), Google's
// Pub/Sub emulator for the gcp-apply member (internal/gcpemu), the command
// line run in-process with the capabilities it registers. No ARM emulator
// runs here: the arm-deploy member deploys to
// internal/preview/arm/armtest, a test server in the shapes of ARM's REST
// API reference.

// The canaries are a terraform sensitive variable, a Kubernetes Secret's
// value, a NoEcho parameter and a securestring parameter of the fixture,
// and the access token gcp-apply sends; captf must show none.
var e2eCanaries = []string{"CANARY-TF-SENSITIVE-9e4d", "CANARY-K8S-SECRET-0a7f", "CANARY-CFN-NOECHO-51c2", "CANARY-ARM-SECURE-3d8b", "CANARY-GCP-TOKEN-2f6a"}

// e2eProject is the Google Cloud project of the fixture's events
// component, given by GCP_PROJECT_ID.
const e2eProject = "captf-e2e"

// The ARM resources of the fixture, in its resource group "storage".
var (
	e2eStorageAccount = armtest.ResourceID(armtest.Subscription, "storage", "Microsoft.Storage/storageAccounts", "captfe2estore")
	e2eSQLServer      = armtest.ResourceID(armtest.Subscription, "storage", "Microsoft.Sql/servers", "captf-e2e-sql")
)

// The namespaces the test creates: the fixture's (named by the
// environment's var, through terraform's output) and the truncation test's.
const (
	e2eNamespace = "captf-e2e"
	bigNamespace = "captf-e2e-big"
)

// e2e is the running world of the test: the servers, the repository and
// every outcome of captf, for the canary check at the end.
type e2e struct {
	kube     client.Client
	cfn      *cloudformation.Client
	arm      *armtest.Server
	pubsub   string
	root     string
	out      string
	outcomes []outcome
}

// captf runs the command line and keeps its outcome.
func (w *e2e) captf(t *testing.T, code int, args ...string) outcome {
	t.Helper()
	o := captf(t, args...)
	w.outcomes = append(w.outcomes, o)
	return o.want(t, code)
}

// edit rewrites a file of the repository by replacing old with new, and
// returns the function that puts the old text back.
func (w *e2e) edit(t *testing.T, rel, old, new string) (undo func()) {
	t.Helper()
	path := filepath.Join(w.root, rel)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s does not hold %q", rel, old)
	}
	write(t, path, []byte(strings.Replace(string(b), old, new, 1)), 0o644)
	return func() { write(t, path, b, 0o644) }
}

// world is what an apply could change, taken from the servers and the
// disk, never from captf.
type world struct {
	// State is the SHA-256 of the terraform state file.
	State string
	// Objects maps each object of the fixture to its resourceVersion.
	Objects map[string]string
	// Stack is the stack's status, last update, parameters (the NoEcho
	// one left out), the SHA-256 of its template and the change sets not
	// executed.
	Stack string
	// Marker is the shell step's marker file and its modification time.
	Marker string
	// ARM is every group and resource of the ARM test server with its
	// etag, which changes with every PUT.
	ARM string
	// PubSub is every topic and subscription of the fixture's project in
	// the Pub/Sub emulator; empty when there are none.
	PubSub string
}

func (w *e2e) world(t *testing.T) world {
	t.Helper()
	ctx := context.Background()
	var got world
	if b, err := os.ReadFile(filepath.Join(w.root, "infra/network/terraform.tfstate")); err == nil {
		got.State = sha(b)
	}
	got.Objects = map[string]string{}
	lists := map[string]client.ObjectList{"ConfigMap": &corev1.ConfigMapList{}, "Secret": &corev1.SecretList{}, "Deployment": &appsv1.DeploymentList{}}
	for kind, list := range lists {
		if err := w.kube.List(ctx, list, client.InNamespace(e2eNamespace)); err != nil {
			t.Fatal(err)
		}
		items, err := apimeta.ExtractList(list)
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range items {
			o := item.(client.Object)
			if o.GetName() != "kube-root-ca.crt" {
				got.Objects[kind+"/"+o.GetName()] = o.GetResourceVersion()
			}
		}
	}
	stacks, err := w.cfn.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String("queue")})
	if err == nil && len(stacks.Stacks) == 1 {
		s := stacks.Stacks[0]
		got.Stack = fmt.Sprintf("%s updated %v", s.StackStatus, aws.ToTime(s.LastUpdatedTime))
		for _, p := range s.Parameters {
			if aws.ToString(p.ParameterKey) != "ApiKey" {
				got.Stack += fmt.Sprintf(" %s=%s", aws.ToString(p.ParameterKey), aws.ToString(p.ParameterValue))
			}
		}
		tmpl, err := w.cfn.GetTemplate(ctx, &cloudformation.GetTemplateInput{StackName: aws.String("queue")})
		if err != nil {
			t.Fatal(err)
		}
		got.Stack += " template " + sha([]byte(aws.ToString(tmpl.TemplateBody)))
		// A plan deletes its change set; one left behind is a leak.
		sets, err := w.cfn.ListChangeSets(ctx, &cloudformation.ListChangeSetsInput{StackName: aws.String("queue")})
		if err != nil {
			t.Fatal(err)
		}
		for _, cs := range sets.Summaries {
			if cs.ExecutionStatus != cftypes.ExecutionStatusExecuteComplete {
				got.Stack += " change set " + aws.ToString(cs.ChangeSetName)
			}
		}
	}
	if info, err := os.Stat(filepath.Join(w.root, "announced.txt")); err == nil {
		b, _ := os.ReadFile(filepath.Join(w.root, "announced.txt"))
		got.Marker = fmt.Sprintf("%q at %v", b, info.ModTime().UnixNano())
	}
	got.ARM = w.arm.State()
	for _, c := range []string{"topics", "subscriptions"} {
		if list := w.pubsubGet(t, "/v1/projects/"+e2eProject+"/"+c); len(list[c].([]any)) > 0 {
			b, _ := json.Marshal(list)
			got.PubSub += string(b)
		}
	}
	return got
}

// pubsubGet reads the Pub/Sub emulator; a list with nothing in it is
// decoded as an empty list.
func (w *e2e) pubsubGet(t *testing.T, path string) map[string]any {
	t.Helper()
	resp, err := http.Get(w.pubsub + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]any{}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"topics", "subscriptions"} {
		if _, ok := out[c]; !ok && strings.HasSuffix(path, "/"+c) {
			out[c] = []any{}
		}
	}
	return out
}

// pubsubPatch changes a subscription in the emulator as someone outside
// captf would.
func (w *e2e) pubsubPatch(t *testing.T, sub string, ackDeadline int) {
	t.Helper()
	body := fmt.Sprintf(`{"subscription":{"ackDeadlineSeconds":%d},"updateMask":"ackDeadlineSeconds"}`, ackDeadline)
	req, err := http.NewRequest(http.MethodPatch, w.pubsub+"/v1/projects/"+e2eProject+"/subscriptions/"+sub, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PATCH subscription %s: %d", sub, resp.StatusCode)
	}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// startE2E starts the API server, moto_server, the ARM test server and
// the Pub/Sub emulator,
// copies the fixture into
// a git repository, creates the namespaces and points captf's
// capabilities at the servers through their usual environment variables.
// It returns with TMPDIR set to an empty directory of the test's, so that
// what captf leaves there is seen.
func startE2E(t *testing.T) *e2e {
	t.Helper()
	kube := testenv.Start(t, filepath.Join("..", ".."))
	moto, err := motoserver.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(moto.Stop)
	pubsub, err := gcpemu.StartPubSub()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pubsub.Stop)
	t.Setenv(gcp.EndpointEnv, pubsub.URL)
	t.Setenv(gcp.ProjectEnv, e2eProject)
	t.Setenv(gcp.CloudProjectEnv, "")
	t.Setenv(gcp.TokenEnv, e2eCanaries[4]) // the emulator takes any token
	kubeconfig := kube.Kubeconfig(t)
	tf := tftest.Terraform(t)
	for _, kv := range tftest.Env(t) {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	t.Setenv("PATH", filepath.Dir(tf.Path)+string(os.PathListSeparator)+os.Getenv("PATH"))
	for k, v := range motoserver.Env {
		t.Setenv(k, v)
	}
	for _, k := range motoserver.Unset {
		t.Setenv(k, "") // restored when the test ends
		if err := os.Unsetenv(k); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("AWS_ENDPOINT_URL", moto.URL)
	t.Setenv("KUBECONFIG", kubeconfig)
	azure := armtest.New(t)
	t.Setenv(arm.EndpointEnv, azure.URL)
	t.Setenv(arm.SubscriptionEnv, armtest.Subscription)
	t.Setenv(arm.TokenEnv, "") // restored when the test ends
	if err := os.Unsetenv(arm.TokenEnv); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{e2eNamespace, bigNamespace} {
		if err := kube.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	w := &e2e{
		kube:   kube.Client,
		arm:    azure,
		pubsub: pubsub.URL,
		cfn:    cloudformation.NewFromConfig(cfg, func(o *cloudformation.Options) { o.BaseEndpoint = aws.String(moto.URL) }),
	}
	w.root = fixtureRepo(t, "testdata/e2e")
	w.out = filepath.Join(w.root, ".captf", "preview")
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	return w
}

// normalise replaces what varies between runs in a note: digests (the
// kubectl digest covers the API server's URL, whose port is random, and
// every digest above it moves with it) and the repository's path.
func (w *e2e) normalise(note string) string {
	note = regexp.MustCompile(`\b(cs1|tf2|k8s1|cfn1|arm1|gcp1|cd1):[0-9a-f]{64}\b`).ReplaceAllString(note, "$1:<digest>")
	return strings.ReplaceAll(note, w.root, "<root>")
}

// counts is each member's row of the note's table as "name status c/u/r/d".
func counts(doc *changeset.Document) []string {
	var out []string
	for _, c := range doc.Summarize().Members {
		n := "?"
		if c.Known {
			n = fmt.Sprintf("%d/%d/%d/%d", c.Create, c.Update, c.Replace, c.Delete)
		}
		out = append(out, c.Name+" "+c.Status+" "+n)
	}
	return out
}

// movedMembers names the members whose plan digest differs between two
// documents.
func movedMembers(a, b *changeset.Document) []string {
	digests := map[string]string{}
	for _, m := range a.Members {
		digests[m.Name] = m.PlanDigest
	}
	var moved []string
	for _, m := range b.Members {
		if digests[m.Name] != m.PlanDigest {
			moved = append(moved, m.Name)
		}
	}
	return moved
}

func TestPreviewAcrossTools(t *testing.T) {
	golden, err := filepath.Abs("testdata/e2e-note.md")
	if err != nil {
		t.Fatal(err)
	}
	w := startE2E(t)
	document := func() *changeset.Document { return readDocument(t, filepath.Join(w.out, DocumentFile)) }

	// 1. The plan: the note is the golden one, the document parses and
	// digests to what it says, nothing was applied.
	plan := w.captf(t, runner.ExitOK, "preview", "plan", "--env", "prod")
	doc := document()
	goldenFile(t, golden, w.normalise(plan.stdout))
	if got, err := doc.ComputeDigest(); err != nil || got != doc.Digest {
		t.Fatalf("the document digests to %s (%v), says %s", got, err, doc.Digest)
	}
	if diff := cmp.Diff(world{Objects: map[string]string{}}, w.world(t)); diff != "" {
		t.Fatalf("the plan applied something (-want +got):\n%s", diff)
	}

	// A member whose inputs have no value and whose upstream is not in the
	// change is planned with holes, not held; its counts are unknown.
	// Only the template changed, and network and app never ran.
	undo := w.edit(t, "cfn/queue.yaml", "captf e2e v1", "captf e2e v1b")
	holes := w.captf(t, runner.ExitOK, "preview", "plan", "--env", "prod", "--changed-from", "HEAD")
	undo()
	if diff := cmp.Diff([]string{"queue planned ?"}, counts(document())); diff != "" {
		t.Errorf("members (-want +got):\n%s", diff)
	}
	for _, line := range []string{
		"| `queue` | cfn-deploy | planned | ? | ? | ? | ? |",
		"- `queue`: inputs from app; re-checked on apply",
		"- `queue`: inputs from network; re-checked on apply",
	} {
		if !strings.Contains(holes.stdout, line) {
			t.Errorf("the note lacks %q:\n%s", line, holes.stdout)
		}
	}
	if diff := cmp.Diff(world{Objects: map[string]string{}}, w.world(t)); diff != "" {
		t.Fatalf("the plan applied something (-want +got):\n%s", diff)
	}

	// 2. The apply of that digest: every tool really changed.
	applied := w.captf(t, runner.ExitOK, "preview", "apply", "--env", "prod", "--expect-digest", doc.Digest)
	for _, line := range []string{"captf: applied  network", "captf: applied  app", "captf: applied  queue", "captf: applied  storage", "captf: applied  events"} {
		if !strings.Contains(applied.stdout, line) {
			t.Errorf("apply output lacks %q:\n%s", line, applied.stdout)
		}
	}
	w.checkApplied(t, "1", "blue", "release one from app\n")
	after := w.world(t)

	// The same plan again changes nothing.
	again := w.captf(t, runner.ExitOK, "preview", "plan", "--env", "prod")
	if diff := cmp.Diff([]string{"network planned 0/0/0/0", "events planned 0/0/0/0", "app planned 0/0/0/0", "app#inputs planned 0/0/0/0", "storage planned 0/0/0/0", "queue planned 0/0/0/0"}, counts(document())); diff != "" {
		t.Errorf("a plan after the apply (-want +got):\n%s\n%s", diff, again.stdout)
	}
	if diff := cmp.Diff(after, w.world(t)); diff != "" {
		t.Errorf("a plan changed the world (-before +after):\n%s", diff)
	}

	// 3. A change in every tool is reviewed (digest D1); then one thing
	// moves before the apply. Each time the apply exits 3, names both
	// digests, and nothing was applied anywhere.
	w.edit(t, "infra/network/prod.tfvars", `release     = "1"`, `release     = "2"`)
	w.edit(t, "k8s/app.yaml", "color: blue", "color: green")
	w.edit(t, "cfn/queue.yaml", "captf e2e v1", "captf e2e v2")
	w.edit(t, "gcp/events.yaml", "ackDeadlineSeconds: 20", "ackDeadlineSeconds: 30")
	write(t, filepath.Join(w.root, "config/message.txt"), []byte("release two\n"), 0o644)
	w.captf(t, runner.ExitOK, "preview", "plan", "--env", "prod")
	reviewed := document()
	if diff := cmp.Diff([]string{"network planned 0/1/0/0", "events planned 0/1/0/0", "app planned 0/1/0/0", "app#inputs planned 0/0/0/0", "storage planned 0/1/0/0", "queue planned 0/1/0/0"}, counts(reviewed)); diff != "" {
		t.Errorf("the reviewed change (-want +got):\n%s", diff)
	}
	moves := []struct {
		name  string
		moved []string
		make  func(t *testing.T) (undo func())
	}{
		{"a terraform variable", []string{"network", "storage", "queue"}, func(t *testing.T) func() {
			return w.edit(t, "infra/network/prod.tfvars", `release     = "2"`, `release     = "3"`)
		}},
		{"a manifest field", []string{"app"}, func(t *testing.T) func() { return w.edit(t, "k8s/app.yaml", "replicas: 2", "replicas: 3") }},
		{"a template property", []string{"queue"}, func(t *testing.T) func() { return w.edit(t, "cfn/queue.yaml", "captf e2e v2", "captf e2e v3") }},
		{"an ARM template property", []string{"storage"}, func(t *testing.T) func() {
			return w.edit(t, "arm/storage.json", `"minimumTlsVersion": "TLS1_2"`, `"minimumTlsVersion": "TLS1_3"`)
		}},
		{"a secure ARM parameter", []string{"storage"}, func(t *testing.T) func() {
			return w.edit(t, "captf.yaml", "CANARY-ARM-SECURE-3d8b", "CANARY-ARM-SECURE-3d8b-v2")
		}},
		{"an ARM resource drifted", []string{"storage"}, func(t *testing.T) func() {
			w.arm.Edit(e2eStorageAccount, func(o map[string]any) { o["kind"] = "BlobStorage" })
			return func() { w.arm.Edit(e2eStorageAccount, func(o map[string]any) { o["kind"] = "StorageV2" }) }
		}},
		{"a Config Connector manifest field", []string{"events"}, func(t *testing.T) func() {
			return w.edit(t, "gcp/events.yaml", "ackDeadlineSeconds: 30", "ackDeadlineSeconds: 40")
		}},
		{"a Pub/Sub subscription drifted", []string{"events"}, func(t *testing.T) func() {
			w.pubsubPatch(t, "orders-billing", 25)
			return func() { w.pubsubPatch(t, "orders-billing", 20) }
		}},
		{"a file the shell step reads", []string{"app#inputs"}, func(t *testing.T) func() {
			return w.edit(t, "config/message.txt", "release two", "release three")
		}},
		{"live drift after review", []string{"app"}, func(t *testing.T) func() {
			var cm corev1.ConfigMap
			key := client.ObjectKey{Namespace: e2eNamespace, Name: "app-config"}
			if err := w.kube.Get(context.Background(), key, &cm); err != nil {
				t.Fatal(err)
			}
			cm.Data["color"] = "red"
			if err := w.kube.Update(context.Background(), &cm); err != nil {
				t.Fatal(err)
			}
			return func() {}
		}},
	}
	for _, m := range moves {
		t.Run("moved/"+m.name, func(t *testing.T) {
			if m.name == "live drift after review" {
				// The edits of the earlier cases are undone: the
				// reviewed change plans to the same digest again.
				w.captf(t, runner.ExitOK, "preview", "plan", "--env", "prod")
				if d := document().Digest; d != reviewed.Digest {
					t.Fatalf("the reviewed change plans to %s now, not %s", d, reviewed.Digest)
				}
			}
			undo := m.make(t)
			defer undo()
			before := w.world(t)
			o := w.captf(t, runner.ExitPlanChanged, "preview", "apply", "--env", "prod", "--expect-digest", reviewed.Digest)
			fresh := document()
			if fresh.Digest == reviewed.Digest || !strings.Contains(o.stderr, fresh.Digest) || !strings.Contains(o.stderr, reviewed.Digest) {
				t.Errorf("the refusal does not name both digests (%s, %s):\n%s", reviewed.Digest, fresh.Digest, o.stderr)
			}
			if diff := cmp.Diff(m.moved, movedMembers(reviewed, fresh)); diff != "" {
				t.Errorf("moved members (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, w.world(t)); diff != "" {
				t.Errorf("something was applied (-before +after):\n%s", diff)
			}
		})
	}

	// 4. A failing member blocks the whole apply. A template that lacks a
	// parameter the step sets fails queue; network and app, which come
	// before it and could apply, are not applied. A kind the cluster does
	// not serve fails app (and its other member); queue waits on app. A
	// terraform root whose plan fails.
	newFile := func(rel, body string) func(t *testing.T) func() {
		return func(t *testing.T) func() {
			path := filepath.Join(w.root, rel)
			write(t, path, []byte(body), 0o644)
			return func() { os.Remove(path) }
		}
	}
	failures := []struct {
		name string
		make func(t *testing.T) (undo func())
		want []string
	}{
		{"cloudformation", func(t *testing.T) func() { return w.edit(t, "cfn/queue.yaml", "  Color:\n    Type: String\n", "") },
			[]string{"network planned 0/1/0/0", "events planned 0/1/0/0", "app planned 0/1/0/0", "app#inputs planned 0/0/0/0", "storage planned 0/1/0/0", "queue failed ?"}},
		{"kubectl", newFile("k8s/widget.yaml", "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n"),
			[]string{"network planned 0/1/0/0", "events planned 0/1/0/0", "app failed ?", "app#inputs failed ?", "storage planned 0/1/0/0", "queue held ?"}},
		{"terraform", newFile("infra/network/broken.tf", "resource \"terraform_data\" \"broken\" {\n  no_such_argument = 1\n}\n"),
			[]string{"network failed ?", "events planned 0/1/0/0", "app held ?", "app#inputs planned 0/0/0/0", "storage held ?", "queue held ?"}},
		{"arm", func(t *testing.T) func() {
			return w.edit(t, "arm/storage.json", `"name": "[variables('account')]"`, `"name": "[uniqueString(resourceGroup().id)]"`)
		}, []string{"network planned 0/1/0/0", "events planned 0/1/0/0", "app planned 0/1/0/0", "app#inputs planned 0/0/0/0", "storage failed ?", "queue planned 0/1/0/0"}},
	}
	for _, f := range failures {
		t.Run("failed/"+f.name, func(t *testing.T) {
			defer f.make(t)()
			before := w.world(t)
			w.captf(t, runner.ExitFailure, "preview", "plan", "--env", "prod")
			failed := document()
			if diff := cmp.Diff(f.want, counts(failed)); diff != "" {
				t.Errorf("members (-want +got):\n%s", diff)
			}
			o := w.captf(t, runner.ExitFailure, "preview", "apply", "--env", "prod", "--expect-digest", failed.Digest)
			if !strings.Contains(o.stderr, "nothing was applied") {
				t.Errorf("apply does not say nothing was applied:\n%s", o.stderr)
			}
			if diff := cmp.Diff(before, w.world(t)); diff != "" {
				t.Errorf("something was applied (-before +after):\n%s", diff)
			}
		})
	}

	// The reviewed change, planned again over the drift and approved,
	// updates every tool (kubectl takes data.color back from the manager
	// that drifted it).
	t.Run("update", func(t *testing.T) {
		w.captf(t, runner.ExitOK, "preview", "plan", "--env", "prod")
		w.captf(t, runner.ExitOK, "preview", "apply", "--env", "prod", "--expect-digest", document().Digest)
		w.checkApplied(t, "2", "green", "release two from app\n")
	})

	// A sensitive value, and the preview key, bound across processes.
	t.Run("preview key", func(t *testing.T) { w.sensitiveAndKey(t) })

	// A member waiting on an output known only after its upstream's apply
	// is held, applied in a second round under its own approval.
	t.Run("held", func(t *testing.T) { w.heldRound(t) })

	// 5. A note over 65,536 characters drops whole groups from the end.
	t.Run("truncated note", func(t *testing.T) { w.truncatedNote(t) })

	// 6. No canary reached anything captf printed or left on disk.
	t.Run("canaries", func(t *testing.T) { w.checkCanaries(t) })
}

// sensitiveAndKey reviews a change of the terraform sensitive variable
// (db_password), then changes only that value again before the apply: the
// document shows the same entries, but the network member's digest moves
// (its keyed digest binds the value), so the apply exits 3 and applies
// nothing. An apply under another preview key moves every member a
// capability plans; a short key is refused before anything runs.
func (w *e2e) sensitiveAndKey(t *testing.T) {
	const tfvars = "infra/network/prod.tfvars"
	secret := e2eCanaries[0]
	defer w.edit(t, tfvars, secret, secret+"-v2")()
	w.captf(t, runner.ExitOK, "preview", "plan", "--env", "prod")
	reviewed := readDocument(t, filepath.Join(w.out, DocumentFile))
	if diff := cmp.Diff([]string{"network planned 0/1/0/0", "events planned 0/0/0/0", "app planned 0/0/0/0", "app#inputs planned 0/0/0/0", "storage planned 0/0/0/0", "queue planned 0/0/0/0"}, counts(reviewed)); diff != "" {
		t.Fatalf("the reviewed change (-want +got):\n%s", diff)
	}

	t.Run("the sensitive value moved", func(t *testing.T) {
		defer w.edit(t, tfvars, secret+"-v2", secret+"-v3")()
		before := w.world(t)
		o := w.captf(t, runner.ExitPlanChanged, "preview", "apply", "--env", "prod", "--expect-digest", reviewed.Digest)
		fresh := readDocument(t, filepath.Join(w.out, DocumentFile))
		if diff := cmp.Diff([]string{"network"}, movedMembers(reviewed, fresh)); diff != "" {
			t.Errorf("moved members (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(reviewed.Entries, fresh.Entries); diff != "" {
			t.Errorf("the document shows the sensitive change (-reviewed +fresh):\n%s", diff)
		}
		if !strings.Contains(o.stderr, reviewed.Digest) || !strings.Contains(o.stderr, fresh.Digest) {
			t.Errorf("the refusal does not name both digests:\n%s", o.stderr)
		}
		if diff := cmp.Diff(before, w.world(t)); diff != "" {
			t.Errorf("something was applied (-before +after):\n%s", diff)
		}
	})

	t.Run("another key", func(t *testing.T) {
		other := filepath.Join(t.TempDir(), "other-key")
		write(t, other, []byte("another-preview-key-of-32-bytes!"), 0o600)
		before := w.world(t)
		o := w.captf(t, runner.ExitPlanChanged, "preview", "apply", "--env", "prod", "--key-file", other, "--expect-digest", reviewed.Digest)
		if diff := cmp.Diff([]string{"network", "events", "app", "storage", "queue"}, movedMembers(reviewed, readDocument(t, filepath.Join(w.out, DocumentFile)))); diff != "" {
			t.Errorf("moved members (-want +got):\n%s", diff)
		}
		if !strings.Contains(o.stderr, "plan and apply must read the same preview key") {
			t.Errorf("the refusal does not name the key:\n%s", o.stderr)
		}
		if diff := cmp.Diff(before, w.world(t)); diff != "" {
			t.Errorf("something was applied (-before +after):\n%s", diff)
		}
	})

	t.Run("a short key", func(t *testing.T) {
		short := filepath.Join(t.TempDir(), "short-key")
		write(t, short, []byte("thirty-one-bytes-are-too-short!"), 0o600)
		before := w.world(t)
		for _, args := range [][]string{
			{"preview", "plan", "--env", "prod", "--key-file", short},
			{"preview", "apply", "--env", "prod", "--key-file", short, "--expect-digest", reviewed.Digest},
		} {
			o := w.captf(t, runner.ExitBadInput, args...)
			if !strings.Contains(o.stderr, "holds 31 bytes; at least 32 are needed") || strings.Contains(o.stderr, "captf: planning") {
				t.Errorf("%v:\n%s", args, o.stderr)
			}
		}
		if diff := cmp.Diff(before, w.world(t)); diff != "" {
			t.Errorf("something was applied (-before +after):\n%s", diff)
		}
	})

	// The reviewed value applies under the plan's key.
	w.captf(t, runner.ExitOK, "preview", "apply", "--env", "prod", "--expect-digest", reviewed.Digest)
}

// checkApplied says the servers and the disk hold what the fixture deploys
// at release with color, and the shell step's marker holds message.
func (w *e2e) checkApplied(t *testing.T, release, color, message string) {
	t.Helper()
	ctx := context.Background()
	state, err := os.ReadFile(filepath.Join(w.root, "infra/network/terraform.tfstate"))
	if err != nil {
		t.Fatal(err)
	}
	var tfstate struct {
		Resources []struct{ Type, Name string }
	}
	if err := json.Unmarshal(state, &tfstate); err != nil {
		t.Fatal(err)
	}
	var resources []string
	for _, r := range tfstate.Resources {
		resources = append(resources, r.Type+"."+r.Name)
	}
	if diff := cmp.Diff([]string{"terraform_data.credentials", "terraform_data.network"}, resources); diff != "" {
		t.Errorf("terraform state (-want +got):\n%s", diff)
	}
	var cm corev1.ConfigMap
	if err := w.kube.Get(ctx, client.ObjectKey{Namespace: e2eNamespace, Name: "app-config"}, &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data["color"] != color || cm.Labels["captf.io/stack"] != "app" {
		t.Errorf("ConfigMap app-config: data %v, labels %v", cm.Data, cm.Labels)
	}
	var d appsv1.Deployment
	if err := w.kube.Get(ctx, client.ObjectKey{Namespace: e2eNamespace, Name: "web"}, &d); err != nil {
		t.Fatal(err)
	}
	if s := w.kube.Get(ctx, client.ObjectKey{Namespace: e2eNamespace, Name: "app-token"}, &corev1.Secret{}); s != nil {
		t.Fatal(s)
	}
	stacks, err := w.cfn.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String("queue")})
	if err != nil {
		t.Fatal(err)
	}
	params := map[string]string{}
	for _, p := range stacks.Stacks[0].Parameters {
		if k := aws.ToString(p.ParameterKey); k != "ApiKey" {
			params[k] = aws.ToString(p.ParameterValue)
		}
	}
	if diff := cmp.Diff(map[string]string{"Release": release, "Color": color}, params); diff != "" {
		t.Errorf("stack parameters (-want +got):\n%s", diff)
	}
	if s := string(stacks.Stacks[0].StackStatus); !slices.Contains([]string{"CREATE_COMPLETE", "UPDATE_COMPLETE"}, s) {
		t.Errorf("stack status %s", s)
	}
	if b, err := os.ReadFile(filepath.Join(w.root, "announced.txt")); err != nil || string(b) != message {
		t.Errorf("the shell step's marker: %q, %v", b, err)
	}
	account := w.arm.Resource(e2eStorageAccount)
	tags, _ := account["tags"].(map[string]any)
	if tags["release"] != release || tags[arm.OwnerTag] != "storage" {
		t.Errorf("storage account tags %v", tags)
	}
	sub := w.pubsubGet(t, "/v1/projects/"+e2eProject+"/subscriptions/orders-billing")
	ack := map[string]string{"1": "20", "2": "30"}[release]
	if fmt.Sprint(sub["ackDeadlineSeconds"]) != ack || sub["topic"] != "projects/"+e2eProject+"/topics/orders" {
		t.Errorf("subscription orders-billing: %v", sub)
	}
	topic := w.pubsubGet(t, "/v1/projects/"+e2eProject+"/topics/orders")
	if labels, _ := topic["labels"].(map[string]any); labels[gcp.ManagedByLabel] != gcp.ManagedByValue || labels[gcp.StackLabel] != "events" || labels["team"] != "shop" {
		t.Errorf("topic orders: %v", topic)
	}
	server := w.arm.Resource(e2eSQLServer)
	if tag, _ := server["tags"].(map[string]any)[arm.SecureTag].(string); !strings.HasPrefix(tag, "hmac-sha256:") {
		t.Errorf("the SQL server has no %s tag: %v", arm.SecureTag, server["tags"])
	}
}

// truncatedNote plans three components of 120 ConfigMaps each in a
// repository of their own: the note would be about 130,000 characters.
func (w *e2e) truncatedNote(t *testing.T) {
	root := filepath.Join(filepath.Dir(w.root), "big")
	var project strings.Builder
	project.WriteString("components:\n")
	for _, c := range []string{"big-a", "big-b", "big-c"} {
		fmt.Fprintf(&project, "  %s:\n    steps:\n      - kind: kubectl-apply\n        inputs: {manifest: %s.yaml, namespace: %s}\n", c, c, bigNamespace)
		var manifest strings.Builder
		for i := range 120 {
			fmt.Fprintf(&manifest, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s-%03d\ndata:\n  size: %q\n  note: entry %d of %s\n", c, i, fmt.Sprint(i), i, c)
		}
		if err := os.MkdirAll(root, 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(root, c+".yaml"), []byte(manifest.String()), 0o644)
	}
	write(t, filepath.Join(root, "captf.yaml"), []byte(project.String()), 0o644)
	gitRun(t, root, "init", "-q", "-b", "main")
	gitCommit(t, root)
	plan := w.captf(t, runner.ExitOK, "preview", "plan", "--root", root)
	out := filepath.Join(root, ".captf", "preview")
	note, err := os.ReadFile(filepath.Join(out, NoteFile))
	if err != nil {
		t.Fatal(err)
	}
	if plan.stdout != string(note) {
		t.Error("the printed note differs from note.md")
	}
	if len(note) > changeset.MaxNoteLength {
		t.Errorf("the note has %d characters, more than %d", len(note), changeset.MaxNoteLength)
	}
	lines := strings.Split(strings.TrimSuffix(string(note), "\n"), "\n")
	last := "2 groups are left out to keep this note under 65536 characters: `big-b`, `big-c`. The whole change set is in `" + filepath.Join(out, DocumentFile) + "`."
	if lines[len(lines)-1] != last {
		t.Errorf("the last line is %q, want %q", lines[len(lines)-1], last)
	}
	// big-a's group is whole: every ConfigMap with every attribute.
	doc := readDocument(t, filepath.Join(out, DocumentFile))
	if len(doc.Entries) != 360 {
		t.Fatalf("the document has %d entries, want 360", len(doc.Entries))
	}
	if got := strings.Count(string(note), "\n- create `"); got != 120 {
		t.Errorf("the note lists %d creates, want big-a's 120", got)
	}
	if !strings.Contains(string(note), "- create `ConfigMap/"+bigNamespace+"/big-a-119`") || strings.Contains(string(note), "#### `big-b`") {
		t.Error("the note does not keep big-a whole and drop big-b")
	}
	for _, row := range []string{"| `big-a` | kubectl-apply | planned | 120 | 0 | 0 | 0 |", "| `big-c` | kubectl-apply | planned | 120 | 0 | 0 | 0 |"} {
		if !strings.Contains(string(note), row) {
			t.Errorf("the table lacks %q", row)
		}
	}
}

// checkCanaries looks for each canary in everything captf printed, in
// every file under its output folder and every file of the repository git
// does not track, and in TMPDIR, which captf must leave empty.
func (w *e2e) checkCanaries(t *testing.T) {
	for _, o := range w.outcomes {
		for _, c := range e2eCanaries {
			if strings.Contains(o.stdout+o.stderr, c) {
				t.Errorf("captf printed %s:\n%s\n%s", c, o.stdout, o.stderr)
			}
		}
	}
	// Files git does not track, ignored ones included, so the output
	// folder and what terraform keeps in the root. terraform's state holds
	// the sensitive value in plain text, as terraform's local backend
	// does; terraform writes it, not captf, so it is left out.
	untracked := gitOutput(t, w.root, "ls-files", "-z", "--others")
	var files []string
	for _, f := range strings.Split(untracked, "\x00") {
		if f != "" && !strings.HasPrefix(f, "infra/network/terraform.tfstate") {
			files = append(files, filepath.Join(w.root, f))
		}
	}
	if !slices.Contains(files, filepath.Join(w.out, NoteFile)) || !slices.Contains(files, filepath.Join(w.out, DocumentFile)) {
		t.Fatalf("the output folder is not among the files searched: %v", files)
	}
	tmp := os.Getenv("TMPDIR")
	_ = filepath.WalkDir(tmp, func(path string, d fs.DirEntry, err error) error {
		if err == nil && path != tmp {
			t.Errorf("captf left %s in TMPDIR", path)
		}
		if err == nil && !d.IsDir() {
			files = append(files, path)
		}
		return nil
	})
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Error(err)
			continue
		}
		for _, c := range e2eCanaries {
			if strings.Contains(string(b), c) {
				t.Errorf("%s holds %s", f, c)
			}
		}
	}
}

// heldRound plans, in a repository of its own, a stack whose parameter is
// the id of a terraform_data, which terraform knows only after apply.
func (w *e2e) heldRound(t *testing.T) {
	root := filepath.Join(filepath.Dir(w.root), "held")
	files := map[string]string{
		"captf.yaml": `components:
  ids:
    steps:
      - kind: terraform-apply
        inputs: {root: ids}
  record:
    steps:
      - kind: cfn-deploy
        inputs:
          template: record.yaml
          stack: captf-e2e-record
          parameters:
            Id: {stackOutput: {component: ids, name: id}}
`,
		"ids/main.tf": "resource \"terraform_data\" \"id\" {\n  input = \"x\"\n}\n\noutput \"id\" {\n  value = terraform_data.id.id\n}\n",
		"record.yaml": `Parameters:
  Id:
    Type: String
Resources:
  Record:
    Type: AWS::SSM::Parameter
    Properties:
      Name: /captf-e2e/record
      Type: String
      Value: !Ref Id
`,
		".gitignore": ".terraform/\n*.tfstate*\n",
	}
	for name, body := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(root, name), []byte(body), 0o644)
	}
	gitRun(t, root, "init", "-q", "-b", "main")
	gitCommit(t, root)
	out := filepath.Join(root, ".captf", "preview")
	doc := func() *changeset.Document { return readDocument(t, filepath.Join(out, DocumentFile)) }

	plan := w.captf(t, runner.ExitOK, "preview", "plan", "--root", root)
	first := doc()
	if diff := cmp.Diff([]string{"ids planned 1/0/0/0", "captf-e2e-record held ?"}, counts(first)); diff != "" {
		t.Errorf("first round (-want +got):\n%s", diff)
	}
	if !strings.Contains(plan.stdout, "It waits on `ids.id`.") {
		t.Errorf("the note does not say what record waits on:\n%s", plan.stdout)
	}
	apply := w.captf(t, ExitHeld, "preview", "apply", "--root", root, "--expect-digest", first.Digest)
	next := doc()
	if diff := cmp.Diff([]string{"ids planned 0/0/0/0", "captf-e2e-record planned 1/0/0/0"}, counts(next)); diff != "" {
		t.Errorf("second round (-want +got):\n%s", diff)
	}
	for _, line := range []string{"captf: applied  ids", "captf: held     record", "--expect-digest " + next.Digest} {
		if !strings.Contains(apply.stdout, line) {
			t.Errorf("apply output lacks %q:\n%s", line, apply.stdout)
		}
	}
	ctx := context.Background()
	if _, err := w.cfn.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String("captf-e2e-record")}); err == nil {
		t.Fatal("the held stack exists after the first round")
	}
	w.captf(t, runner.ExitOK, "preview", "apply", "--root", root, "--expect-digest", next.Digest)
	state, err := os.ReadFile(filepath.Join(root, "ids", "terraform.tfstate"))
	if err != nil {
		t.Fatal(err)
	}
	var tfstate struct {
		Outputs map[string]struct{ Value string }
	}
	if err := json.Unmarshal(state, &tfstate); err != nil {
		t.Fatal(err)
	}
	stacks, err := w.cfn.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String("captf-e2e-record")})
	if err != nil {
		t.Fatal(err)
	}
	id := tfstate.Outputs["id"].Value
	if p := stacks.Stacks[0].Parameters; id == "" || len(p) != 1 || aws.ToString(p[0].ParameterValue) != id {
		t.Errorf("the stack's parameters %+v, want Id = the terraform_data's id %q", p, id)
	}
}
