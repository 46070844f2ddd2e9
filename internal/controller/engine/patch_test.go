package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/testenv"
)

// TestEchoes writes an object and a plan as the reconcile does, against
// the real API server, and asks the watches' predicate about the updates
// those writes make: the manager's own writes of status, of the
// block-move annotation and of a plan's phase bring no reconcile; someone
// else's write does, alone or folded with one of the manager's into one
// event (a relist of the watch).
func TestEchoes(t *testing.T) {
	ctx := context.Background()
	env := testenv.Start(t, "../../..")
	c := env.Client
	r := &Reconciler{Kind: theTestKind, Client: c, Reader: c, RunnerImage: runnerImage}
	echoes := r.echoes()
	update := func(old, now client.Object) bool {
		return echoes.Update(event.UpdateEvent{ObjectOld: old.DeepCopyObject().(client.Object), ObjectNew: now.DeepCopyObject().(client.Object)})
	}

	tc := &infrav1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: "default"},
		Spec:       infrav1.TerraformClusterSpec{RunnerSpec: infrav1.RunnerSpec{Image: moduleImage}},
	}
	if err := c.Create(ctx, tc); err != nil {
		t.Fatal(err)
	}
	created := tc.DeepCopy()
	if !echoes.Create(event.CreateEvent{Object: created}) {
		t.Error("the create of an object brings no reconcile")
	}

	s := newScope(tc)
	if err := r.blockMove(ctx, tc, infrav1.OperationApply); err != nil {
		t.Fatal(err)
	}
	blocked := tc.DeepCopy()
	s.obj.GetRunnerStatus().ActiveJob = &infrav1.ActiveJob{Name: "echo-apply-1", Operation: infrav1.OperationApply}
	if err := r.patchStatus(ctx, s); err != nil {
		t.Fatal(err)
	}
	written := tc.DeepCopy()
	if update(created, blocked) {
		t.Error("the manager's block-move annotation brings a reconcile")
	}
	if update(blocked, written) {
		t.Error("the manager's status write brings a reconcile")
	}

	// Someone else's write: a reconcile, alone or folded with the
	// manager's next write.
	other := written.DeepCopy()
	other.Annotations[infrav1.AnnotationApprovePlan] = "p2:aaaa"
	if err := c.Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	if !update(written, other) {
		t.Error("an approval brings no reconcile")
	}
	tc.SetResourceVersion(other.ResourceVersion)
	tc.SetAnnotations(other.Annotations)
	if err := r.removeAnnotation(ctx, tc, AnnotationBlockMove); err != nil {
		t.Fatal(err)
	}
	released := tc.DeepCopy()
	if update(other, released) {
		t.Error("the manager's removal of block-move brings a reconcile")
	}
	if !update(written, released) {
		t.Error("an approval folded into one event with the manager's write brings no reconcile")
	}
	// An object whose writes were not recorded (another manager's, a
	// manager before a restart): every update goes through.
	r2 := &Reconciler{Kind: theTestKind, Client: c, Reader: c}
	if !r2.echoes().Update(event.UpdateEvent{ObjectOld: blocked, ObjectNew: written}) {
		t.Error("a write this manager did not make brings no reconcile")
	}

	// A plan: its phase moves are the manager's; an approval is not.
	plan := &infrav1.TerraformPlan{
		ObjectMeta: metav1.ObjectMeta{Name: "echo-plan", Namespace: "default", Labels: map[string]string{infrav1.LabelPlanPhase: string(infrav1.PlanPending)}},
		Spec: infrav1.TerraformPlanSpec{TargetRef: infrav1.PlanTargetReference{Kind: "TerraformCluster", Name: "echo"}, Reason: infrav1.ReasonManual,
			PlanHash: "p2:" + strings.Repeat("a", 64), InputsHash: "h2:" + strings.Repeat("b", 64)},
	}
	if err := c.Create(ctx, plan); err != nil {
		t.Fatal(err)
	}
	if !echoes.Create(event.CreateEvent{Object: plan.DeepCopy()}) {
		t.Error("the create of a plan the manager did not make brings no reconcile")
	}
	pending := plan.DeepCopy()
	if err := r.approvePlan(ctx, plan.Name, plan.Namespace, "someone"); err != nil {
		t.Fatal(err)
	}
	approved := &infrav1.TerraformPlan{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(plan), approved); err != nil {
		t.Fatal(err)
	}
	if approved.Labels[infrav1.LabelPlanPhase] != string(infrav1.PlanApproved) || approved.Status.Phase != infrav1.PlanApproved {
		t.Fatalf("plan label %q, status phase %q: want both Approved", approved.Labels[infrav1.LabelPlanPhase], approved.Status.Phase)
	}
	if update(pending, approved) {
		t.Error("the manager's move of a plan to Approved brings a reconcile")
	}
	byHand := approved.DeepCopy()
	byHand.Spec.Approved, byHand.Spec.ApprovedBy = true, "someone"
	if err := c.Update(ctx, byHand); err != nil {
		t.Fatal(err)
	}
	if !update(approved, byHand) {
		t.Error("spec.approved on a plan brings no reconcile")
	}
}

// TestCaughtUp: a reconcile reads its object from the cache only when the
// cache's copy is at least as new as the manager's last write of it.
func TestCaughtUp(t *testing.T) {
	r := &Reconciler{Kind: theTestKind}
	at := func(rv string) client.Object {
		return &infrav1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "default", ResourceVersion: rv}}
	}
	if r.caughtUp(at("10")) {
		t.Error("caught up with no write recorded")
	}
	r.wrote(at("9"))
	r.wrote(at("10"))
	for rv, want := range map[string]bool{"9": false, "10": true, "11": true, "100": true, "": false, "x": false} {
		if got := r.caughtUp(at(rv)); got != want {
			t.Errorf("caughtUp at resourceVersion %q after a write at 10 = %t, want %t", rv, got, want)
		}
	}
	r.forget(at("10"))
	if r.caughtUp(at("11")) {
		t.Error("caught up after the failed write forgot the record")
	}
}

// TestReadObjectAfterRestart: a manager with no record of its writes of
// an object (a new process after a restart, or after a write of it
// failed) reads the object from the API server once, and from then on
// takes the cache's copy as soon as it is at least as new as that read:
// an idle object's later re-checks send no request. A write of someone
// else's after the read still reaches the reconcile (the cache shows it
// once it is newer).
func TestReadObjectAfterRestart(t *testing.T) {
	ctx := context.Background()
	cch, c, direct := cachedEnv(t)
	reader, gets := recordGets(direct)
	r := &Reconciler{Kind: theTestKind, Client: c, Reader: reader, RunnerImage: runnerImage}
	tc := &infrav1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "restarted", Namespace: "default"},
		Spec:       infrav1.TerraformClusterSpec{RunnerSpec: infrav1.RunnerSpec{Image: moduleImage}},
	}
	if err := direct.Create(ctx, tc); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(tc)
	inCache := func(rv string) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			var got infrav1.TerraformCluster
			return cch.Get(ctx, key, &got) == nil && got.ResourceVersion == rv, nil
		}); err != nil {
			t.Fatalf("the cache does not show resourceVersion %s", rv)
		}
	}
	inCache(tc.ResourceVersion)
	for i := range 3 {
		obj, err := r.readObject(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if obj.GetResourceVersion() != tc.ResourceVersion {
			t.Fatalf("read %d: resourceVersion %s, want %s", i, obj.GetResourceVersion(), tc.ResourceVersion)
		}
	}
	if n := len(gets()); n != 1 {
		t.Errorf("three re-checks of an idle object after a restart read it from the API server %d times, want once", n)
	}

	// Someone else's write: the cache shows it, and the re-check reads it
	// there.
	before := tc.DeepCopy()
	tc.Annotations = map[string]string{"example.com/note": "x"}
	if err := direct.Patch(ctx, tc, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	inCache(tc.ResourceVersion)
	obj, err := r.readObject(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if obj.GetAnnotations()["example.com/note"] != "x" {
		t.Error("the re-check after someone else's write does not see it")
	}
	if n := len(gets()); n != 0 {
		t.Errorf("the re-check after someone else's write read the API server %d times, want none (the cache shows it)", n)
	}
}
