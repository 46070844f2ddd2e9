package terraformcluster

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/render"
)

// TestPoolUnapprovedChange: under applyPolicy Manual, what a pool applies
// without an approval of its plan is only its rotated bootstrap data, and
// whether it may is decided on what only the manager and terraform write.
//
//   - Someone who can write Secrets in the namespace (every runner pod
//     can) sets the durable inputs Secret's approval-hash annotations to
//     the approval hash of a waiting scale-up, read from the plan Job's
//     inputs: the scale-up still waits for its approval.
//   - Bootstrap data rotates while a member drifted: the Job that was to
//     apply the rotation finds the drift, applies nothing, and a plan of
//     the change waits (reason Manual); the drift stays until approved.
//   - Bootstrap data rotates where it replaces a resource: the guard stops
//     it, a plan waits with reason Destructive, and the drift checks that
//     follow start no apply again.
//   - The MachinePool names a Secret that no bootstrap provider made: its
//     data waits for an approval like any other input.
func TestPoolUnapprovedChange(t *testing.T) {
	h := startMachines(t)
	ctx := context.Background()
	seen := record[*infrav1.TerraformMachinePool](h.harness, &infrav1.TerraformMachinePoolList{}, "default")
	u := h.cluster("guarded", false)
	h.env.WorkloadKubeconfig(t, "default", "guarded")
	h.exportsCluster(u, "zone-a")
	p := &infrav1.TerraformMachinePool{
		ObjectMeta: metav1.ObjectMeta{Name: "guarded-pool", Namespace: "default"},
		Spec: infrav1.TerraformMachinePoolSpec{RunnerSpec: infrav1.RunnerSpec{
			Image:       poolImage,
			ApplyPolicy: infrav1.ApplyManual,
			Variables:   []infrav1.Variable{{Name: "dir", Value: &apiextensionsv1.JSON{Raw: []byte(`"guarded"`)}}},
			Drift:       infrav1.DriftSpec{IntervalSeconds: ptr.To(int32(5)), Action: infrav1.DriftActionReport},
		}},
	}
	if err := h.c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	mp := h.capiMachinePool("guarded-pool", "guarded", "guarded-pool-bootstrap", 2)
	bootstrap := bootstrapFor(mp, "guarded-pool-bootstrap", bootstrapCanary)
	if err := h.c.Create(ctx, bootstrap); err != nil {
		t.Fatal(err)
	}
	h.waitPool(p, "provisioned with 2 members", func(p *infrav1.TerraformMachinePool) bool {
		return p.Status.Ready && len(p.Spec.ProviderIDList) == 2 && p.Status.ActiveJob == nil
	})
	admin := h.env.Kubeconfig(t)
	file := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(h.files, "guarded", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	secretOf := func(i int) string {
		b, _ := os.ReadFile(filepath.Join(h.files, "guarded", ".guarded-pool-"+strconv.Itoa(i)+".txt.captftest-secret"))
		return string(b)
	}
	// twoDriftChecks waits for two drift checks to end after now: each
	// is a reconcile that could start an apply.
	twoDriftChecks := func(what string) {
		t.Helper()
		since := time.Now()
		h.waitPool(p, what+": two drift checks later", func(p *infrav1.TerraformMachinePool) bool {
			c := p.Status.LastDriftCheck
			return c != nil && c.Sub(since) >= 5*time.Second
		})
	}
	waitingPlan := func(what string, reason infrav1.PlanReason) *infrav1.TerraformPlan {
		t.Helper()
		var plan infrav1.TerraformPlan
		h.waitPool(p, what, func(p *infrav1.TerraformMachinePool) bool {
			return p.Status.PendingPlanRef != nil && p.Status.Plan != nil && p.Status.Plan.Reason == reason &&
				h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: p.Status.PendingPlanRef.Name}, &plan) == nil
		})
		return &plan
	}
	approve := func(plan *infrav1.TerraformPlan) {
		t.Helper()
		h.kubectlCaptf(admin, "approve", plan.Name, "--plan-hash", plan.Spec.PlanHash)
		waitFor(h.harness, plan, "plan "+plan.Name+" applied", func(p *infrav1.TerraformPlan) bool { return p.Status.Phase == infrav1.PlanApplied })
		h.waitPool(p, "idle after "+plan.Name, func(p *infrav1.TerraformMachinePool) bool {
			return p.Status.ActiveJob == nil && p.Status.Plan == nil && p.Status.LastRun != nil && p.Status.LastRun.Succeeded
		})
	}

	// 1. A forged approval hash on the durable inputs Secret.
	scaled := mp.DeepCopy()
	scaled.Spec.Replicas = ptr.To(int32(3))
	if err := h.c.Patch(ctx, scaled, client.MergeFrom(mp)); err != nil {
		t.Fatal(err)
	}
	waitingPlan("the scale-up waits", infrav1.ReasonManual)
	applies := h.jobNames(p, infrav1.OperationApply)
	// What a runner pod reads: the plan Job's inputs, recording their
	// approval hash.
	var approval string
	matches, _ := filepath.Glob(filepath.Join(h.node.Root(), "pod-*", "volumes", "work", "main.tf.json"))
	for _, m := range matches {
		main, err := os.ReadFile(m)
		if err != nil {
			continue
		}
		if ih, _ := render.RootInputsHash(main); ih == p.Status.Plan.InputsHash {
			approval, _ = render.RootApprovalHash(main)
		}
	}
	if approval == "" {
		t.Fatal("no pod's inputs record the scale-up's approval hash: the forgery below proves nothing")
	}
	var durable corev1.Secret
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: engine.InputsName("tfmp", p.Name)}, &durable); err != nil {
		t.Fatal(err)
	}
	forged := durable.DeepCopy()
	forged.Annotations["captf.io/approval-hash"] = approval
	forged.Annotations["captf.io/applied-approval-hash"] = approval
	if err := h.c.Patch(ctx, forged, client.MergeFrom(&durable)); err != nil {
		t.Fatal(err)
	}
	twoDriftChecks("the forged approval hash")
	if now := h.jobNames(p, infrav1.OperationApply); !slices.Equal(now, applies) || len(p.Spec.ProviderIDList) != 2 {
		t.Fatalf("after the durable inputs' annotations were forged: apply Jobs %v (before %v), members %v; want the scale-up to wait", now, applies, p.Spec.ProviderIDList)
	}
	// Withdrawn: the plan is moot.
	if err := h.c.Get(ctx, client.ObjectKeyFromObject(mp), mp); err != nil {
		t.Fatal(err)
	}
	back := mp.DeepCopy()
	back.Spec.Replicas = ptr.To(int32(2))
	if err := h.c.Patch(ctx, back, client.MergeFrom(mp)); err != nil {
		t.Fatal(err)
	}
	h.waitPool(p, "the scale-up withdrawn", func(p *infrav1.TerraformMachinePool) bool { return p.Status.Plan == nil && p.Status.ActiveJob == nil })

	// 2. Bootstrap data rotates while a member drifted.
	drifted := "edited outside terraform"
	if err := os.WriteFile(filepath.Join(h.files, "guarded", "guarded-pool-0.txt"), []byte(drifted), 0o644); err != nil {
		t.Fatal(err)
	}
	rotated := bootstrapCanary + "-ROTATED"
	bootstrap.Data["value"] = []byte(rotated)
	if err := h.c.Update(ctx, bootstrap); err != nil {
		t.Fatal(err)
	}
	plan := waitingPlan("the rotation with drift waits", infrav1.ReasonManual)
	if got := file("guarded-pool-0.txt"); got != drifted {
		t.Errorf("the drifted member holds %q before any approval, want the drift left alone", got)
	}
	if secretOf(1) != bootstrapCanary {
		t.Errorf("a member got the rotated bootstrap data before any approval")
	}
	if !slices.ContainsFunc(seen.all(), func(v *infrav1.TerraformMachinePool) bool {
		r := v.Status.LastRun
		return v.Name == p.Name && r != nil && r.Error != nil && r.Error.Kind == infrav1.ErrorKindNeedsApproval
	}) {
		t.Errorf("no version of the pool records a run refused with %s", infrav1.ErrorKindNeedsApproval)
	}
	approve(plan)
	if got := file("guarded-pool-0.txt"); got == drifted || secretOf(0) != rotated || secretOf(1) != rotated {
		t.Errorf("after the approval: the drifted member %q, secrets %q, %q; want the drift undone and the rotation applied", got, secretOf(0), secretOf(1))
	}

	// 3. A rotation that replaces a resource.
	before := p.DeepCopy()
	p.Spec.Variables = append(p.Spec.Variables, infrav1.Variable{Name: "replace_on_bootstrap", Value: &apiextensionsv1.JSON{Raw: []byte(`true`)}})
	if err := h.c.Patch(ctx, p, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	approve(waitingPlan("the launch file waits", infrav1.ReasonManual))
	bootstrap.Data["value"] = []byte(rotated + "-AGAIN")
	if err := h.c.Update(ctx, bootstrap); err != nil {
		t.Fatal(err)
	}
	waitingPlan("the replacing rotation waits", infrav1.ReasonDestructive)
	applies = h.jobNames(p, infrav1.OperationApply)
	twoDriftChecks("the replacing rotation")
	if now := h.jobNames(p, infrav1.OperationApply); !slices.Equal(now, applies) {
		t.Errorf("apply Jobs %v after two drift checks, want still %v: the refused rotation is tried again", now, applies)
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, infrav1.ConditionApplyJobSucceeded); c == nil || c.Reason != infrav1.ReasonPlanAwaitingApproval {
		t.Errorf("ApplyJobSucceeded %+v, want %s", c, infrav1.ReasonPlanAwaitingApproval)
	}
	approve(waitingPlan("the replacing rotation", infrav1.ReasonDestructive))

	// 4. The MachinePool names a Secret no bootstrap provider made (no
	// cluster label, no controller owner): its data is bound by the
	// approval, and the change waits as a plan.
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "some-app-secret", Namespace: "default"}, Data: map[string][]byte{"value": []byte(bootstrapCanary + "-FOREIGN")}}
	if err := h.c.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Get(ctx, client.ObjectKeyFromObject(mp), mp); err != nil {
		t.Fatal(err)
	}
	renamed := mp.DeepCopy()
	renamed.Spec.Template.Spec.Bootstrap.DataSecretName = ptr.To(foreign.Name)
	if err := h.c.Patch(ctx, renamed, client.MergeFrom(mp)); err != nil {
		t.Fatal(err)
	}
	waitingPlan("data from a Secret no bootstrap provider made", infrav1.ReasonManual)
	if secretOf(0) == bootstrapCanary+"-FOREIGN" {
		t.Error("a member got the data of a Secret no bootstrap provider made, with no approval")
	}
	h.noCanary(bootstrapCanary, map[string]any{"status": p.Status, "events": h.events(p), "seen pools": seen.all()})
}
