package terraformcluster

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/testenv"
	"github.com/captf/captf/internal/testnode"
	"github.com/captf/captf/internal/tftest"
)

// The TerraformMachine kind on the run engine, with Cluster API's own
// Cluster and Machine controllers, the test node, the real runner and
// terraform with the test provider.

const (
	// machineImage holds testdata/machine.
	machineImage = "example.test/machine:1"
	// bootstrapCanary is the machines' bootstrap data: it reaches the
	// module (the files' secret) and nothing else.
	bootstrapCanary = "CANARY-BOOTSTRAP-5d1e"
)

// startMachines is a drift harness on an API server with Cluster API's
// CRDs and controllers, whose node also runs the machine, pool and
// exports modules.
func startMachines(t *testing.T) *driftHarness {
	return startMachinesAs(t, testenv.StartWithClusterAPI(t, "../../.."), nil)
}

// startMachinesAs is startMachines on env, with the manager running as
// cfg (nil: the administrator).
func startMachinesAs(t *testing.T, env *testenv.Env, cfg *rest.Config) *driftHarness {
	machine, _ := filepath.Abs("testdata/machine")
	pool, _ := filepath.Abs("testdata/pool")
	exports, _ := filepath.Abs("testdata/exports")
	h := startDriftAs(t, env, cfg, func(n *testnode.Node) {
		n.Images[machineImage] = []testnode.Image{{Path: infrav1.PathModule, Dir: machine}, n.Images[driftImage][1]}
		n.Images[poolImage] = []testnode.Image{{Path: infrav1.PathModule, Dir: pool}, n.Images[driftImage][1]}
		n.Images[exportsImage] = []testnode.Image{{Path: infrav1.PathModule, Dir: exports}, n.Images[moduleImage][1]}
	})
	h.runClusterAPI()
	return h
}

// readyReason waits for obj's Ready condition to have reason.
func readyReason[T engine.Object](h *driftHarness, obj T, reason string) {
	h.t.Helper()
	waitFor(h.harness, obj, "Ready reason "+reason, func(obj T) bool {
		c := meta.FindStatusCondition(obj.GetRunnerStatus().Conditions, infrav1.ConditionReady)
		return c != nil && c.Reason == reason
	})
}

// readyReasons are the reasons of Ready that the versions seen of the
// object name went through, each once in a row.
func readyReasons[T engine.Object](seen []T, name string) []string {
	var reasons []string
	for _, v := range seen {
		if v.GetName() != name {
			continue
		}
		if c := meta.FindStatusCondition(v.GetRunnerStatus().Conditions, infrav1.ConditionReady); c != nil && (len(reasons) == 0 || reasons[len(reasons)-1] != c.Reason) {
			reasons = append(reasons, c.Reason)
		}
	}
	return reasons
}

// noCanary fails the test when canary is in any of what (each marshaled
// as JSON), the manager's log or the logs of the node's Jobs.
func (h *driftHarness) noCanary(canary string, what map[string]any) {
	h.t.Helper()
	managerLog.mu.Lock()
	log := managerLog.buf.String()
	managerLog.mu.Unlock()
	all, err := h.node.Logs()
	if err != nil {
		h.t.Fatal(err)
	}
	var logs strings.Builder
	for _, b := range all {
		logs.Write(b)
	}
	what["manager log"], what["Job logs"] = log, logs.String()
	for name, v := range what {
		if b, _ := json.Marshal(v); strings.Contains(string(b), canary) {
			h.t.Errorf("the canary reached the %s", name)
		}
	}
	if logs.Len() == 0 || log == "" {
		h.t.Error("no Job log or manager log to look in: the check proves nothing")
	}
}

// exportsCluster creates the TerraformCluster of the Cluster u, of the
// exports module, exporting zone, and waits for its first apply.
func (h *driftHarness) exportsCluster(u client.Object, zone string) *infrav1.TerraformCluster {
	h.t.Helper()
	tc := h.create(u.GetName(), infrav1.ApplyAutomatic, "", func(tc *infrav1.TerraformCluster) {
		tc.Spec.Image = exportsImage
		tc.Spec.Variables = []infrav1.Variable{{Name: "exports", Value: &apiextensionsv1.JSON{Raw: []byte(`{"zone": "` + zone + `"}`)}}}
		tc.OwnerReferences = []metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Name: u.GetName(), UID: u.GetUID()}}
	})
	h.wait(tc, "the cluster's first apply", ready)
	return tc
}

// capiMachine creates a Cluster API Machine of cluster whose
// infrastructure is the TerraformMachine name and whose bootstrap data is
// the Secret bootstrap.
func (h *driftHarness) capiMachine(name, cluster, bootstrap string, controlPlane bool) *clusterv1.Machine {
	h.t.Helper()
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{clusterv1.ClusterNameLabel: cluster}},
		Spec: clusterv1.MachineSpec{
			ClusterName:       cluster,
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To(bootstrap)},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "TerraformMachine", Name: name},
		},
	}
	if controlPlane {
		m.Labels[clusterv1.MachineControlPlaneLabel] = ""
	}
	if err := h.c.Create(context.Background(), m); err != nil {
		h.t.Fatal(err)
	}
	return m
}

// terraformMachine creates a TerraformMachine of the machine module whose
// files go under dir, checked for drift every 2 seconds; mutate change it
// first.
func (h *driftHarness) terraformMachine(name, dir string, mutate ...func(*infrav1.TerraformMachine)) *infrav1.TerraformMachine {
	h.t.Helper()
	tm := &infrav1.TerraformMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: infrav1.TerraformMachineSpec{RunnerSpec: infrav1.RunnerSpec{
			Image:     machineImage,
			Variables: []infrav1.Variable{{Name: "dir", Value: &apiextensionsv1.JSON{Raw: []byte(`"` + dir + `"`)}}},
			Drift:     infrav1.DriftSpec{IntervalSeconds: ptr.To(int32(2))},
		}},
	}
	for _, m := range mutate {
		m(tm)
	}
	if err := h.c.Create(context.Background(), tm); err != nil {
		h.t.Fatal(err)
	}
	return tm
}

// TestMachines: two TerraformMachines of a cluster, owned by Cluster API
// Machines, wait (for their owner, the cluster's infrastructure and
// bootstrap data) each with its reason, then apply with the cluster's
// exports, the Machine's name and control plane flag and the bootstrap
// data; their provider IDs, addresses and failure domains reach the
// Machines, which find their infrastructure ready. Drift on a machine is
// reported and never remediated; failed health makes the Machine's
// InfrastructureReady False. A machine deleted after its bootstrap Secret
// is gone is destroyed from its durable inputs. The bootstrap data
// reaches nothing but the module.
func TestMachines(t *testing.T) {
	h := startMachines(t)
	ctx := context.Background()
	seen := record[*infrav1.TerraformMachine](h.harness, &infrav1.TerraformMachineList{}, "default")

	// A machine with no owner yet waits for one.
	cp := h.terraformMachine("fleet-cp-0", "fleet")
	readyReason(h, cp, infrav1.ReasonWaitingForOwner)
	// Its Machine, in a Cluster whose TerraformCluster is not there: the
	// cluster's infrastructure is waited for.
	u := h.cluster("fleet", false)
	cpMachine := h.capiMachine("fleet-cp-0", "fleet", "fleet-bootstrap", true)
	readyReason(h, cp, infrav1.ReasonWaitingForClusterInfrastructure)

	tc := h.exportsCluster(u, "zone-b")
	// Provisioned and its exports published; no bootstrap data yet.
	readyReason(h, cp, infrav1.ReasonWaitingForBootstrapData)
	if jobs := h.jobs(cp); len(jobs) != 0 {
		t.Fatalf("%d Jobs of a machine waiting for its bootstrap data", len(jobs))
	}

	md := h.terraformMachine("fleet-md-0", "fleet")
	mdMachine := h.capiMachine("fleet-md-0", "fleet", "fleet-bootstrap", false)
	bootstrap := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "fleet-bootstrap", Namespace: "default"}, Data: map[string][]byte{"value": []byte(bootstrapCanary)}}
	if err := h.c.Create(ctx, bootstrap); err != nil {
		t.Fatal(err)
	}
	for _, tm := range []*infrav1.TerraformMachine{cp, md} {
		waitFor(h.harness, tm, "provisioned", func(tm *infrav1.TerraformMachine) bool {
			return tm.Status.Initialization != nil && ptr.Deref(tm.Status.Initialization.Provisioned, false) && tm.Spec.ProviderID != ""
		})
		if want := "captftest:///fleet/" + tm.Name; tm.Spec.ProviderID != want {
			t.Errorf("%s: spec.providerID %q, want %q", tm.Name, tm.Spec.ProviderID, want)
		}
		if tm.Status.FailureDomain != "zone-b" {
			t.Errorf("%s: status.failureDomain %q, want the exports' zone-b", tm.Name, tm.Status.FailureDomain)
		}
		if len(tm.Status.Addresses) != 2 || tm.Status.Addresses[0] != (infrav1.MachineAddress{Type: "Hostname", Address: tm.Name}) {
			t.Errorf("%s: status.addresses %+v", tm.Name, tm.Status.Addresses)
		}
		// What the module got: the exports, the name, the control plane
		// flag, and the bootstrap data as the file's secret.
		var got struct {
			Zone         string `json:"zone"`
			ControlPlane bool   `json:"control_plane"`
		}
		if err := json.Unmarshal([]byte(h.machineFile(tm.Name+".txt")), &got); err != nil {
			t.Fatal(err)
		}
		if got.Zone != "zone-b" || got.ControlPlane != (tm.Name == "fleet-cp-0") {
			t.Errorf("%s: the module got %+v", tm.Name, got)
		}
		secret, err := os.ReadFile(filepath.Join(h.files, "fleet", "."+tm.Name+".txt.captftest-secret"))
		if err != nil || string(secret) != bootstrapCanary {
			t.Errorf("%s: the bootstrap data did not reach the module: %q, %v", tm.Name, secret, err)
		}
	}
	// The waits, in order, each seen.
	reasons := readyReasons(seen.all(), cp.Name)
	want := []string{infrav1.ReasonWaitingForOwner, infrav1.ReasonWaitingForClusterInfrastructure, infrav1.ReasonWaitingForBootstrapData, infrav1.ReasonProvisioning, engine.ReasonProvisioned}
	if len(reasons) < len(want) || !slices.Equal(reasons[:len(want)], want) {
		t.Errorf("Ready's reasons %v, want them to begin %v", reasons, want)
	}

	// Cluster API's Machine controller read the contract.
	for _, m := range []*clusterv1.Machine{cpMachine, mdMachine} {
		h.waitMachine(m, "the infrastructure's fields", func(m *clusterv1.Machine) bool {
			c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineInfrastructureReadyCondition)
			return ptr.Deref(m.Status.Initialization.InfrastructureProvisioned, false) && m.Spec.ProviderID != "" && c != nil && c.Status == metav1.ConditionTrue
		})
		if want := "captftest:///fleet/" + m.Name; m.Spec.ProviderID != want || len(m.Status.Addresses) != 2 || m.Status.FailureDomain != "zone-b" {
			t.Errorf("Machine %s: providerID %q, addresses %+v, status.failureDomain %q", m.Name, m.Spec.ProviderID, m.Status.Addresses, m.Status.FailureDomain)
		}
	}

	// New exports: the cluster applies, and the machines, never rendered
	// again, do not; no Job of theirs starts while the cluster's runs.
	h.setVar(tc, "exports", `{"zone": "zone-c"}`)
	h.wait(tc, "the new exports published", func(tc *infrav1.TerraformCluster) bool {
		return ready(tc) && tc.Status.Exports != nil && strings.Contains(string(tc.Status.Exports.Raw), "zone-c")
	})
	time.Sleep(5 * time.Second)
	var clusterApply *batchv1.Job
	for _, j := range h.jobs(tc) {
		if j.Labels[engine.LabelOperation] == string(infrav1.OperationApply) && (clusterApply == nil || clusterApply.CreationTimestamp.Before(&j.CreationTimestamp)) {
			clusterApply = &j
		}
	}
	if clusterApply == nil || clusterApply.Status.CompletionTime == nil {
		t.Fatalf("the cluster's second apply: %+v", clusterApply)
	}
	drifts := 0
	for _, tm := range []*infrav1.TerraformMachine{cp, md} {
		for _, j := range h.jobs(tm) {
			switch op := j.Labels[engine.LabelOperation]; {
			case op == string(infrav1.OperationApply) && j.CreationTimestamp.After(clusterApply.CreationTimestamp.Time):
				t.Errorf("%s: apply Job %s after the cluster's exports changed: a machine is never rendered again", tm.Name, j.Name)
			case j.CreationTimestamp.After(clusterApply.CreationTimestamp.Time) && j.CreationTimestamp.Before(clusterApply.Status.CompletionTime):
				// (Times are to the second: one in the second the
				// cluster's Job was created may have come first.)
				t.Errorf("%s: Job %s started while the cluster's apply %s ran", tm.Name, j.Name, clusterApply.Name)
			case op == string(infrav1.OperationDrift):
				drifts++
			}
		}
	}
	if drifts == 0 {
		t.Error("no drift Job of the machines: the check of overlapping Jobs proves nothing")
	}

	// Drift is reported, never remediated: the edit stays, and no apply
	// runs after the first.
	node := filepath.Join(h.files, "fleet", "fleet-md-0.txt")
	if err := os.WriteFile(node, []byte(editedCanary), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(h.harness, md, "drift reported", func(tm *infrav1.TerraformMachine) bool {
		c := meta.FindStatusCondition(tm.Status.Conditions, infrav1.ConditionDriftDetected)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	time.Sleep(5 * time.Second)
	if b, _ := os.ReadFile(node); string(b) != editedCanary {
		t.Errorf("the drifted file was put back: %q", b)
	}
	applies := 0
	for _, j := range h.jobs(md) {
		if j.Labels[engine.LabelOperation] == string(infrav1.OperationApply) {
			applies++
		}
	}
	if applies != 1 {
		t.Errorf("%d apply Jobs of a drifted machine, want the first only", applies)
	}

	// Failed health: the Machine's InfrastructureReady follows.
	if err := os.WriteFile(filepath.Join(h.files, "fleet", "fleet-cp-0.health"), []byte("failed"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.waitMachine(cpMachine, "InfrastructureReady False from failed health", func(m *clusterv1.Machine) bool {
		c := meta.FindStatusCondition(m.Status.Conditions, clusterv1.MachineInfrastructureReadyCondition)
		return c != nil && c.Status == metav1.ConditionFalse
	})

	// A spec the API refuses: a defining field, and remediation of drift.
	changed := md.DeepCopy()
	changed.Spec.Image = moduleImage
	if err := h.c.Patch(ctx, changed, client.MergeFrom(md)); err == nil || !strings.Contains(err.Error(), "image is immutable") {
		t.Errorf("changing a machine's image: %v", err)
	}
	changed = md.DeepCopy()
	changed.Spec.Drift.Action = infrav1.DriftActionRemediate
	if err := h.c.Patch(ctx, changed, client.MergeFrom(md)); err == nil || !strings.Contains(err.Error(), "Remediate is not allowed on a machine") {
		t.Errorf("remediating a machine's drift: %v", err)
	}

	// The bootstrap Secret goes, then the Machine: the machine is
	// destroyed from its durable inputs, and the Machine goes with it.
	if err := h.c.Delete(ctx, bootstrap); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Delete(ctx, mdMachine); err != nil {
		t.Fatal(err)
	}
	h.gone(md, "the machine destroyed and released")
	h.gone(mdMachine, "the Machine deleted")
	for _, f := range []string{"fleet-md-0.txt", "fleet-md-0.health"} {
		if _, err := os.Stat(filepath.Join(h.files, "fleet", f)); !os.IsNotExist(err) {
			t.Errorf("%s after the destroy: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(h.files, "fleet", "fleet-cp-0.txt")); err != nil {
		t.Errorf("the other machine's file: %v", err)
	}

	// The bootstrap data reached no status, event, plan or log.
	var plans infrav1.TerraformPlanList
	if err := h.c.List(ctx, &plans, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	if len(plans.Items) != 0 {
		t.Errorf("%d TerraformPlans; a machine takes none and the cluster waited for none", len(plans.Items))
	}
	if err := h.c.Get(ctx, client.ObjectKeyFromObject(cp), cp); err != nil {
		t.Fatal(err)
	}
	h.noCanary(bootstrapCanary, map[string]any{"status": cp.Status, "events": append(h.events(cp), h.events(md)...), "seen machines": seen.all()})
}

// machineFile is the file name under the test's machine directory.
func (h *driftHarness) machineFile(name string) string {
	h.t.Helper()
	b, err := os.ReadFile(filepath.Join(h.files, "fleet", name))
	if err != nil {
		h.t.Fatal(err)
	}
	return string(b)
}

// waitMachine polls a Cluster API Machine until cond holds.
func (h *driftHarness) waitMachine(m *clusterv1.Machine, what string, cond func(*clusterv1.Machine) bool) {
	h.t.Helper()
	waitFor(h.harness, m, "Machine "+m.Name+": "+what, cond)
}

// TestMoveMachines: clusterctl move of a cluster with a provisioned
// machine. clusterctl creates it on the target with its provider ID, as
// the provider-ID webhook allows a user to when the owner Machine holds
// it; the machine is provisioned there from its moved state and durable
// inputs, with no apply, and a delete there destroys it from them. (Cluster API's controllers do not run here; the test sets the
// owner references and labels they would.)
func TestMoveMachines(t *testing.T) {
	p := tftest.Provider(t)
	files := t.TempDir()
	module, _ := filepath.Abs("testdata/machine")
	node := func(n *testnode.Node) {
		n.Images[machineImage] = []testnode.Image{{Path: infrav1.PathModule, Dir: module}, n.Images[moduleImage][1]}
		n.Env = append(n.Env, "TF_CLI_CONFIG_FILE="+p.CLIConfig, tftest.ProviderRootEnv+"="+files)
	}
	src, dst := startMoveEnv(t, node), startMoveEnv(t, node)
	ctx := context.Background()

	cluster := src.provisioned("mv")
	tc := src.create("mv", infrav1.ApplyAutomatic, "small", func(tc *infrav1.TerraformCluster) {
		tc.Labels = map[string]string{infrav1.LabelClusterName: "mv"}
		tc.OwnerReferences = []metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Name: cluster.GetName(), UID: cluster.GetUID()}}
	})
	src.wait(tc, "the cluster's first apply", ready)
	if err := src.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "mv-bootstrap", Namespace: "default"}, Data: map[string][]byte{"value": []byte(bootstrapCanary)}}); err != nil {
		t.Fatal(err)
	}
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "mv-node-0", Namespace: "default", Labels: map[string]string{clusterv1.ClusterNameLabel: "mv"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Name: cluster.GetName(), UID: cluster.GetUID()}}},
		Spec: clusterv1.MachineSpec{ClusterName: "mv", Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To("mv-bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "TerraformMachine", Name: "mv-node-0"}},
	}
	if err := src.c.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	// clusterctl moves no Machine that is still provisioning its node.
	m.Status.NodeRef = clusterv1.MachineNodeReference{Name: m.Name}
	if err := src.c.Status().Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	tm := &infrav1.TerraformMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "mv-node-0", Namespace: "default", Labels: map[string]string{clusterv1.ClusterNameLabel: "mv"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Machine", Name: m.Name, UID: m.UID, Controller: ptr.To(true)}}},
		Spec: infrav1.TerraformMachineSpec{RunnerSpec: infrav1.RunnerSpec{Image: machineImage,
			Variables: []infrav1.Variable{{Name: "dir", Value: &apiextensionsv1.JSON{Raw: []byte(`"mv"`)}}}}},
	}
	if err := src.c.Create(ctx, tm); err != nil {
		t.Fatal(err)
	}
	provisioned := func(tm *infrav1.TerraformMachine) bool {
		c := meta.FindStatusCondition(tm.Status.Conditions, infrav1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue && tm.Spec.ProviderID != "" && tm.Status.ActiveJob == nil
	}
	waitFor(src.harness, tm, "the machine provisioned", provisioned)
	// Cluster API's Machine controller copies the provider ID to the
	// Machine. On the target, clusterctl creates the machine with it as a
	// user, which the provider-ID webhook allows because the Machine,
	// created first, holds the same ID.
	m.Spec.ProviderID = tm.Spec.ProviderID
	if err := src.c.Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(files, "mv", "mv-node-0.txt")
	before, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var state corev1.Secret
	if err := src.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: engine.StateSecretName("tfm", tm.Name)}, &state); err != nil {
		t.Fatal(err)
	}
	if !engine.MovesWith(&state, tm) {
		t.Fatalf("the machine's state Secret does not move with it: labels %v, owners %v", state.Labels, state.OwnerReferences)
	}

	move(t, src, dst)

	moved := &infrav1.TerraformMachine{ObjectMeta: metav1.ObjectMeta{Name: "mv-node-0", Namespace: "default"}}
	waitFor(dst.harness, moved, "the machine provisioned on the target", provisioned)
	if moved.Spec.ProviderID != tm.Spec.ProviderID {
		t.Errorf("providerID %q on the target, %q on the source", moved.Spec.ProviderID, tm.Spec.ProviderID)
	}
	time.Sleep(3 * time.Second)
	for _, j := range dst.jobs(moved) {
		if j.Labels[engine.LabelOperation] == string(infrav1.OperationApply) {
			t.Errorf("apply Job %s on the target: a moved machine is applied again", j.Name)
		}
	}
	if after, _ := os.ReadFile(file); string(after) != string(before) {
		t.Errorf("the machine's file changed with the move: %q, was %q", after, before)
	}

	// Deleted on the target, without its bootstrap data: destroyed from
	// the moved durable inputs.
	if err := dst.c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "mv-bootstrap", Namespace: "default"}}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	if err := dst.c.Delete(ctx, moved); err != nil {
		t.Fatal(err)
	}
	dst.gone(moved, "the moved machine destroyed")
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("the machine's file after the destroy on the target: %v", err)
	}
}
