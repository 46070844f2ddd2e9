package terraformcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/controller/terraformmachine"
	"github.com/captf/captf/internal/controller/terraformmachinepool"
	"github.com/captf/captf/internal/controller/terraformmachinepoolmachine"
	"github.com/captf/captf/internal/render"
	"github.com/captf/captf/internal/testenv"
	"github.com/captf/captf/internal/testnode"
	"github.com/captf/captf/internal/tftest"
	"github.com/captf/captf/internal/webhook/providerid"
	"github.com/captf/captf/internal/webhook/templates"
	planwebhook "github.com/captf/captf/internal/webhook/terraformplan"
)

// These tests run the manager's reconciler against a real kube-apiserver
// and etcd, with the test node playing the kubelet, the real captf-runner
// and the real terraform; state lives in the API server through terraform's
// kubernetes backend.

const (
	moduleImage = "example.test/module:1"
	// moduleImage2 is the same module under another reference.
	moduleImage2 = "example.test/module:2"
	// movedImage holds the module with terraform_data.node renamed by a
	// moved block.
	movedImage  = "example.test/module-moved:1"
	runnerImage = "example.test/captf-runner:dev"
	canary      = "CANARY-CONTROLLER-SECRET-77"
)

type harness struct {
	t   *testing.T
	env *testenv.Env
	c   client.Client
	// node plays the kubelet; Retag moves an image tag under it.
	node *testnode.Node
}

func start(t *testing.T) *harness { return startWith(t, false) }

// startWithClusterAPI starts the harness on an API server that also serves
// Cluster API's own CRDs, so the manager watches Clusters.
func startWithClusterAPI(t *testing.T) *harness {
	return startEnv(t, testenv.StartWithClusterAPI(t, "../../.."), nil)
}

// managerUser is who the manager runs as when the webhook is served.
const managerUser = "system:serviceaccount:captf-system:captf-manager"

// startWith starts the harness; with webhooks, the TerraformPlan webhook
// is served by the test and the manager runs as its ServiceAccount.
func startWith(t *testing.T, webhooks bool) *harness {
	if !webhooks {
		return startEnv(t, testenv.Start(t, "../../.."), nil)
	}
	env := testenv.StartWithWebhooks(t, "../../..")
	serveWebhooks(t, env)
	return startEnv(t, env, env.ConfigAs(managerUser, "system:masters"))
}

// serveWebhooks serves the manager's webhooks, as the manager does with
// --enable-webhooks, for a manager that runs as managerUser.
func serveWebhooks(t *testing.T, env *testenv.Env) {
	env.ServeWebhooks(t, func(mgr ctrl.Manager) error {
		if err := (&planwebhook.Validator{ManagerUsername: managerUser}).SetupWithManager(mgr); err != nil {
			return err
		}
		if err := providerid.SetupWithManager(mgr, managerUser); err != nil {
			return err
		}
		return templates.SetupWithManager(mgr)
	})
}

// startEnv runs the manager (as cfg, else as the administrator), the test
// node and the fixtures on env; more add to the node (images, environment)
// before it starts.
func startEnv(t *testing.T, env *testenv.Env, cfg *rest.Config, more ...func(*testnode.Node)) *harness {
	return startScoped(t, env, cfg, managerScope{}, more...)
}

// managerScope is the part of the cluster the test's manager reconciles,
// as its --namespace and --watch-filter say; the zero value is all of it.
type managerScope struct {
	namespaces  []string
	watchFilter string
}

// startScoped is startEnv with a manager that reconciles scope.
func startScoped(t *testing.T, env *testenv.Env, cfg *rest.Config, scope managerScope, more ...func(*testnode.Node)) *harness {
	if cfg == nil {
		cfg = env.Config
	}
	tf := tftest.Terraform(t)
	for _, kv := range tftest.Env(t) {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	runnerDir := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", filepath.Join(runnerDir, "captf-runner"), "../../../cmd/captf-runner").CombinedOutput(); err != nil {
		t.Fatalf("build captf-runner: %v\n%s", err, out)
	}
	runtimeDir := t.TempDir()
	if err := os.Symlink(tf.Path, filepath.Join(runtimeDir, "terraform")); err != nil {
		t.Fatal(err)
	}
	module, _ := filepath.Abs("../../runner/testdata/module")
	moved := t.TempDir()
	src, err := os.ReadFile(filepath.Join(module, "main.tf"))
	if err != nil {
		t.Fatal(err)
	}
	renamed := strings.Replace(string(src), `resource "terraform_data" "node"`, `resource "terraform_data" "renamed"`, 1) +
		"\nmoved {\n  from = terraform_data.node\n  to   = terraform_data.renamed\n}\n"
	if err := os.WriteFile(filepath.Join(moved, "main.tf"), []byte(renamed), 0o644); err != nil {
		t.Fatal(err)
	}
	node := &testnode.Node{Client: env.Client, Namespace: "default",
		Images: map[string][]testnode.Image{
			moduleImage:  {{Path: infrav1.PathModule, Dir: module}, {Path: infrav1.PathRuntime, Dir: runtimeDir}},
			moduleImage2: {{Path: infrav1.PathModule, Dir: module}, {Path: infrav1.PathRuntime, Dir: runtimeDir}},
			movedImage:   {{Path: infrav1.PathModule, Dir: moved}, {Path: infrav1.PathRuntime, Dir: runtimeDir}},
			runnerImage:  {{Path: filepath.Dir(engine.RunnerImagePath), Dir: runnerDir}},
		},
		Env: []string{"KUBE_CONFIG_PATH=" + env.Kubeconfig(t)},
	}
	for _, m := range more {
		m(node)
	}
	node.Start(t)

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: env.Client.Scheme(), Cache: engine.CacheOptionsIn(scope.namespaces...), NewCache: engine.NewCache(Kind, terraformmachine.Kind, terraformmachinepool.Kind), Client: engine.ClientOptions(), Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	kinds := []engine.Kind{Kind}
	if terraformmachine.Served(mgr.GetRESTMapper()) == nil {
		// Where Cluster API's CRDs are served, machines are reconciled
		// too, as the manager does.
		kinds = append(kinds, terraformmachine.Kind)
	}
	if terraformmachinepool.Served(mgr.GetRESTMapper()) == nil {
		kinds = append(kinds, terraformmachinepool.Kind)
		members := &terraformmachinepoolmachine.Reconciler{Client: mgr.GetClient(), WatchFilter: scope.watchFilter}
		skip := true
		if err := members.SetupWithManager(mgr, controller.Options{SkipNameValidation: &skip}); err != nil {
			t.Fatal(err)
		}
	}
	jobs := &engine.JobRecord{} // shared by the kinds, as the manager does
	for _, k := range kinds {
		r := &engine.Reconciler{Kind: k, Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Jobs: jobs, RunnerImage: runnerImage, RetryBase: time.Second, WatchFilter: scope.watchFilter}
		skip := true // one controller per test, all in one process
		if err := r.SetupWithManager(mgr, controller.Options{SkipNameValidation: &skip}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	// Stop the manager and wait for it before the API server stops.
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "token", Namespace: "default"}, Data: map[string][]byte{"token": []byte(canary)}}
	if err := env.Client.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, env: env, c: env.Client, node: node}
}

func (h *harness) create(name string, policy infrav1.ApplyPolicy, size string, mutate ...func(*infrav1.TerraformCluster)) *infrav1.TerraformCluster {
	h.t.Helper()
	tc := &infrav1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: infrav1.TerraformClusterSpec{RunnerSpec: infrav1.RunnerSpec{
			Image: moduleImage, ApplyPolicy: policy,
			Variables: []infrav1.Variable{
				{Name: "size", Value: &apiextensionsv1.JSON{Raw: []byte(`"` + size + `"`)}},
				{Name: "token", ValueFrom: &infrav1.VariableSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "token"}, Key: "token"}}},
			},
		}},
	}
	for _, m := range mutate {
		m(tc)
	}
	if err := h.c.Create(context.Background(), tc); err != nil {
		h.t.Fatal(err)
	}
	return tc
}

// wait polls tc until cond holds.
func (h *harness) wait(tc *infrav1.TerraformCluster, what string, cond func(*infrav1.TerraformCluster) bool) {
	h.t.Helper()
	waitFor(h, tc, what, cond)
}

// waitFor polls obj, of any kind, until cond holds.
func waitFor[T client.Object](h *harness, obj T, what string, cond func(T) bool) {
	h.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if err := h.c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			h.t.Fatal(err)
		}
		if cond(obj) {
			return
		}
		if time.Now().After(deadline) {
			u, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
			b, _ := json.MarshalIndent(u["status"], "", "  ")
			h.t.Fatalf("%s: not within 2 minutes; status:\n%s", what, b)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// transitions are the versions of the objects of one kind in a namespace
// that a watch saw, from when record was called, in the order the API
// server wrote them. A test that waits on a counter checks the state that
// came with it here: a later read may find the next step already begun
// (a retry that started after the backoff).
type transitions[T client.Object] struct {
	mu   sync.Mutex
	seen []T
}

// record starts watching the objects of list's kind in namespace until
// the test ends.
func record[T client.Object](h *harness, list client.ObjectList, namespace string) *transitions[T] {
	h.t.Helper()
	c, err := client.NewWithWatch(h.env.Config, client.Options{Scheme: h.c.Scheme()})
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := c.Watch(ctx, list, client.InNamespace(namespace))
	if err != nil {
		cancel()
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { cancel(); w.Stop() })
	tr := &transitions[T]{}
	go func() {
		for ev := range w.ResultChan() {
			if o, ok := ev.Object.(T); ok {
				tr.mu.Lock()
				tr.seen = append(tr.seen, o)
				tr.mu.Unlock()
			}
		}
	}()
	return tr
}

// all are the versions seen so far, oldest first.
func (tr *transitions[T]) all() []T {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return slices.Clone(tr.seen)
}

// first waits, as long as wait does, for a version for which cond holds
// and returns the first such.
func (tr *transitions[T]) first(h *harness, what string, cond func(T) bool) T {
	h.t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		for _, o := range tr.all() {
			if cond(o) {
				return o
			}
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: not seen within 2 minutes", what)
		}
	}
}

// revision is an object's resourceVersion as the etcd revision it is:
// the versions of objects of one API server are ordered by it.
func revision(o client.Object) uint64 {
	n, _ := strconv.ParseUint(o.GetResourceVersion(), 10, 64)
	return n
}

// gone waits until obj no longer exists.
func (h *harness) gone(obj client.Object, what string) {
	h.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		now := obj.DeepCopyObject().(client.Object)
		err := h.c.Get(context.Background(), client.ObjectKeyFromObject(obj), now)
		if apierrors.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			for _, j := range h.jobs(obj) {
				h.t.Logf("Job %s: processed %v, active %d, succeeded %d, failed %d", j.Name, engine.Processed(&j), j.Status.Active, j.Status.Succeeded, j.Status.Failed)
			}
			u, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(now)
			b, _ := json.MarshalIndent(u, "", "  ")
			h.t.Fatalf("%s: the object was not released within 2 minutes (%v):\n%s", what, err, b)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (h *harness) setSize(tc *infrav1.TerraformCluster, size string) {
	h.t.Helper()
	h.setVar(tc, "size", `"`+size+`"`)
}

// setVar sets an inline variable to a JSON value, adding it if missing.
func (h *harness) setVar(tc *infrav1.TerraformCluster, name, value string) {
	h.t.Helper()
	before := tc.DeepCopy()
	v := &apiextensionsv1.JSON{Raw: []byte(value)}
	found := false
	for i := range tc.Spec.Variables {
		if tc.Spec.Variables[i].Name == name {
			tc.Spec.Variables[i].Value, found = v, true
		}
	}
	if !found {
		tc.Spec.Variables = append(tc.Spec.Variables, infrav1.Variable{Name: name, Value: v})
	}
	if err := h.c.Patch(context.Background(), tc, client.MergeFrom(before)); err != nil {
		h.t.Fatal(err)
	}
}

// approve sets captf.io/approve-plan.
func (h *harness) approve(tc *infrav1.TerraformCluster, hash string) {
	h.t.Helper()
	before := tc.DeepCopy()
	if tc.Annotations == nil {
		tc.Annotations = map[string]string{}
	}
	tc.Annotations[infrav1.AnnotationApprovePlan] = hash
	if err := h.c.Patch(context.Background(), tc, client.MergeFrom(before)); err != nil {
		h.t.Fatal(err)
	}
}

// waitingPlan waits for a plan that waits for approval with reason.
func (h *harness) waitingPlan(tc *infrav1.TerraformCluster, reason string) *infrav1.PlanStatus {
	h.t.Helper()
	h.wait(tc, "a plan waiting ("+reason+")", func(tc *infrav1.TerraformCluster) bool {
		c := condition(tc, infrav1.ConditionApplyJobSucceeded)
		return tc.Status.Plan != nil && tc.Status.ActiveJob == nil && c != nil && c.Reason == reason
	})
	return tc.Status.Plan
}

// planKeyMount says whether a Job mounts the plan key, and with which mode.
func planKeyMount(j *batchv1.Job) (mounted bool, mode int32) {
	for _, v := range j.Spec.Template.Spec.Volumes {
		// The label may hold a shortened name; the pods' annotation holds
		// it whole.
		if v.Secret != nil && v.Secret.SecretName == engine.PlanKeyName("tfc", j.Spec.Template.Annotations[infrav1.LabelOwnerName]) {
			for _, m := range j.Spec.Template.Spec.Containers[0].VolumeMounts {
				if m.Name == v.Name && m.MountPath == filepath.Dir(infrav1.PathPlanKey) && m.ReadOnly {
					return true, *v.Secret.DefaultMode
				}
			}
		}
	}
	return false, 0
}

func ready(tc *infrav1.TerraformCluster) bool {
	c := condition(tc, infrav1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue && tc.Status.ActiveJob == nil && tc.Status.ObservedGeneration == tc.Generation
}

// events returns the reasons of the events about tc, in order.
func (h *harness) events(obj client.Object) []eventsv1.Event {
	var list eventsv1.EventList
	if err := h.c.List(context.Background(), &list, client.InNamespace(obj.GetNamespace())); err != nil {
		h.t.Fatal(err)
	}
	kind := "TerraformCluster"
	switch obj.(type) {
	case *infrav1.TerraformMachine:
		kind = "TerraformMachine"
	case *infrav1.TerraformMachinePool:
		kind = "TerraformMachinePool"
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == obj.GetName() && e.Regarding.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

func count(evs []eventsv1.Event, reason string) int {
	n := 0
	for _, e := range evs {
		if e.Reason == reason {
			n++
		}
	}
	return n
}

// jobs lists the Jobs labelled with tc's name, which a name past 63
// characters has as a prefix and a hash (engine.NameLabel).
func (h *harness) jobs(obj client.Object) []batchv1.Job {
	var list batchv1.JobList
	if err := h.c.List(context.Background(), &list, client.InNamespace(obj.GetNamespace()), client.MatchingLabels{infrav1.LabelOwnerName: engine.NameLabel(obj.GetName())}); err != nil {
		h.t.Fatal(err)
	}
	return list.Items
}

func TestAutomatic(t *testing.T) {
	h := start(t)
	tc := h.create("auto", infrav1.ApplyAutomatic, "small")
	h.wait(tc, "first apply", ready)
	if !tc.Status.Ready || tc.Status.LastRun == nil || !tc.Status.LastRun.Succeeded {
		t.Fatalf("status after the first apply: %+v", tc.Status)
	}
	// The Cluster API contract: the endpoint from the module's outputs.
	if want := (infrav1.APIEndpoint{Host: "api.default.example.test", Port: 6443}); tc.Spec.ControlPlaneEndpoint != want {
		t.Errorf("controlPlaneEndpoint %+v, want %+v", tc.Spec.ControlPlaneEndpoint, want)
	}
	h.setSize(tc, "large")
	h.wait(tc, "second apply", func(tc *infrav1.TerraformCluster) bool {
		return ready(tc) && len(h.jobs(tc)) == 2
	})
	for _, j := range h.jobs(tc) {
		if j.Labels["captf.io/operation"] != "apply" {
			t.Errorf("Job %s runs %s under Automatic", j.Name, j.Labels["captf.io/operation"])
		}
		var s corev1.Secret
		if err := h.c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: engine.RunName(j.Name)}, &s); err == nil {
			t.Errorf("per-run Secret of finished Job %s still exists", j.Name)
		}
	}
}

func TestManualApproval(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	objects := record[*infrav1.TerraformCluster](h, &infrav1.TerraformClusterList{}, "default")
	tc := h.create("manual", infrav1.ApplyManual, "small")

	// The first apply of a new object is not gated.
	h.wait(tc, "first apply", func(tc *infrav1.TerraformCluster) bool {
		_, blocking := tc.Annotations[engine.AnnotationBlockMove]
		return ready(tc) && !blocking
	})
	var key corev1.Secret
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: engine.PlanKeyName("tfc", "manual")}, &key); err != nil || len(key.Data["key"]) != 32 {
		t.Fatalf("plan key Secret: %v %d bytes", err, len(key.Data["key"]))
	}

	// A change is planned and waits; waiting does not make Ready false.
	h.setSize(tc, "large")
	h.wait(tc, "plan waits", func(tc *infrav1.TerraformCluster) bool {
		c := condition(tc, infrav1.ConditionApplyJobSucceeded)
		return tc.Status.Plan != nil && c != nil && c.Reason == infrav1.ReasonPlanAwaitingApproval
	})
	p := tc.Status.Plan
	if p.Change != 1 || p.OutputChanges != 0 || !strings.HasPrefix(p.PlanHash, "p2:") || p.Job == "" || !strings.HasPrefix(p.InputsHash, "h2:") {
		t.Errorf("status.plan = %+v", p)
	}
	cmd := "kubectl annotate terraformcluster manual -n default captf.io/approve-plan=" + p.PlanHash + " --overwrite"
	if c := condition(tc, infrav1.ConditionApplyJobSucceeded); c.Status != metav1.ConditionUnknown || !strings.Contains(c.Message, cmd) {
		t.Errorf("ApplyJobSucceeded = %+v, want Unknown with %q", c, cmd)
	}
	if c := condition(tc, infrav1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Ready = %+v while waiting", c)
	}
	time.Sleep(2 * time.Second) // let any duplicate event show
	if n := count(h.events(tc), infrav1.EventPlanReady); n != 1 {
		t.Errorf("%d PlanReady events, want exactly 1", n)
	}
	// Nothing was applied while waiting.
	if jobs := h.jobs(tc); len(jobs) != 2 {
		t.Errorf("%d Jobs while waiting, want the first apply and the plan", len(jobs))
	}

	// Approve: the apply runs with --expect-plan, the approval is consumed.
	before := tc.DeepCopy()
	tc.Annotations = map[string]string{infrav1.AnnotationApprovePlan: p.PlanHash}
	if err := h.c.Patch(ctx, tc, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	h.wait(tc, "approved apply", func(tc *infrav1.TerraformCluster) bool {
		return ready(tc) && tc.Status.Plan == nil && tc.Annotations[infrav1.AnnotationApprovePlan] == ""
	})
	var approved *batchv1.Job
	for _, j := range h.jobs(tc) {
		if j.Annotations[infrav1.AnnotationApprovedPlan] == p.PlanHash {
			approved = &j
		}
	}
	if approved == nil || !strings.Contains(strings.Join(approved.Spec.Template.Spec.Containers[0].Command, " "), "--expect-plan="+p.PlanHash) {
		t.Fatalf("no apply Job carries the approved plan %s", p.PlanHash)
	}
	evs := h.events(tc)
	if count(evs, infrav1.EventPlanApproved) != 1 || count(evs, infrav1.EventPlanApplied) != 1 {
		t.Errorf("events %v", reasons(evs))
	}
	blockedWhileWriting(t, objects.all())
	recordedWithItsCondition(t, objects.all(), approved.Name)

	// The plan key is mounted (read-only, 0440) on the plan Job and the
	// approved apply only, and the Secret was never replaced or rotated.
	for _, j := range h.jobs(tc) {
		mounted, mode := planKeyMount(&j)
		want := j.Labels["captf.io/operation"] == "plan" || j.Annotations[infrav1.AnnotationApprovedPlan] != ""
		if mounted != want || (mounted && mode != 0o440) {
			t.Errorf("Job %s (%s): plan key mounted %v mode %o, want mounted %v", j.Name, j.Labels["captf.io/operation"], mounted, mode, want)
		}
	}
	var keyAfter corev1.Secret
	if err := h.c.Get(ctx, client.ObjectKeyFromObject(&key), &keyAfter); err != nil || keyAfter.UID != key.UID || string(keyAfter.Data["key"]) != string(key.Data["key"]) {
		t.Errorf("the plan key Secret changed: %v", err)
	}

	// The sensitive value reaches no field of the object and no event; the
	// inline value (the user's own spec) reaches neither status nor events.
	obj, _ := json.Marshal(tc)
	status, _ := json.Marshal(tc.Status)
	evb, _ := json.Marshal(evs)
	if strings.Contains(string(obj)+string(evb), canary) || strings.Contains(string(status)+string(evb), "large") {
		t.Errorf("a value reached the object or its events")
	}
	// Nor any Job or pod: their specs, statuses and the runners' reports
	// (the termination messages).
	var jobs batchv1.JobList
	var pods corev1.PodList
	if err := h.c.List(ctx, &jobs, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	if err := h.c.List(ctx, &pods, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	jb, _ := json.Marshal(jobs)
	pb, _ := json.Marshal(pods)
	if len(pods.Items) < 3 || strings.Contains(string(jb)+string(pb), canary) || strings.Contains(string(jb)+string(pb), "large") {
		t.Errorf("a value reached a Job or a pod (%d pods)", len(pods.Items))
	}
}

// recordedWithItsCondition checks that the status write that records the
// success of the apply Job job of a provisioned object also says what
// the end of the reconcile would: ApplyJobSucceeded and Ready True, for
// the object's generation; and the new serial the apply wrote (the last
// version's) as read and backed up. No version records the Job as
// succeeded while the condition still says an apply runs or the serial is
// the one before, and no reconcile after it has anything left to write
// (two status writes the fewer per changing apply).
func recordedWithItsCondition(t *testing.T, versions []*infrav1.TerraformCluster, job string) {
	t.Helper()
	seen := 0
	serial := versions[len(versions)-1].Status.StateSerial
	for _, tc := range versions {
		run := tc.Status.LastRun
		if run == nil || run.Job != job || !run.Succeeded {
			continue
		}
		seen++
		for _, typ := range []string{infrav1.ConditionApplyJobSucceeded, infrav1.ConditionReady, infrav1.ConditionStateBackedUp} {
			if c := condition(tc, typ); c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != tc.Generation {
				t.Errorf("%s at resourceVersion %s (generation %d) records Job %s as succeeded, but %s is %+v", tc.Name, tc.ResourceVersion, tc.Generation, job, typ, c)
			}
		}
		if s := tc.Status.StateSerial; s == nil || serial == nil || *s != *serial {
			t.Errorf("%s at resourceVersion %s records Job %s as succeeded, but state serial %v as read and backed up; want %v, the serial it wrote", tc.Name, tc.ResourceVersion, job, ptrString(s), ptrString(serial))
		}
	}
	if seen == 0 {
		t.Errorf("no version recorded Job %s as succeeded", job)
	}
}

// blockedWhileWriting checks, in every version of the objects seen, that
// an apply Job runs with engine.AnnotationBlockMove on its object, and that
// a plan Job of an object whose state exists runs without it (terraform
// plan writes no state, and clusterctl move need not wait for it): one
// such plan at least must have been seen.
func blockedWhileWriting(t *testing.T, versions []*infrav1.TerraformCluster) {
	t.Helper()
	plans := 0
	for _, tc := range versions {
		a := tc.Status.ActiveJob
		if a == nil {
			continue
		}
		_, blocking := tc.Annotations[engine.AnnotationBlockMove]
		switch {
		case a.Operation == infrav1.OperationApply && !blocking:
			t.Errorf("%s at resourceVersion %s: apply Job %s runs without %s", tc.Name, tc.ResourceVersion, a.Name, engine.AnnotationBlockMove)
		case a.Operation == infrav1.OperationPlan && tc.Status.StateSerial != nil:
			plans++
			if blocking {
				t.Errorf("%s at resourceVersion %s: plan Job %s of an existing state holds clusterctl move (%s)", tc.Name, tc.ResourceVersion, a.Name, engine.AnnotationBlockMove)
			}
		}
	}
	if plans == 0 {
		t.Error("no version showed a plan Job of an existing state running")
	}
}

// TestMoveOnlyPlan: a new module version that only renames a resource
// (a moved block) plans a move and nothing else, which waits for approval.
func TestMoveOnlyPlan(t *testing.T) {
	h := start(t)
	tc := h.create("mover", infrav1.ApplyManual, "small")
	h.wait(tc, "first apply", ready)
	before := tc.DeepCopy()
	tc.Spec.Image = movedImage
	if err := h.c.Patch(context.Background(), tc, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	p := h.waitingPlan(tc, infrav1.ReasonPlanAwaitingApproval)
	if p.Add+p.Change+p.Destroy != 0 || len(p.Resources) != 1 || p.Resources[0] != "module.main.terraform_data.renamed (move)" {
		t.Errorf("move-only plan %+v", p)
	}
	h.approve(tc, p.PlanHash)
	h.wait(tc, "applied", func(tc *infrav1.TerraformCluster) bool { return ready(tc) && tc.Status.Plan == nil })
}

// TestPlanChanged approves a plan that is stale by the time it is applied:
// nothing is applied, the new plan replaces the old one and waits, and the
// move is not a failure. Switching to Automatic then applies what waited.
func TestPlanChanged(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	tc := h.create("moving", infrav1.ApplyManual, "small")
	h.wait(tc, "first apply", ready)
	stateBefore := h.stateHash(tc)

	h.setVar(tc, "moving", "true")
	p := h.waitingPlan(tc, infrav1.ReasonPlanAwaitingApproval)
	// plantimestamp() has a resolution of one second: let one pass so the
	// apply's fresh plan cannot fall in the same second as this one.
	time.Sleep(1100 * time.Millisecond)
	h.approve(tc, p.PlanHash)
	fresh := h.waitingPlan(tc, infrav1.ReasonPlanChanged)
	if fresh.PlanHash == p.PlanHash {
		t.Fatal("the plan changed but status.plan still holds the approved hash")
	}
	if run := tc.Status.LastRun; run == nil || run.Error == nil || run.Error.Kind != infrav1.ErrorKindPlanChanged || tc.Status.Failures != 0 {
		t.Errorf("lastRun %+v, failures %d", tc.Status.LastRun, tc.Status.Failures)
	}
	if c := condition(tc, infrav1.ConditionApplyJobSucceeded); c.Status != metav1.ConditionUnknown || !strings.Contains(c.Message, "captf.io/approve-plan="+fresh.PlanHash) {
		t.Errorf("condition %+v", c)
	}
	var job batchv1.Job
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: tc.Status.LastRun.Job}, &job); err != nil || job.Annotations[infrav1.AnnotationPlanChanged] == "" {
		t.Errorf("the refused Job is not annotated %s: %v", infrav1.AnnotationPlanChanged, job.Annotations)
	}
	if got := h.stateHash(tc); got != stateBefore {
		t.Error("a refused apply changed the state")
	}
	evs := h.events(tc)
	for _, e := range evs {
		if e.Reason == infrav1.EventPlanChanged && e.Type != corev1.EventTypeWarning {
			t.Errorf("PlanChanged is a %s event", e.Type)
		}
	}
	if count(evs, infrav1.EventPlanChanged) != 1 || count(evs, infrav1.EventPlanApplied) != 0 {
		t.Errorf("events %v", reasons(evs))
	}

	// Switching to Automatic applies what waited and clears status.plan;
	// the plan that waited became moot.
	waiting := tc.Status.PendingPlanRef
	if waiting == nil {
		t.Fatal("no live TerraformPlan for the new plan")
	}
	before := tc.DeepCopy()
	tc.Spec.ApplyPolicy = infrav1.ApplyAutomatic
	if err := h.c.Patch(ctx, tc, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	// Ready stays True while the apply runs: wait for its outcome. The
	// reconcile that records it writes the status mid-way, and supersedes
	// the plan after: wait for that too.
	h.wait(tc, "applied under Automatic, the plan that waited superseded", func(tc *infrav1.TerraformCluster) bool {
		run := tc.Status.LastRun
		plan := h.plans(tc)[waiting.Name]
		return ready(tc) && tc.Status.Plan == nil && tc.Status.ActiveJob == nil && run != nil && run.Succeeded && run.Operation == infrav1.OperationApply &&
			tc.Status.PendingPlanRef == nil && plan != nil && plan.Labels[infrav1.LabelPlanPhase] == string(infrav1.PlanSuperseded)
	})
	if h.stateHash(tc) == stateBefore {
		t.Error("nothing was applied after the switch to Automatic")
	}
}

// TestOutputOnlyPlan: a plan that changes only an output waits for
// approval like any other.
func TestOutputOnlyPlan(t *testing.T) {
	h := start(t)
	tc := h.create("outputs", infrav1.ApplyManual, "small")
	h.wait(tc, "first apply", ready)
	h.setVar(tc, "label", `"blue"`)
	p := h.waitingPlan(tc, infrav1.ReasonPlanAwaitingApproval)
	if p.Add+p.Change+p.Destroy != 0 || p.OutputChanges == 0 || len(p.Resources) != 0 {
		t.Errorf("output-only plan %+v", p)
	}
	h.approve(tc, p.PlanHash)
	h.wait(tc, "applied", func(tc *infrav1.TerraformCluster) bool { return ready(tc) && tc.Status.Plan == nil })
}

// TestApprovalRace writes a newer approval while the approved apply runs:
// the manager consumes only the value it applied, so the newer one stays.
func TestApprovalRace(t *testing.T) {
	h := start(t)
	tc := h.create("race", infrav1.ApplyManual, "small")
	h.wait(tc, "first apply", ready)
	h.setSize(tc, "medium")
	p := h.waitingPlan(tc, infrav1.ReasonPlanAwaitingApproval)
	h.approve(tc, p.PlanHash)
	h.wait(tc, "the approved apply starts", func(tc *infrav1.TerraformCluster) bool {
		return tc.Status.ActiveJob != nil && tc.Status.ActiveJob.Operation == infrav1.OperationApply
	})
	newer := "p2:" + strings.Repeat("0", 64)
	h.approve(tc, newer)
	h.wait(tc, "applied", func(tc *infrav1.TerraformCluster) bool { return ready(tc) && tc.Status.Plan == nil })
	if got := tc.Annotations[infrav1.AnnotationApprovePlan]; got != newer {
		t.Errorf("approve-plan = %q after the apply, want the newer %q to survive", got, newer)
	}
	if n := count(h.events(tc), infrav1.EventPlanApplied); n != 1 {
		t.Errorf("%d PlanApplied events", n)
	}
}

// TestFailedApplyKeepsApproval: an approved apply that fails keeps the
// annotation and status.plan, counts a failure, and is retried with the
// same expected plan after the backoff; since the failed apply changed
// something (a tainted resource), that retry finds another plan.
func TestFailedApplyKeepsApproval(t *testing.T) {
	h := start(t)
	tc := h.create("failing", infrav1.ApplyManual, "small")
	h.wait(tc, "first apply", ready)
	h.setVar(tc, "fail", "true")
	p := h.waitingPlan(tc, infrav1.ReasonPlanAwaitingApproval)
	objects := record[*infrav1.TerraformCluster](h, &infrav1.TerraformClusterList{}, tc.Namespace)
	plans := record[*infrav1.TerraformPlan](h, &infrav1.TerraformPlanList{}, tc.Namespace)
	jobs := record[*batchv1.Job](h, &batchv1.JobList{}, tc.Namespace)
	h.approve(tc, p.PlanHash)

	// What the failure left is read from the write that counted it: by the
	// time a later read comes, the retry may run (Unknown/Applying).
	failed := objects.first(h, "the failed apply", func(o *infrav1.TerraformCluster) bool {
		return o.Name == tc.Name && o.Status.Failures == 1
	})
	if c := condition(failed, infrav1.ConditionApplyJobSucceeded); c == nil || c.Status != metav1.ConditionFalse || c.Reason != engine.ReasonApplyFailed {
		t.Errorf("condition when the failure was counted: %+v", c)
	}
	if failed.Annotations[infrav1.AnnotationApprovePlan] != p.PlanHash {
		t.Error("a failed apply consumed the approval")
	}
	if failed.Status.Plan == nil || failed.Status.Plan.PlanHash != p.PlanHash {
		t.Errorf("status.plan after the failure: %+v", failed.Status.Plan)
	}
	ref := failed.Status.PendingPlanRef
	if ref == nil {
		t.Fatal("no live TerraformPlan after a failed step")
	}

	// The retry expects the same plan and finds the tainted resource.
	fresh := h.waitingPlan(tc, infrav1.ReasonPlanChanged)
	if fresh.PlanHash == p.PlanHash || tc.Status.Failures != 1 {
		t.Errorf("after the retry: plan %s, failures %d", fresh.PlanHash, tc.Status.Failures)
	}
	// The apply Jobs of the approval, in the order they were created (the
	// first version a watch sees of a Job is its creation), and how they
	// ended.
	var applies []string
	created, failedJob := map[string]uint64{}, map[string]bool{}
	for _, j := range jobs.all() {
		if j.Annotations[infrav1.AnnotationApprovedPlan] != p.PlanHash {
			continue
		}
		if _, ok := created[j.Name]; !ok {
			created[j.Name] = revision(j)
			applies = append(applies, j.Name)
		}
		failedJob[j.Name] = failedJob[j.Name] || j.Status.Failed > 0
	}
	if len(applies) != 2 {
		t.Fatalf("apply Jobs %v expected %s, want the failed one and its retry", applies, p.PlanHash)
	}
	if !failedJob[applies[0]] {
		t.Errorf("the first apply Job %s is not seen failed", applies[0])
	}
	// Its TerraformPlan stays Approved while the apply is retried: it
	// leaves Approved only after the retry was created.
	approved := false
	for _, v := range plans.all() {
		if v.Name != ref.Name {
			continue
		}
		phase := infrav1.PlanPhase(v.Labels[infrav1.LabelPlanPhase])
		if phase == infrav1.PlanApproved {
			approved = true
		} else if approved {
			if revision(v) < created[applies[1]] {
				t.Errorf("the plan went %s before the retry %s was created", phase, applies[1])
			}
			break
		}
	}
	if !approved {
		t.Errorf("TerraformPlan %s was never seen Approved", ref.Name)
	}
}

// TestLeftoverApproval: an approval of a plan that became moot stays on
// the object and approves a later plan with the same hash (spec 001's
// warning), which, since the hash binds values, means the same change.
func TestLeftoverApproval(t *testing.T) {
	h := start(t)
	tc := h.create("leftover", infrav1.ApplyManual, "small")
	h.wait(tc, "first apply", ready)
	h.setSize(tc, "large")
	large := h.waitingPlan(tc, infrav1.ReasonPlanAwaitingApproval)

	// The inputs move on before anyone approves; then large is approved.
	h.setSize(tc, "medium")
	h.wait(tc, "a plan for medium", func(tc *infrav1.TerraformCluster) bool {
		return tc.Status.Plan != nil && tc.Status.ActiveJob == nil && tc.Status.Plan.PlanHash != large.PlanHash
	})
	h.approve(tc, large.PlanHash)
	time.Sleep(2 * time.Second)
	if err := h.c.Get(context.Background(), client.ObjectKeyFromObject(tc), tc); err != nil {
		t.Fatal(err)
	}
	if tc.Status.ActiveJob != nil || tc.Status.Plan == nil || tc.Status.Plan.PlanHash == large.PlanHash {
		t.Fatalf("an approval of another plan started something: %+v", tc.Status)
	}

	// Back to large: the same plan, so the leftover approval applies it.
	h.setSize(tc, "large")
	h.wait(tc, "applied with the leftover approval", func(tc *infrav1.TerraformCluster) bool {
		return ready(tc) && tc.Status.Plan == nil && tc.Annotations[infrav1.AnnotationApprovePlan] == ""
	})
	if n := count(h.events(tc), infrav1.EventPlanApplied); n != 1 {
		t.Errorf("%d PlanApplied events", n)
	}
}

func (h *harness) stateHash(tc *infrav1.TerraformCluster) string {
	h.t.Helper()
	if len(h.stateSecrets(tc)) == 0 {
		return ""
	}
	hash, err := render.StateInputsHash(h.storedChunks(tc)...)
	if err != nil {
		h.t.Fatal(err)
	}
	return hash
}

// TestDeletionDestroys deletes an applied object: a destroy Job (no plan
// key) destroys what the state holds, then the Secrets go and the object
// is released.
func TestDeletionDestroys(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	tc := h.create("doomed", infrav1.ApplyManual, "small")
	h.wait(tc, "first apply", ready)
	if !slices.Contains(tc.Finalizers, engine.Finalizer) {
		t.Fatalf("finalizers %v", tc.Finalizers)
	}
	if err := h.c.Delete(ctx, tc); err != nil {
		t.Fatal(err)
	}
	h.gone(tc, "the destroy")
	var destroy *batchv1.Job
	for _, j := range h.jobs(tc) {
		if j.Labels["captf.io/operation"] == "destroy" {
			destroy = &j
		}
	}
	if destroy == nil || destroy.Status.Succeeded != 1 {
		t.Fatalf("no successful destroy Job: %+v", destroy)
	}
	if mounted, _ := planKeyMount(destroy); mounted {
		t.Error("the destroy Job mounts the plan key")
	}
	for _, name := range []string{engine.PlanKeyName("tfc", "doomed"), engine.InputsName("tfc", "doomed"), engine.StateSecretName("tfc", "doomed")} {
		var s corev1.Secret
		if err := h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &s); !apierrors.IsNotFound(err) {
			t.Errorf("Secret %s survived the cleanup: %v", name, err)
		}
	}
}

func TestInvalidInputs(t *testing.T) {
	h := start(t)
	tc := h.create("broken", infrav1.ApplyAutomatic, "small", func(tc *infrav1.TerraformCluster) {
		tc.Spec.Variables[1].ValueFrom.SecretKeyRef.Name = "missing"
	})
	h.wait(tc, "invalid inputs", func(tc *infrav1.TerraformCluster) bool {
		c := condition(tc, infrav1.ConditionApplyJobSucceeded)
		return c != nil && c.Reason == engine.ReasonInvalidInputs
	})
	if c := condition(tc, infrav1.ConditionApplyJobSucceeded); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "variable token: Secret missing") {
		t.Errorf("condition %+v", c)
	}
	if jobs := h.jobs(tc); len(jobs) != 0 {
		t.Errorf("%d Jobs started for invalid inputs", len(jobs))
	}

	// The missing Secret appears: the object applies at once. Invalid
	// inputs wait out Recheck (10 minutes), so only the watch of Secrets
	// can bring it back within the wait.
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "missing", Namespace: "default"}, Data: map[string][]byte{"token": []byte(canary)}}
	if err := h.c.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	h.wait(tc, "applied once the Secret exists", ready)
}

func TestInputsDoNotFitTheModule(t *testing.T) {
	h := start(t)
	// The module declares moving as a bool.
	tc := h.create("misfit", infrav1.ApplyAutomatic, "small", func(tc *infrav1.TerraformCluster) {
		tc.Spec.Variables = append(tc.Spec.Variables, infrav1.Variable{Name: "moving", Value: &apiextensionsv1.JSON{Raw: []byte(`"` + canary + `-moving"`)}})
	})
	h.wait(tc, "inputs refused by the module", func(tc *infrav1.TerraformCluster) bool {
		c := condition(tc, infrav1.ConditionApplyJobSucceeded)
		return c != nil && c.Reason == engine.ReasonInvalidInputs
	})
	c := condition(tc, infrav1.ConditionApplyJobSucceeded)
	if !strings.Contains(c.Message, "(bad-input): ") || !strings.Contains(c.Message, "the inputs do not fit the module: Invalid value for input variable (moving)") {
		t.Errorf("condition message %q", c.Message)
	}
	if strings.Contains(c.Message, canary) || tc.Status.LastRun.Error.Kind != "bad-input" {
		t.Errorf("last run %+v", tc.Status.LastRun)
	}
}

func TestVariablesFromWatched(t *testing.T) {
	h := start(t)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "labels", Namespace: "default", Labels: map[string]string{"captf.test/vars": "yes"}},
		Data:       map[string]string{"label": "blue"},
	}
	if err := h.c.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	tc := h.create("watched", infrav1.ApplyAutomatic, "small", func(tc *infrav1.TerraformCluster) {
		tc.Spec.VariablesFrom = []infrav1.VariablesSource{{Kind: "ConfigMap", Selector: metav1.LabelSelector{MatchLabels: map[string]string{"captf.test/vars": "yes"}}}}
	})
	h.wait(tc, "first apply", ready)
	first := tc.Status.LastRun.Job

	// New data in a selected ConfigMap is a new input: it applies without
	// waiting for the 10-minute re-check.
	before := cm.DeepCopy()
	cm.Data["label"] = "green"
	if err := h.c.Patch(context.Background(), cm, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	h.wait(tc, "second apply", func(tc *infrav1.TerraformCluster) bool {
		return ready(tc) && tc.Status.LastRun.Job != first
	})
	if n := len(h.jobs(tc)); n != 2 {
		t.Errorf("%d Jobs, want 2 applies", n)
	}
	if got := tc.Spec.ControlPlaneEndpoint.Host; got != "api.green.example.test" {
		t.Errorf("controlPlaneEndpoint.host %q after the label moved", got)
	}
}

func reasons(evs []eventsv1.Event) []string {
	var r []string
	for _, e := range evs {
		r = append(r, e.Reason)
	}
	return r
}

func TestBadImageReference(t *testing.T) {
	h := start(t)
	tc := h.create("badref", infrav1.ApplyAutomatic, "small", func(tc *infrav1.TerraformCluster) {
		tc.Spec.Image = "example.test/Module::1"
	})
	h.wait(tc, "invalid image", func(tc *infrav1.TerraformCluster) bool {
		c := condition(tc, infrav1.ConditionApplyJobSucceeded)
		return c != nil && c.Reason == engine.ReasonInvalidInputs
	})
	if c := condition(tc, infrav1.ConditionApplyJobSucceeded); !strings.Contains(c.Message, `image "example.test/Module::1": invalid reference format`) {
		t.Errorf("condition message %q does not explain the reference", c.Message)
	}
	if jobs := h.jobs(tc); len(jobs) != 0 {
		t.Errorf("%d Jobs started for an invalid image reference", len(jobs))
	}
}

func TestImagePullAndPin(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	tc := h.create("pin", infrav1.ApplyAutomatic, "small", func(tc *infrav1.TerraformCluster) {
		tc.Spec.Image = "example.test/absent:1"
	})
	h.wait(tc, "an image that cannot be pulled", func(tc *infrav1.TerraformCluster) bool {
		c := condition(tc, infrav1.ConditionApplyJobSucceeded)
		return c != nil && c.Reason == engine.ReasonImagePullFailed
	})
	stuck := tc.Status.ActiveJob.Name
	if c := condition(tc, infrav1.ConditionApplyJobSucceeded); c.Status != metav1.ConditionFalse ||
		!strings.Contains(c.Message, "Job "+stuck+" cannot start: container terraform cannot pull image example.test/absent:1 (ErrImagePull)") {
		t.Errorf("condition %+v", c)
	}

	// The reference is fixed: the stuck Job (which never ran the runner)
	// goes at once, without waiting for its deadline, and the apply runs.
	before := tc.DeepCopy()
	tc.Spec.Image = moduleImage
	if err := h.c.Patch(ctx, tc, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	h.wait(tc, "applied with the fixed image", ready)
	var job batchv1.Job
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: stuck}, &job); !apierrors.IsNotFound(err) && job.DeletionTimestamp == nil {
		t.Errorf("the stuck Job %s is still there (%v)", stuck, err)
	}

	// The digest the apply ran is pinned, and the next run uses it.
	if got := h.durableInputs(tc).Annotations[infrav1.AnnotationImageDigest]; got != testnode.Digest(moduleImage) {
		t.Errorf("pinned digest %q, want %q", got, testnode.Digest(moduleImage))
	}
	h.setSize(tc, "medium")
	h.wait(tc, "second apply", func(tc *infrav1.TerraformCluster) bool {
		return ready(tc) && tc.Status.Failures == 0 && h.lastJobImage(tc) != ""
	})
	if got, want := h.lastJobImage(tc), moduleImage+"@"+testnode.Digest(moduleImage); got != want {
		t.Errorf("second apply ran %s, want the pinned %s", got, want)
	}

	// A new reference clears the pin; its own digest is pinned after the
	// next successful apply.
	before = tc.DeepCopy()
	tc.Spec.Image = moduleImage2
	if err := h.c.Patch(ctx, tc, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	h.wait(tc, "applied with the new reference", func(tc *infrav1.TerraformCluster) bool {
		return ready(tc) && h.lastJobImage(tc) == moduleImage2
	})
	if got := h.durableInputs(tc).Annotations[infrav1.AnnotationImageDigest]; got != testnode.Digest(moduleImage2) {
		t.Errorf("pinned digest %q after the new reference, want %q", got, testnode.Digest(moduleImage2))
	}
}

func (h *harness) durableInputs(tc *infrav1.TerraformCluster) *corev1.Secret {
	h.t.Helper()
	var s corev1.Secret
	if err := h.c.Get(context.Background(), client.ObjectKey{Namespace: tc.Namespace, Name: engine.InputsName("tfc", tc.Name)}, &s); err != nil {
		h.t.Fatal(err)
	}
	return &s
}

// lastJobImage is the runner container image of the last finished Job.
func (h *harness) lastJobImage(tc *infrav1.TerraformCluster) string {
	if tc.Status.LastRun == nil {
		return ""
	}
	var job batchv1.Job
	if err := h.c.Get(context.Background(), client.ObjectKey{Namespace: tc.Namespace, Name: tc.Status.LastRun.Job}, &job); err != nil {
		return ""
	}
	return engine.JobContainer(&job).Image
}

// condition is the condition typ of tc's status, nil when it has none.
func condition(tc *infrav1.TerraformCluster, typ string) *metav1.Condition {
	return meta.FindStatusCondition(tc.Status.Conditions, typ)
}

// annotate sets an annotation of tc, making the map when it has none.
func annotate(tc *infrav1.TerraformCluster, key, value string) {
	if tc.Annotations == nil {
		tc.Annotations = map[string]string{}
	}
	tc.Annotations[key] = value
}

// ptrString is *p as text, "nil" for nil.
func ptrString[T any](p *T) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}
