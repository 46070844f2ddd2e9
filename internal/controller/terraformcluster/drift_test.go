package terraformcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/testenv"
	"github.com/captf/captf/internal/testnode"
	"github.com/captf/captf/internal/tftest"
)

// Module images of testdata/drift, whose captftest files drift when the
// test edits them: with terraform and with tofu.
const (
	driftImage     = "example.test/drift:1"
	driftImageTofu = "example.test/drift-tofu:1"
	// providerRootImage holds testdata/provider-root, whose provider
	// configuration is a variable, with terraform.
	providerRootImage = "example.test/provider-root:1"
	// Values that must never reach status, events or TerraformPlans.
	driftCanary  = "CANARY-DRIFT-CONTENT-41f2"
	editedCanary = "CANARY-DRIFT-EDITED-8a0c"
)

// driftHarness is a harness whose node also runs the drift module, with
// captftest installed from the tests' mirror and its files under files.
type driftHarness struct {
	*harness
	files string
}

// managerLog is what the manager logs in this test process at debug
// level (--zap-log-level=debug) since the last startDrift: the drift tests
// check it for values. (Far beyond debug, client-go logs whole request
// and response bodies, Secrets included: docs/operations.md, Flags.)
// The logger is set when the process starts: controller-runtime drops a
// logger set more than 30 s after the first log line.
var managerLog struct {
	mu sync.Mutex
	// on: a drift test runs; the others' lines are not kept.
	on  bool
	buf bytes.Buffer
}

func init() {
	ctrl.SetLogger(zap.New(zap.WriteTo(lockedLog{}), zap.Level(zapcore.DebugLevel)))
}

type lockedLog struct{}

func (lockedLog) Write(p []byte) (int, error) {
	managerLog.mu.Lock()
	defer managerLog.mu.Unlock()
	if !managerLog.on {
		return len(p), nil
	}
	return managerLog.buf.Write(p)
}

func startDrift(t *testing.T) *driftHarness {
	return startDriftOn(t, testenv.Start(t, "../../.."))
}

// startDriftOn is startDrift on env; more add to the node.
func startDriftOn(t *testing.T, env *testenv.Env, more ...func(*testnode.Node)) *driftHarness {
	return startDriftAs(t, env, nil, more...)
}

// startDriftAs is startDriftOn with the manager running as cfg (nil: the
// administrator), as it must where the webhooks are served.
func startDriftAs(t *testing.T, env *testenv.Env, cfg *rest.Config, more ...func(*testnode.Node)) *driftHarness {
	managerLog.mu.Lock()
	managerLog.buf.Reset()
	managerLog.on = true
	managerLog.mu.Unlock()
	t.Cleanup(func() {
		managerLog.mu.Lock()
		defer managerLog.mu.Unlock()
		managerLog.on = false
		if t.Failed() {
			// The manager's last words (debug level: never a value).
			log := managerLog.buf.String()
			t.Logf("manager log, last 6000 bytes:\n%s", log[max(0, len(log)-6000):])
		}
	})
	p := tftest.Provider(t)
	files := t.TempDir()
	module, _ := filepath.Abs("testdata/drift")
	rootModule, _ := filepath.Abs("testdata/provider-root")
	runtimes := map[string]tftest.Binary{driftImage: tftest.Terraform(t), driftImageTofu: tftest.Tofu(t)}
	h := startEnv(t, env, cfg, append([]func(*testnode.Node){func(n *testnode.Node) {
		for image, bin := range runtimes {
			dir := t.TempDir()
			if err := os.Symlink(bin.Path, filepath.Join(dir, bin.Name)); err != nil {
				t.Fatal(err)
			}
			n.Images[image] = []testnode.Image{{Path: infrav1.PathModule, Dir: module}, {Path: infrav1.PathRuntime, Dir: dir}}
		}
		n.Images[providerRootImage] = []testnode.Image{{Path: infrav1.PathModule, Dir: rootModule}, n.Images[driftImage][1]}
		n.Env = append(n.Env, "TF_CLI_CONFIG_FILE="+p.CLIConfig, tftest.ProviderRootEnv+"="+files)
	}}, more...)...)
	return &driftHarness{harness: h, files: files}
}

// createDrift creates an object of the drift module checked every
// interval seconds.
func (h *driftHarness) createDrift(name, image string, policy infrav1.ApplyPolicy, action infrav1.DriftAction, interval int32, mutate ...func(*infrav1.TerraformCluster)) *infrav1.TerraformCluster {
	h.t.Helper()
	return h.create(name, policy, "", append([]func(*infrav1.TerraformCluster){func(tc *infrav1.TerraformCluster) {
		tc.Spec.Image = image
		tc.Spec.Variables = []infrav1.Variable{
			{Name: "dir", Value: &apiextensionsv1.JSON{Raw: []byte(`"` + name + `"`)}},
			{Name: "content", Value: &apiextensionsv1.JSON{Raw: []byte(`"` + driftCanary + `"`)}},
		}
		tc.Spec.Drift = infrav1.DriftSpec{IntervalSeconds: ptr.To(interval), Action: action}
		// Every Job is kept, so the tests can count them.
		tc.Spec.Jobs.SuccessfulJobsHistoryLimit = ptr.To(int32(100))
	}}, mutate...)...)
}

func (h *driftHarness) path(tc *infrav1.TerraformCluster, file string) string {
	return filepath.Join(h.files, tc.Name, file)
}

func (h *driftHarness) edit(tc *infrav1.TerraformCluster, file string) {
	h.t.Helper()
	if err := os.WriteFile(h.path(tc, file), []byte(editedCanary), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

func (h *driftHarness) content(tc *infrav1.TerraformCluster, file string) string {
	h.t.Helper()
	b, err := os.ReadFile(h.path(tc, file))
	if err != nil {
		h.t.Fatal(err)
	}
	return string(b)
}

// driftIs waits for DriftDetected with reason.
func (h *driftHarness) driftIs(tc *infrav1.TerraformCluster, reason string) {
	h.t.Helper()
	h.wait(tc, "DriftDetected "+reason, func(tc *infrav1.TerraformCluster) bool {
		c := condition(tc, infrav1.ConditionDriftDetected)
		return c != nil && c.Reason == reason
	})
}

// jobNames are the names of tc's Jobs of op.
func (h *driftHarness) jobNames(tc client.Object, op infrav1.Operation) []string {
	var names []string
	for _, j := range h.jobs(tc) {
		if j.Labels[engine.LabelOperation] == string(op) {
			names = append(names, j.Name)
		}
	}
	return names
}

// opJobs counts tc's Jobs of op.
func (h *driftHarness) opJobs(tc *infrav1.TerraformCluster, op infrav1.Operation) int {
	return len(h.jobNames(tc, op))
}

// noValues fails if tc's status, its events, its TerraformPlans or the
// manager's debug log hold a value of the module.
func (h *driftHarness) noValues(tc *infrav1.TerraformCluster) {
	h.t.Helper()
	var plans infrav1.TerraformPlanList
	if err := h.c.List(context.Background(), &plans, client.InNamespace(tc.Namespace)); err != nil {
		h.t.Fatal(err)
	}
	managerLog.mu.Lock()
	log := managerLog.buf.String()
	managerLog.mu.Unlock()
	if log == "" {
		h.t.Fatal("the manager logged nothing: the check of its log proves nothing")
	}
	for _, v := range []any{tc.Status, h.events(tc), plans.Items, log} {
		b, _ := json.Marshal(v)
		for _, canary := range []string{driftCanary, editedCanary} {
			if strings.Contains(string(b), canary) {
				h.t.Fatalf("a value reached the API: %s", b)
			}
		}
	}
}

// TestDriftReport: a drift check finds an edit outside terraform, reports
// it by address and action, and changes nothing; with terraform and tofu.
func TestDriftReport(t *testing.T) {
	h := startDrift(t)
	objs := []*infrav1.TerraformCluster{
		h.createDrift("report-tf", driftImage, infrav1.ApplyAutomatic, "", 2),
		h.createDrift("report-tofu", driftImageTofu, infrav1.ApplyAutomatic, "", 2),
	}
	for _, tc := range objs {
		h.wait(tc, "first apply", ready)
		h.driftIs(tc, infrav1.ReasonNoDrift)
		if c := condition(tc, infrav1.ConditionDriftJobSucceeded); c == nil || c.Status != metav1.ConditionTrue || tc.Status.LastDriftCheck == nil {
			t.Fatalf("%s: after a good check: %+v", tc.Name, tc.Status)
		}
		// No plan key on a drift Job.
		for _, j := range h.jobs(tc) {
			if mounted, _ := planKeyMount(&j); mounted && j.Labels[engine.LabelOperation] == string(infrav1.OperationDrift) {
				t.Errorf("drift Job %s mounts the plan key", j.Name)
			}
		}
		h.edit(tc, "a.txt")
		if err := os.Remove(h.path(tc, "b.txt")); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range objs {
		h.driftIs(tc, infrav1.ReasonDriftReported)
		d := tc.Status.LastRun.Drift
		want := []string{"module.main.captftest_file.a (update)", "module.main.captftest_file.b (create)"}
		if tc.Status.LastRun.Operation != infrav1.OperationDrift || d == nil || d.Update != 1 || d.Create != 1 || d.Replace != 0 || d.Delete != 0 || !slices.Equal(d.Resources, want) {
			t.Fatalf("%s: lastRun %+v, drift %+v", tc.Name, tc.Status.LastRun, d)
		}
		if count(h.events(tc), infrav1.EventDriftDetected) == 0 {
			t.Errorf("%s: no DriftDetected event", tc.Name)
		}
		// Report changes nothing: no apply ran, the edit stays.
		if n := h.opJobs(tc, infrav1.OperationApply); n != 1 {
			t.Errorf("%s: %d apply Jobs under Report", tc.Name, n)
		}
		if got := h.content(tc, "a.txt"); got != editedCanary {
			t.Errorf("%s: a.txt was changed under Report", tc.Name)
		}
		if c := condition(tc, infrav1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
			t.Errorf("%s: drift made Ready %+v", tc.Name, c)
		}
		h.noValues(tc)
	}
}

// TestDriftRemediateAutomatic: drift is undone by an apply.
func TestDriftRemediateAutomatic(t *testing.T) {
	h := startDrift(t)
	tc := h.createDrift("remedy", driftImage, infrav1.ApplyAutomatic, infrav1.DriftActionRemediate, 2)
	h.wait(tc, "first apply", ready)
	h.driftIs(tc, infrav1.ReasonNoDrift)
	h.edit(tc, "a.txt")
	h.wait(tc, "drift undone", func(tc *infrav1.TerraformCluster) bool {
		c := condition(tc, infrav1.ConditionDriftDetected)
		return c != nil && c.Reason == infrav1.ReasonNoDrift && strings.HasPrefix(c.Message, "Apply ")
	})
	if got := h.content(tc, "a.txt"); got != driftCanary {
		t.Fatalf("a.txt after remediation: %q", got)
	}
	if n := h.opJobs(tc, infrav1.OperationApply); n != 2 {
		t.Errorf("%d apply Jobs, want the first and the remediation", n)
	}
	if count(h.events(tc), infrav1.EventDriftDetected) != 1 {
		t.Errorf("events: %v", h.events(tc))
	}
	h.noValues(tc)
}

// TestDriftRemediateManual: under Manual, a drift check runs while the
// plan of a changed input waits; Report leaves that plan alone, Remediate
// replaces it by a plan that also undoes the drift, and only its approval
// applies.
func TestDriftRemediateManual(t *testing.T) {
	h := startDrift(t)
	tc := h.createDrift("manual-drift", driftImage, infrav1.ApplyManual, infrav1.DriftActionReport, 2)
	h.wait(tc, "first apply", ready)
	h.driftIs(tc, infrav1.ReasonNoDrift)
	h.setVar(tc, "content", `"`+driftCanary+`-2"`)
	waiting := h.waitingPlan(tc, infrav1.ReasonPlanAwaitingApproval)
	h.edit(tc, "b.txt")
	h.driftIs(tc, infrav1.ReasonDriftReported)
	if p := tc.Status.Plan; p == nil || p.PlanHash != waiting.PlanHash || tc.Status.PendingPlanRef == nil {
		t.Fatalf("a drift check under Report touched the waiting plan: %+v", tc.Status)
	}
	if got := h.content(tc, "b.txt"); got != editedCanary {
		t.Fatalf("b.txt changed without approval")
	}

	before := tc.DeepCopy()
	tc.Spec.Drift.Action = infrav1.DriftActionRemediate
	if err := h.c.Patch(context.Background(), tc, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	h.driftIs(tc, infrav1.ReasonDriftPending)
	h.wait(tc, "a plan that also undoes the drift", func(tc *infrav1.TerraformCluster) bool {
		p := tc.Status.Plan
		return p != nil && p.PlanHash != waiting.PlanHash && tc.Status.ActiveJob == nil && tc.Status.PendingPlanRef != nil
	})
	p := tc.Status.Plan
	if p.Change != 2 || !slices.Contains(p.Resources, "module.main.captftest_file.b (update)") {
		t.Fatalf("remediation plan: %+v", p)
	}
	var plan infrav1.TerraformPlan
	if err := h.c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: tc.Status.PendingPlanRef.Name}, &plan); err != nil {
		t.Fatal(err)
	}
	if plan.Spec.Reason != infrav1.ReasonManual {
		t.Errorf("TerraformPlan reason %q", plan.Spec.Reason)
	}
	// Nothing applies until approved: drift checks keep finding it.
	time.Sleep(3 * time.Second)
	if got, n := h.content(tc, "b.txt"), h.opJobs(tc, infrav1.OperationApply); got != editedCanary || n != 1 {
		var names []string
		for _, j := range h.jobs(tc) {
			names = append(names, j.Name)
		}
		t.Fatalf("applied without approval: b.txt changed %v, %d apply Jobs: %v", got != editedCanary, n, names)
	}
	h.approve(tc, h.waitingPlan(tc, infrav1.ReasonPlanAwaitingApproval).PlanHash)
	h.wait(tc, "the approved remediation", func(tc *infrav1.TerraformCluster) bool {
		c := condition(tc, infrav1.ConditionDriftDetected)
		return ready(tc) && tc.Status.Plan == nil && c != nil && c.Reason == infrav1.ReasonNoDrift
	})
	if a, b := h.content(tc, "a.txt"), h.content(tc, "b.txt"); a != driftCanary+"-2" || b != "b" {
		t.Fatalf("after the approved apply: a %q, b %q", a, b)
	}
	h.noValues(tc)
}

// TestDriftRemediationCap: a remediation that keeps failing stops after
// spec.jobs.failedJobsHistoryLimit failures, until the next check that
// finds drift starts the count again, or the inputs change.
func TestDriftRemediationCap(t *testing.T) {
	h := startDrift(t)
	tc := h.createDrift("capped", driftImage, infrav1.ApplyAutomatic, infrav1.DriftActionRemediate, 40, func(tc *infrav1.TerraformCluster) {
		tc.Spec.Jobs.FailedJobsHistoryLimit = ptr.To(int32(2))
	})
	h.wait(tc, "first apply", ready)
	// p.txt gone (drift: create) and a directory where its secret goes:
	// every create of it fails, and leaves nothing tainted to replace.
	secret := h.path(tc, ".p.txt.captftest-secret")
	for _, f := range []string{h.path(tc, "p.txt"), secret} {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(secret, 0o755); err != nil {
		t.Fatal(err)
	}
	h.driftIs(tc, infrav1.ReasonDriftRemediationFailed)
	if tc.Status.Failures != 2 {
		t.Fatalf("capped after %d failures, want 2", tc.Status.Failures)
	}
	// Nothing more is tried, not even by a reconcile that comes later (as
	// after a restart): one is made to come, and the retry's backoff
	// (2 s after the second failure) is waited out. Failed Jobs are
	// pruned to the limit, so Jobs are told apart by name, and the
	// failure count shows a retry that came and went.
	applies := h.jobNames(tc, infrav1.OperationApply)
	check := tc.Status.LastDriftCheck
	h.annotate(tc, "example.test/reconcile", "after the cap")
	time.Sleep(5 * time.Second)
	if err := h.c.Get(context.Background(), client.ObjectKeyFromObject(tc), tc); err != nil {
		t.Fatal(err)
	}
	if !tc.Status.LastDriftCheck.Equal(check) {
		t.Fatal("the next check came within 5 s of the cap; the cap's pause cannot be told from it")
	}
	if c := condition(tc, infrav1.ConditionDriftDetected); tc.Status.Failures != 2 || c == nil || c.Reason != infrav1.ReasonDriftRemediationFailed {
		t.Fatalf("after the cap: %d failures, DriftDetected %+v", tc.Status.Failures, c)
	}
	for _, name := range h.jobNames(tc, infrav1.OperationApply) {
		if !slices.Contains(applies, name) {
			t.Fatalf("apply Job %s started after the cap (before it: %v)", name, applies)
		}
	}
	// The next check that still finds drift starts the count again, and
	// stops remediation again after two more failures.
	h.wait(tc, "stopped again after the next check", func(tc *infrav1.TerraformCluster) bool {
		c := condition(tc, infrav1.ConditionDriftDetected)
		return !tc.Status.LastDriftCheck.Equal(check) && c != nil && c.Reason == infrav1.ReasonDriftRemediationFailed && tc.Status.Failures == 2
	})
	// New inputs lift the stop: their apply is retried after a failure
	// like any other, and the next check says whether drift remains.
	// The third failure is a state the retry after the backoff replaces
	// (a fourth failure): it is looked for in what was written, not in a
	// read that may come after the retry.
	objects := record[*infrav1.TerraformCluster](h.harness, &infrav1.TerraformClusterList{}, tc.Namespace)
	h.setVar(tc, "content", `"`+driftCanary+`-2"`)
	objects.first(h.harness, "the new inputs' apply failed", func(o *infrav1.TerraformCluster) bool {
		c := condition(o, infrav1.ConditionDriftDetected)
		return o.Name == tc.Name && c != nil && c.Reason == infrav1.ReasonDriftNotChecked && o.Status.Failures == 3
	})
	for _, f := range []string{h.path(tc, "p.txt"), secret} {
		if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	h.wait(tc, "the new inputs applied on retry", func(tc *infrav1.TerraformCluster) bool {
		run := tc.Status.LastRun
		return run != nil && run.Operation == infrav1.OperationApply && run.Succeeded && tc.Status.Failures == 0 && ready(tc)
	})
	if got := h.content(tc, "a.txt"); got != driftCanary+"-2" {
		t.Fatalf("a.txt after the new inputs applied: %q", got)
	}
	if _, err := os.Stat(h.path(tc, "p.txt")); err != nil {
		t.Fatalf("p.txt not made again: %v", err)
	}
	h.driftIs(tc, infrav1.ReasonNoDrift)
	h.noValues(tc)
}

// healthIs waits for InfrastructureHealthy with reason.
func (h *driftHarness) healthIs(tc *infrav1.TerraformCluster, reason string) {
	h.t.Helper()
	h.wait(tc, "InfrastructureHealthy "+reason, func(tc *infrav1.TerraformCluster) bool {
		c := condition(tc, infrav1.ConditionInfrastructureHealthy)
		return c != nil && c.Reason == reason
	})
}

func (h *driftHarness) write(tc *infrav1.TerraformCluster, file, content string) {
	h.t.Helper()
	if err := os.WriteFile(h.path(tc, file), []byte(content), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// TestHealth: the module's health output, sampled after the apply and
// with each drift check, moves InfrastructureHealthy and Ready; pending
// health is sampled again long before the drift interval.
func TestHealth(t *testing.T) {
	h := startDrift(t)
	tc := h.createDrift("health", driftImage, infrav1.ApplyAutomatic, "", 2)
	pending := h.createDrift("pending", driftImage, infrav1.ApplyAutomatic, "", 3600, func(tc *infrav1.TerraformCluster) {
		tc.Spec.Variables = append(tc.Spec.Variables, infrav1.Variable{Name: "health", Value: &apiextensionsv1.JSON{Raw: []byte(`"pending"`)}})
	})
	h.wait(tc, "first apply", ready)
	h.healthIs(tc, infrav1.ReasonHealthy)

	h.write(tc, "h.txt", "failed")
	h.healthIs(tc, infrav1.ReasonUnhealthy)
	if c := condition(tc, infrav1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse || c.Reason != infrav1.ReasonUnhealthy {
		t.Fatalf("Ready while unhealthy: %+v", c)
	}
	if !tc.Status.Ready {
		t.Error("failed health took back status.ready, the contract's provisioning flag")
	}
	h.write(tc, "h.txt", "CANARY-HEALTH-WORD")
	h.healthIs(tc, infrav1.ReasonHealthUnknown)
	if b, _ := json.Marshal(tc.Status); strings.Contains(string(b), "CANARY-HEALTH-WORD") {
		t.Fatalf("the health output's value reached status: %s", b)
	}
	if c := condition(tc, infrav1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Ready after failed health passed: %+v", c)
	}

	// Pending after the first apply: sampled again after about 30 s,
	// though drift checks run only hourly.
	h.wait(pending, "first apply", func(tc *infrav1.TerraformCluster) bool { return tc.Status.Ready })
	h.healthIs(pending, infrav1.ReasonProvisioning)
	h.write(pending, "h.txt", "running")
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if err := h.c.Get(context.Background(), client.ObjectKeyFromObject(pending), pending); err != nil {
			t.Fatal(err)
		}
		if c := condition(pending, infrav1.ConditionInfrastructureHealthy); c != nil && c.Reason == infrav1.ReasonHealthy {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pending health not sampled again within 2 minutes: %+v", pending.Status.Conditions)
		}
		time.Sleep(time.Second)
	}
}
