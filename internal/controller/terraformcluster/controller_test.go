package terraformcluster

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/testenv"
	"github.com/captf/captf/internal/testnode"
	"github.com/captf/captf/internal/tftest"
)

// These tests run the manager's reconciler against a real kube-apiserver
// and etcd, with the test node playing the kubelet, the real captf-runner
// and the real terraform; state lives in the API server through terraform's
// kubernetes backend.

const (
	moduleImage = "example.test/module:1"
	runnerImage = "example.test/captf-runner:dev"
	canary      = "CANARY-CONTROLLER-SECRET-77"
)

type harness struct {
	t   *testing.T
	env *testenv.Env
	c   client.Client
}

func start(t *testing.T) *harness {
	env := testenv.Start(t, "../../..")
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
	node := &testnode.Node{Client: env.Client, Namespace: "default",
		Images: map[string][]testnode.Image{
			moduleImage: {{Path: infrav1.PathModule, Dir: module}, {Path: infrav1.PathRuntime, Dir: runtimeDir}},
			runnerImage: {{Path: filepath.Dir(RunnerImagePath), Dir: runnerDir}},
		},
		Env: []string{"KUBE_CONFIG_PATH=" + env.Kubeconfig(t)},
	}
	node.Start(t)

	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Client.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("captf-manager"), RunnerImage: runnerImage, RetryBase: time.Second}
	skip := true // one controller per test, all in one process
	if err := r.SetupWithManager(mgr, controller.Options{SkipNameValidation: &skip}); err != nil {
		t.Fatal(err)
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
	return &harness{t: t, env: env, c: env.Client}
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
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if err := h.c.Get(context.Background(), client.ObjectKeyFromObject(tc), tc); err != nil {
			h.t.Fatal(err)
		}
		if cond(tc) {
			return
		}
		if time.Now().After(deadline) {
			b, _ := json.MarshalIndent(tc.Status, "", "  ")
			h.t.Fatalf("%s: not within 2 minutes; status:\n%s", what, b)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (h *harness) setSize(tc *infrav1.TerraformCluster, size string) {
	h.t.Helper()
	before := tc.DeepCopy()
	tc.Spec.Variables[0].Value = &apiextensionsv1.JSON{Raw: []byte(`"` + size + `"`)}
	if err := h.c.Patch(context.Background(), tc, client.MergeFrom(before)); err != nil {
		h.t.Fatal(err)
	}
}

func condition(tc *infrav1.TerraformCluster, typ string) *metav1.Condition {
	return meta.FindStatusCondition(tc.Status.Conditions, typ)
}

func ready(tc *infrav1.TerraformCluster) bool {
	c := condition(tc, infrav1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue && tc.Status.ActiveJob == nil && tc.Status.ObservedGeneration == tc.Generation
}

// events returns the reasons of the events about tc, in order.
func (h *harness) events(tc *infrav1.TerraformCluster) []eventsv1.Event {
	var list eventsv1.EventList
	if err := h.c.List(context.Background(), &list, client.InNamespace(tc.Namespace)); err != nil {
		h.t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == tc.Name && e.Regarding.Kind == "TerraformCluster" {
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

func (h *harness) jobs(tc *infrav1.TerraformCluster) []batchv1.Job {
	var list batchv1.JobList
	if err := h.c.List(context.Background(), &list, client.InNamespace(tc.Namespace), client.MatchingLabels{infrav1.LabelOwnerName: tc.Name}); err != nil {
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
	h.setSize(tc, "large")
	h.wait(tc, "second apply", func(tc *infrav1.TerraformCluster) bool {
		return ready(tc) && len(h.jobs(tc)) == 2
	})
	for _, j := range h.jobs(tc) {
		if j.Labels["captf.io/operation"] != "apply" {
			t.Errorf("Job %s runs %s under Automatic", j.Name, j.Labels["captf.io/operation"])
		}
		var s corev1.Secret
		if err := h.c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: runName(j.Name)}, &s); err == nil {
			t.Errorf("per-run Secret of finished Job %s still exists", j.Name)
		}
	}
}

func TestManualApproval(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	tc := h.create("manual", infrav1.ApplyManual, "small")

	// The first apply of a new object is not gated.
	h.wait(tc, "first apply", ready)

	// A change is planned and waits; waiting does not make Ready false.
	h.setSize(tc, "large")
	h.wait(tc, "plan waits", func(tc *infrav1.TerraformCluster) bool {
		c := condition(tc, infrav1.ConditionApplyJobSucceeded)
		return tc.Status.Plan != nil && c != nil && c.Reason == infrav1.ReasonPlanAwaitingApproval
	})
	p := tc.Status.Plan
	if p.Change != 1 || p.OutputChanges != 1 || !strings.HasPrefix(p.PlanHash, "p2:") || p.Job == "" || !strings.HasPrefix(p.InputsHash, "h2:") {
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

	// The sensitive value reaches no field of the object and no event; the
	// inline value (the user's own spec) reaches neither status nor events.
	obj, _ := json.Marshal(tc)
	status, _ := json.Marshal(tc.Status)
	evb, _ := json.Marshal(evs)
	if strings.Contains(string(obj)+string(evb), canary) || strings.Contains(string(status)+string(evb), "large") {
		t.Errorf("a value reached the object or its events")
	}
}

func TestInvalidInputs(t *testing.T) {
	h := start(t)
	tc := h.create("broken", infrav1.ApplyAutomatic, "small", func(tc *infrav1.TerraformCluster) {
		tc.Spec.Variables[1].ValueFrom.SecretKeyRef.Name = "missing"
	})
	h.wait(tc, "invalid inputs", func(tc *infrav1.TerraformCluster) bool {
		c := condition(tc, infrav1.ConditionApplyJobSucceeded)
		return c != nil && c.Reason == ReasonInvalidInputs
	})
	if c := condition(tc, infrav1.ConditionApplyJobSucceeded); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "variable token: Secret missing") {
		t.Errorf("condition %+v", c)
	}
	if jobs := h.jobs(tc); len(jobs) != 0 {
		t.Errorf("%d Jobs started for invalid inputs", len(jobs))
	}
}

func reasons(evs []eventsv1.Event) []string {
	var r []string
	for _, e := range evs {
		r = append(r, e.Reason)
	}
	return r
}
