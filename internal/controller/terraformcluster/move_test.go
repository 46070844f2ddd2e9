package terraformcluster

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clusterctl "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	clusterctlconfig "sigs.k8s.io/cluster-api/cmd/clusterctl/config"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/testenv"
	"github.com/captf/captf/internal/testnode"
)

// What clusterctl move (v1.14, its client library) needs to run between two
// API servers, found by running it here:
//
//   - Cluster API's CRDs, whose Cluster CRD stores v1beta2 (the contract
//     clusterctl checks), on both servers.
//   - The label clusterctl.cluster.x-k8s.io on every CRD whose objects move:
//     clusterctl discovers only those kinds (and Secrets and ConfigMaps).
//     captf's CRDs carry it (config/crd/bases); Cluster API's own get it
//     from clusterctl init, which the test plays by labelling them.
//   - clusterctl's inventory CRD (providers.clusterctl.cluster.x-k8s.io),
//     which clusterctl installs itself when it is missing, and on the target
//     every provider the source's inventory lists, at a version at least
//     as new. The test records cluster-api and infrastructure-captf in both
//     inventories, as clusterctl init would.
//   - A Cluster that owns the TerraformCluster: clusterctl moves the
//     Cluster's hierarchy by owner references (Cluster API's Cluster
//     controller sets that reference; no Cluster API controller runs
//     here, so the test sets it).
//   - A Cluster whose infrastructure is provisioned and whose control
//     plane is initialized (status.initialization.infrastructureProvisioned,
//     the condition ControlPlaneInitialized True): clusterctl refuses to
//     move a cluster that is still provisioning. Cluster API's controllers
//     write these; the test writes them.
//   - A Cluster that is not paused when the move starts: clusterctl pauses
//     it on the source, creates it paused on the target, and lifts the
//     pause there last.
//   - The mover may create TerraformPlans on the target; the webhook checks
//     its creates like anyone else's (spec 002).

// moveEnv is one management cluster of a move: an API server with Cluster
// API's CRDs and the TerraformPlan webhook, captf's manager, a test node,
// and clusterctl's view of it.
type moveEnv struct {
	*harness
	kubeconfig string
}

func startMoveEnv(t *testing.T, more ...func(*testnode.Node)) *moveEnv {
	t.Helper()
	env := testenv.StartWithClusterAPIAndWebhooks(t, "../../..")
	serveWebhooks(t, env)
	h := startEnv(t, env, env.ConfigAs(managerUser, "system:masters"), more...)
	ctx := context.Background()
	// clusterctl init labels the components it installs; Cluster API's
	// CRDs from the module do not carry the label.
	var crds apiextensionsv1.CustomResourceDefinitionList
	if err := h.c.List(ctx, &crds); err != nil {
		t.Fatal(err)
	}
	for i := range crds.Items {
		crd := &crds.Items[i]
		if _, ok := crd.Labels["clusterctl.cluster.x-k8s.io"]; ok || !strings.HasSuffix(crd.Spec.Group, "cluster.x-k8s.io") {
			continue
		}
		before := crd.DeepCopy()
		if crd.Labels == nil {
			crd.Labels = map[string]string{}
		}
		crd.Labels["clusterctl.cluster.x-k8s.io"] = ""
		if err := h.c.Patch(ctx, crd, client.MergeFrom(before)); err != nil {
			t.Fatal(err)
		}
	}
	// The inventory, as clusterctl init leaves it.
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(clusterctlconfig.ClusterctlAPIManifest), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := h.c.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []struct{ ns, name, provider, typ, version string }{
		{"capi-system", "cluster-api", "cluster-api", "CoreProvider", "v1.14.2"},
		{"captf-system", "infrastructure-captf", "captf", "InfrastructureProvider", "v0.1.0"},
	} {
		if err := h.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.ns}}); err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "clusterctl.cluster.x-k8s.io/v1alpha3", "kind": "Provider",
			"metadata":     map[string]any{"name": p.name, "namespace": p.ns, "labels": map[string]any{"clusterctl.cluster.x-k8s.io": ""}},
			"providerName": p.provider, "type": p.typ, "version": p.version,
		}}
		deadline := time.Now().Add(30 * time.Second)
		for err := h.c.Create(ctx, u); err != nil; err = h.c.Create(ctx, u) {
			// The CRD just created may not be served yet.
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return &moveEnv{harness: h, kubeconfig: env.Kubeconfig(t)}
}

// move runs clusterctl move of the namespace default from src to dst, as
// the administrator of both.
func move(t *testing.T, src, dst *moveEnv) {
	t.Helper()
	config := filepath.Join(t.TempDir(), "clusterctl.yaml")
	if err := os.WriteFile(config, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := clusterctl.New(ctx, config)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Move(ctx, clusterctl.MoveOptions{
		FromKubeconfig: clusterctl.Kubeconfig{Path: src.kubeconfig},
		ToKubeconfig:   clusterctl.Kubeconfig{Path: dst.kubeconfig},
		Namespace:      "default",
	})
	if err != nil {
		t.Fatalf("clusterctl move: %v", err)
	}
}

// stateIDs are the ids of the resources in tc's state, by address.
func (h *harness) stateIDs(tc *infrav1.TerraformCluster) map[string]string {
	h.t.Helper()
	var s corev1.Secret
	if err := h.c.Get(context.Background(), client.ObjectKey{Namespace: tc.Namespace, Name: engine.StateSecretName("tfc", tc.Name)}, &s); err != nil {
		h.t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(s.Data["tfstate"]))
	if err != nil {
		h.t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		h.t.Fatal(err)
	}
	var state struct {
		Resources []struct {
			Type, Name string
			Instances  []struct {
				Attributes struct {
					ID string `json:"id"`
				} `json:"attributes"`
			} `json:"instances"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(raw, &state); err != nil {
		h.t.Fatal(err)
	}
	ids := map[string]string{}
	for _, r := range state.Resources {
		for _, i := range r.Instances {
			ids[r.Type+"."+r.Name] = i.Attributes.ID
		}
	}
	return ids
}

// provisioned creates a Cluster that clusterctl will move: provisioned,
// its control plane initialized, as Cluster API's controllers would say.
func (h *harness) provisioned(name string) *unstructured.Unstructured {
	h.t.Helper()
	cluster := h.cluster(name, false)
	cluster.Object["status"] = map[string]any{
		"initialization": map[string]any{"infrastructureProvisioned": true, "controlPlaneInitialized": true},
		"conditions": []any{map[string]any{"type": "ControlPlaneInitialized", "status": "True", "reason": "Initialized", "message": "",
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}},
	}
	if err := h.c.Status().Update(context.Background(), cluster); err != nil {
		h.t.Fatal(err)
	}
	return cluster
}

// blockedWhileRunning waits for tc to settle, checking at every look that
// a Job named in status.activeJob that may write the state (any but a plan
// Job of an existing state) goes with engine.AnnotationBlockMove, and that
// the annotation is gone once nothing runs.
func (h *harness) blockedWhileRunning(tc *infrav1.TerraformCluster, what string, settled func(*infrav1.TerraformCluster) bool) {
	h.t.Helper()
	seen := false
	h.wait(tc, what, func(tc *infrav1.TerraformCluster) bool {
		_, blocking := tc.Annotations[engine.AnnotationBlockMove]
		if a := tc.Status.ActiveJob; a != nil && (a.Operation != infrav1.OperationPlan || tc.Status.StateSerial == nil) {
			seen = true
			if !blocking {
				h.t.Errorf("Job %s runs and the object has no %s", tc.Status.ActiveJob.Name, engine.AnnotationBlockMove)
			}
		}
		return settled(tc) && !blocking
	})
	if !seen {
		h.t.Logf("%s: no look saw the Job run", what)
	}
}

// TestMove moves a Manual TerraformCluster that applied, with finished
// plans and a plan waiting, from one management cluster to another with
// clusterctl's own mover, and carries on there: the waiting plan is taken
// up again, approved and applied against the moved state.
func TestMove(t *testing.T) {
	src := startMoveEnv(t)
	dst := startMoveEnv(t)
	ctx := context.Background()

	cluster := src.provisioned("moving")
	tc := src.create("moving", infrav1.ApplyManual, "small", func(tc *infrav1.TerraformCluster) {
		tc.Labels = map[string]string{infrav1.LabelClusterName: "moving"}
		tc.OwnerReferences = []metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Name: cluster.GetName(), UID: cluster.GetUID()}}
	})
	src.blockedWhileRunning(tc, "first apply", ready)
	ids := src.stateIDs(tc)
	if ids["terraform_data.node"] == "" {
		t.Fatalf("state ids %v", ids)
	}

	// An applied plan, a superseded one, and one that waits.
	src.setSize(tc, "large")
	p := src.waitingPlan(tc, infrav1.ReasonPlanAwaitingApproval)
	applied := tc.Status.PendingPlanRef.Name
	src.approve(tc, p.PlanHash)
	src.blockedWhileRunning(tc, "approved apply", func(tc *infrav1.TerraformCluster) bool { return ready(tc) && tc.Status.Plan == nil })
	src.setSize(tc, "medium")
	src.waitingPlan(tc, infrav1.ReasonPlanAwaitingApproval)
	superseded := tc.Status.PendingPlanRef.Name
	src.setSize(tc, "xl")
	src.blockedWhileRunning(tc, "a newer plan", func(tc *infrav1.TerraformCluster) bool {
		return tc.Status.PendingPlanRef != nil && tc.Status.PendingPlanRef.Name != superseded && tc.Status.ActiveJob == nil
	})
	waiting := tc.Status.PendingPlanRef.Name
	waitingHash := tc.Status.Plan.PlanHash
	src.phaseWait(tc, superseded, infrav1.PlanSuperseded)
	ids = src.stateIDs(tc)

	// The state Secret moves: the object owns it and it has the label.
	var state corev1.Secret
	if err := src.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: engine.StateSecretName("tfc", tc.Name)}, &state); err != nil {
		t.Fatal(err)
	}
	if !engine.MovesWith(&state, tc) {
		t.Fatalf("state Secret labels %v, owners %v", state.Labels, state.OwnerReferences)
	}

	backups := len(tc.Status.StateBackups)
	if backups == 0 {
		t.Fatal("no state backup on the source")
	}

	move(t, src, dst)

	// Everything left the source; the state reaches the target's server.
	if err := src.c.Get(ctx, client.ObjectKeyFromObject(tc), &infrav1.TerraformCluster{}); err == nil {
		t.Error("the TerraformCluster is still on the source")
	}
	moved := &infrav1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Name: "moving", Namespace: "default"}}
	// The waiting plan is taken up again: status.pendingPlanRef names it,
	// its label and status say Pending; the finished plans kept theirs.
	dst.wait(moved, "the waiting plan re-attached on the target", func(tc *infrav1.TerraformCluster) bool {
		c := condition(tc, infrav1.ConditionApplyJobSucceeded)
		return tc.Status.PendingPlanRef != nil && tc.Status.Plan != nil && c != nil && c.Reason == infrav1.ReasonPlanAwaitingApproval
	})
	if moved.Status.PendingPlanRef.Name != waiting || moved.Status.Plan.PlanHash != waitingHash {
		t.Errorf("status names plan %s (%s), want %s (%s)", moved.Status.PendingPlanRef.Name, moved.Status.Plan.PlanHash, waiting, waitingHash)
	}
	dst.phaseWait(moved, waiting, infrav1.PlanPending)
	dst.phaseWait(moved, applied, infrav1.PlanApplied)
	dst.phaseWait(moved, superseded, infrav1.PlanSuperseded)
	if n := len(dst.jobs(moved)); n != 0 {
		t.Errorf("%d Jobs on the target before the approval: a moved object is not a first apply", n)
	}
	var durable corev1.Secret
	if err := dst.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: engine.InputsName("tfc", "moving")}, &durable); err != nil || durable.Annotations[infrav1.AnnotationApplied] != "true" {
		t.Errorf("durable inputs on the target: %v, annotations %v", err, durable.Annotations)
	}

	// Approving the moved plan works; the apply runs on the target, against
	// the moved state, and re-creates nothing.
	plan := dst.plans(moved)[waiting]
	alice := dst.env.ClientAs(t, "alice", "system:masters")
	before := plan.DeepCopy()
	plan.Spec.Approved, plan.Spec.ApprovedBy = true, "alice"
	if err := alice.Patch(ctx, plan, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	dst.blockedWhileRunning(moved, "the moved plan applied on the target", func(tc *infrav1.TerraformCluster) bool {
		return ready(tc) && tc.Status.Plan == nil
	})
	dst.phaseWait(moved, waiting, infrav1.PlanApplied)
	after := dst.stateIDs(moved)
	if after["terraform_data.node"] != ids["terraform_data.node"] || after["terraform_data.clock"] != ids["terraform_data.clock"] {
		t.Errorf("resource ids changed across the move: before %v, after %v", ids, after)
	}
	if !engine.MovesWith(func() *corev1.Secret {
		var s corev1.Secret
		if err := dst.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: engine.StateSecretName("tfc", "moving")}, &s); err != nil {
			t.Fatal(err)
		}
		return &s
	}(), moved) {
		t.Error("the state Secret on the target does not move with the object")
	}

	// The backups moved with the object, and status lists them again.
	dst.wait(moved, "the state backups listed on the target", func(tc *infrav1.TerraformCluster) bool {
		return len(tc.Status.StateBackups) >= backups
	})
	var kept corev1.SecretList
	if err := dst.c.List(ctx, &kept, client.InNamespace("default"), client.HasLabels{infrav1.LabelStateBackup}); err != nil {
		t.Fatal(err)
	}
	for _, b := range kept.Items {
		if ref := b.OwnerReferences; len(ref) != 1 || ref[0].UID != moved.UID {
			t.Errorf("backup %s on the target is owned by %v", b.Name, ref)
		}
	}

	// A change made on the target plans, is approved and applies against
	// the moved state.
	dst.setSize(moved, "small")
	p = dst.waitingPlan(moved, infrav1.ReasonPlanAwaitingApproval)
	if p.Add != 0 || p.Destroy != 0 || p.Change == 0 {
		t.Fatalf("a change on the target plans %d to add, %d to change, %d to destroy", p.Add, p.Change, p.Destroy)
	}
	dst.approve(moved, p.PlanHash)
	dst.blockedWhileRunning(moved, "a change applied on the target", func(tc *infrav1.TerraformCluster) bool {
		return ready(tc) && tc.Status.Plan == nil && tc.Status.ActiveJob == nil
	})
	if again := dst.stateIDs(moved); again["terraform_data.node"] != ids["terraform_data.node"] {
		t.Errorf("terraform_data.node was created again on the target: %v, before the move %v", again, ids)
	}

	// No value reaches what moved or what the target wrote: the plans,
	// the object's status, its events.
	var plans infrav1.TerraformPlanList
	if err := dst.c.List(ctx, &plans, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	pb, _ := json.Marshal(plans)
	sb, _ := json.Marshal(moved.Status)
	eb, _ := json.Marshal(dst.events(moved))
	for _, v := range []string{canary, "large", "medium", `"xl"`} {
		if strings.Contains(string(pb)+string(sb)+string(eb), v) {
			t.Errorf("the value %q reached a TerraformPlan, the status or an event on the target", v)
		}
	}
}

// TestMovePausedRecordsOutcome: a Job that finishes while its object is
// paused (clusterctl move pauses the Cluster, then waits for block-move to
// go) has its outcome recorded and block-move removed, with the pause
// still on; the state Secret's ownership waits for the pause to lift.
func TestMovePausedRecordsOutcome(t *testing.T) {
	h := start(t)
	tc := h.create("paused-run", infrav1.ApplyManual, "small")
	// Pause as soon as the first apply's Job is recorded as running.
	h.wait(tc, "the first apply runs", func(tc *infrav1.TerraformCluster) bool { return tc.Status.ActiveJob != nil })
	if _, ok := tc.Annotations[engine.AnnotationBlockMove]; !ok {
		t.Fatalf("Job %s runs without %s", tc.Status.ActiveJob.Name, engine.AnnotationBlockMove)
	}
	before := tc.DeepCopy()
	if tc.Annotations == nil {
		tc.Annotations = map[string]string{}
	}
	tc.Annotations[engine.AnnotationPaused] = ""
	if err := h.c.Patch(context.Background(), tc, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	h.wait(tc, "the outcome recorded while paused", func(tc *infrav1.TerraformCluster) bool {
		_, blocking := tc.Annotations[engine.AnnotationBlockMove]
		return tc.Status.LastRun != nil && tc.Status.ActiveJob == nil && !blocking
	})
	if !tc.Status.LastRun.Succeeded || len(h.jobs(tc)) != 1 || !engine.Processed(&h.jobs(tc)[0]) {
		t.Fatalf("last run %+v, jobs %d", tc.Status.LastRun, len(h.jobs(tc)))
	}
	if c := condition(tc, engine.ConditionPaused); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Paused = %+v", c)
	}
	var durable corev1.Secret
	if err := h.c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: engine.InputsName("tfc", tc.Name)}, &durable); err != nil || durable.Annotations[infrav1.AnnotationApplied] != "true" {
		t.Errorf("applied marker while paused: %v %v", err, durable.Annotations)
	}
	var state corev1.Secret
	if err := h.c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: engine.StateSecretName("tfc", tc.Name)}, &state); err != nil {
		t.Fatal(err)
	}
	if engine.MovesWith(&state, tc) {
		t.Error("the state Secret was made the object's while paused")
	}
	// Lifting the pause owns it.
	before = tc.DeepCopy()
	delete(tc.Annotations, engine.AnnotationPaused)
	if err := h.c.Patch(context.Background(), tc, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for !engine.MovesWith(&state, tc) {
		if time.Now().After(deadline) {
			t.Fatalf("state Secret labels %v, owners %v after the pause", state.Labels, state.OwnerReferences)
		}
		time.Sleep(200 * time.Millisecond)
		if err := h.c.Get(context.Background(), client.ObjectKeyFromObject(&state), &state); err != nil {
			t.Fatal(err)
		}
	}
}

// pausedWithPlan creates a Manual object named name owned by a provisioned
// Cluster, applies it, has a plan of another size wait, and pauses the
// object through its own annotation (clusterctl checks only the Cluster's
// pause). It returns the object, the ids in its state and the waiting plan.
func (h *harness) pausedWithPlan(name string) (*infrav1.TerraformCluster, map[string]string, *infrav1.TerraformPlan) {
	h.t.Helper()
	cluster := h.provisioned(name)
	tc := h.create(name, infrav1.ApplyManual, "small", func(tc *infrav1.TerraformCluster) {
		tc.OwnerReferences = []metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Name: cluster.GetName(), UID: cluster.GetUID()}}
	})
	h.wait(tc, "first apply", ready)
	ids := h.stateIDs(tc)
	h.setSize(tc, "large")
	plan := h.livePlanOf(tc)
	h.annotate(tc, engine.AnnotationPaused, "")
	h.wait(tc, "paused", pausedWith(metav1.ConditionTrue))
	return tc, ids, plan
}

// resumeMoved waits for the object named name on the target, moved and
// still paused by its own annotation, and lifts that pause.
func (h *harness) resumeMoved(name string) *infrav1.TerraformCluster {
	h.t.Helper()
	moved := &infrav1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
	h.wait(moved, "moved, still paused by its annotation", pausedWith(metav1.ConditionTrue))
	before := moved.DeepCopy()
	delete(moved.Annotations, engine.AnnotationPaused)
	if err := h.c.Patch(context.Background(), moved, client.MergeFrom(before)); err != nil {
		h.t.Fatal(err)
	}
	return moved
}

// TestMoveApprovedPlan: a live plan approved by the identity that runs the
// move is created on the target by that identity (create equals approve,
// spec 002), and the manager there applies it with --expect-plan. The
// object is paused through its own annotation while the plan is approved,
// so that the source does not apply it first; clusterctl checks only the
// Cluster's pause.
func TestMoveApprovedPlan(t *testing.T) {
	src := startMoveEnv(t)
	dst := startMoveEnv(t)
	ctx := context.Background()
	tc, ids, plan := src.pausedWithPlan("approved")
	// The mover approves: the administrator of both kubeconfigs.
	mover := src.env.ClientAs(t, "captf-test-admin", "system:masters")
	pb := plan.DeepCopy()
	plan.Spec.Approved, plan.Spec.ApprovedBy = true, "captf-test-admin"
	if err := mover.Patch(ctx, plan, client.MergeFrom(pb)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if n := len(src.jobs(tc)); n != 2 {
		t.Fatalf("%d Jobs on the paused source, want the first apply and the plan", n)
	}

	move(t, src, dst)

	moved := dst.resumeMoved("approved")
	dst.wait(moved, "the moved approved plan applied", func(tc *infrav1.TerraformCluster) bool { return ready(tc) && tc.Status.Plan == nil })
	dst.phaseWait(moved, plan.Name, infrav1.PlanApplied)
	jobs := dst.jobs(moved)
	if len(jobs) != 1 || jobs[0].Annotations[infrav1.AnnotationApprovedPlan] != plan.Spec.PlanHash {
		t.Errorf("Jobs on the target: %d, want one apply of the approved plan %s", len(jobs), plan.Spec.PlanHash)
	}
	if after := dst.stateIDs(moved); after["terraform_data.node"] != ids["terraform_data.node"] {
		t.Errorf("resource ids changed across the move: before %v, after %v", ids, after)
	}
}

// TestMoveStalePlan: a plan that waited for inputs the object no longer
// has (changed while the object was paused for the move) is an orphan on
// the target: it is not re-attached but superseded, and a plan of the
// current inputs waits instead, is approved and applies against the moved
// state.
func TestMoveStalePlan(t *testing.T) {
	src := startMoveEnv(t)
	dst := startMoveEnv(t)
	tc, ids, stale := src.pausedWithPlan("stale")
	src.setSize(tc, "medium")

	move(t, src, dst)

	moved := dst.resumeMoved("stale")
	dst.phaseWait(moved, stale.Name, infrav1.PlanSuperseded)
	dst.wait(moved, "a plan of the current inputs waiting", func(tc *infrav1.TerraformCluster) bool {
		c := condition(tc, infrav1.ConditionApplyJobSucceeded)
		return tc.Status.PendingPlanRef != nil && tc.Status.PendingPlanRef.Name != stale.Name && tc.Status.Plan != nil &&
			tc.Status.ActiveJob == nil && c != nil && c.Reason == infrav1.ReasonPlanAwaitingApproval
	})
	if moved.Status.Plan.PlanHash == stale.Spec.PlanHash {
		t.Fatalf("the new plan has the stale plan's hash %s", stale.Spec.PlanHash)
	}
	dst.approve(moved, moved.Status.Plan.PlanHash)
	dst.wait(moved, "the current plan applied", func(tc *infrav1.TerraformCluster) bool {
		return ready(tc) && tc.Status.Plan == nil && tc.Status.ActiveJob == nil
	})
	if after := dst.stateIDs(moved); after["terraform_data.node"] != ids["terraform_data.node"] {
		t.Errorf("resource ids changed across the move: before %v, after %v", ids, after)
	}
}

// TestMoveIdentity: clusterctl move carries the TerraformClusterIdentity
// a moved object uses and the Secret it names, kept in the provider's
// namespace (captf-system), where clusterctl looks for Secrets besides the
// namespace it moves. On the target the moved object passes the identity
// check, plans and applies with the credentials; the source keeps the
// identity and its Secret, as clusterctl keeps every cluster-scoped object
// and what it owns, and nothing of the moved object.
func TestMoveIdentity(t *testing.T) {
	src := startMoveEnv(t)
	dst := startMoveEnv(t)
	ctx := context.Background()
	const cred = "CANARY-CREDENTIAL-7c2e"
	secretKey := client.ObjectKey{Namespace: "captf-system", Name: "cloud"}
	if err := src.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secretKey.Name, Namespace: secretKey.Namespace},
		Data: map[string][]byte{"CLOUD_KEY": []byte(cred)}}); err != nil {
		t.Fatal(err)
	}
	id := &infrav1.TerraformClusterIdentity{ObjectMeta: metav1.ObjectMeta{Name: "team-a"},
		Spec: infrav1.TerraformClusterIdentitySpec{SecretRef: infrav1.SecretReference{Name: secretKey.Name, Namespace: secretKey.Namespace},
			AllowedNamespaces: &infrav1.AllowedNamespaces{List: []string{"default"}}}}
	if err := src.c.Create(ctx, id); err != nil {
		t.Fatal(err)
	}
	cluster := src.provisioned("with-identity")
	tc := src.create("with-identity", infrav1.ApplyManual, "small", func(tc *infrav1.TerraformCluster) {
		tc.Labels = map[string]string{infrav1.LabelClusterName: "with-identity"}
		tc.OwnerReferences = []metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Name: cluster.GetName(), UID: cluster.GetUID()}}
		tc.Spec.IdentityRef = &infrav1.IdentityReference{Kind: infrav1.IdentityKindTerraformClusterIdentity, Name: id.Name}
	})
	src.blockedWhileRunning(tc, "first apply", ready)
	if job := src.lastJob(tc); src.given(&job)["CLOUD_KEY"] != cred {
		t.Fatal("the first apply on the source was not given the identity's credentials")
	}
	ids := src.stateIDs(tc)
	// The identity is made an owner of its Secret, which clusterctl
	// follows.
	ownedBy := func(c client.Client, uid types.UID) func() bool {
		return func() bool {
			var s corev1.Secret
			return c.Get(ctx, secretKey, &s) == nil && slices.ContainsFunc(s.OwnerReferences, func(o metav1.OwnerReference) bool {
				return o.UID == uid && o.Kind == infrav1.IdentityKindTerraformClusterIdentity && o.Name == id.Name
			})
		}
	}
	src.waitFor("the identity owns its Secret on the source", ownedBy(src.c, id.UID))

	move(t, src, dst)

	// The identity and its Secret reached the target, the Secret owned by
	// the target's identity.
	var movedID infrav1.TerraformClusterIdentity
	if err := dst.c.Get(ctx, client.ObjectKey{Name: id.Name}, &movedID); err != nil {
		t.Fatalf("the identity did not reach the target: %v", err)
	}
	if !equality.Semantic.DeepEqual(movedID.Spec, id.Spec) {
		t.Errorf("the identity's spec on the target is %+v, want %+v", movedID.Spec, id.Spec)
	}
	var movedSecret corev1.Secret
	if err := dst.c.Get(ctx, secretKey, &movedSecret); err != nil {
		t.Fatalf("the identity's Secret did not reach the target: %v", err)
	}
	if string(movedSecret.Data["CLOUD_KEY"]) != cred {
		t.Error("the identity's Secret on the target holds other data")
	}
	if !ownedBy(dst.c, movedID.UID)() {
		t.Errorf("the identity's Secret on the target is owned by %v, want the target's identity %s", movedSecret.OwnerReferences, movedID.UID)
	}

	// The source keeps the identity and its Secret (other clusters there
	// may use them), and nothing of the moved object.
	if err := src.c.Get(ctx, client.ObjectKey{Name: id.Name}, &infrav1.TerraformClusterIdentity{}); err != nil {
		t.Errorf("the identity is gone from the source: %v", err)
	}
	if err := src.c.Get(ctx, secretKey, &corev1.Secret{}); err != nil {
		t.Errorf("the identity's Secret is gone from the source: %v", err)
	}
	if err := src.c.Get(ctx, client.ObjectKeyFromObject(tc), &infrav1.TerraformCluster{}); !apierrors.IsNotFound(err) {
		t.Errorf("the TerraformCluster on the source: %v, want it gone", err)
	}
	src.gone(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: engine.StateSecretName("tfc", tc.Name)}}, "the state Secret on the source")
	src.gone(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: engine.InputsName("tfc", tc.Name)}}, "the durable inputs on the source")

	// On the target the moved object passes the identity check; a change
	// plans and applies there with the identity's credentials, against the
	// moved state.
	moved := &infrav1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Name: tc.Name, Namespace: "default"}}
	dst.wait(moved, "the moved object ready on the target", ready)
	dst.setSize(moved, "large")
	p := dst.waitingPlan(moved, infrav1.ReasonPlanAwaitingApproval)
	if job := dst.lastJob(moved); dst.given(&job)["CLOUD_KEY"] != cred {
		t.Error("the plan Job on the target was not given the identity's credentials")
	}
	dst.approve(moved, p.PlanHash)
	dst.blockedWhileRunning(moved, "the change applied on the target", func(tc *infrav1.TerraformCluster) bool {
		return ready(tc) && tc.Status.Plan == nil
	})
	job := dst.lastJob(moved)
	if dst.given(&job)["CLOUD_KEY"] != cred || dst.jobOperation(job.Name) != infrav1.OperationApply {
		t.Errorf("the last Job on the target (%s) is not an apply given the identity's credentials", dst.jobOperation(job.Name))
	}
	if after := dst.stateIDs(moved); after["terraform_data.node"] != ids["terraform_data.node"] {
		t.Errorf("resource ids changed across the move: before %v, after %v", ids, after)
	}
	dst.noCredential(moved, cred)
}
