package terraformcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/kubectlcaptf"
)

// plans lists the TerraformPlans of tc.
func (h *harness) plans(tc client.Object) map[string]*infrav1.TerraformPlan {
	h.t.Helper()
	var list infrav1.TerraformPlanList
	if err := h.c.List(context.Background(), &list, client.InNamespace(tc.GetNamespace())); err != nil {
		h.t.Fatal(err)
	}
	out := map[string]*infrav1.TerraformPlan{}
	for i := range list.Items {
		if list.Items[i].Spec.TargetRef.Name == tc.GetName() {
			out[list.Items[i].Name] = &list.Items[i]
		}
	}
	return out
}

// livePlanOf waits for a live plan of tc for its status.plan and returns it.
func (h *harness) livePlanOf(tc *infrav1.TerraformCluster) *infrav1.TerraformPlan {
	h.t.Helper()
	p := h.waitingPlan(tc, infrav1.ReasonPlanAwaitingApproval)
	if tc.Status.PendingPlanRef == nil {
		h.t.Fatalf("status.plan %s waits without status.pendingPlanRef", p.PlanHash)
	}
	plan := h.plans(tc)[tc.Status.PendingPlanRef.Name]
	if plan == nil {
		h.t.Fatalf("status.pendingPlanRef names %s, which does not exist", tc.Status.PendingPlanRef.Name)
	}
	return plan
}

// phaseWait waits until plan is in phase (label and status alike).
func (h *harness) phaseWait(tc *infrav1.TerraformCluster, name string, phase infrav1.PlanPhase) *infrav1.TerraformPlan {
	h.t.Helper()
	var plan *infrav1.TerraformPlan
	h.wait(tc, "plan "+name+" "+string(phase), func(*infrav1.TerraformCluster) bool {
		plan = h.plans(tc)[name]
		return plan != nil && plan.Labels[infrav1.LabelPlanPhase] == string(phase) && plan.Status.Phase == phase
	})
	return plan
}

func (h *harness) approvePlan(plan *infrav1.TerraformPlan, user string) {
	h.t.Helper()
	before := plan.DeepCopy()
	plan.Spec.Approved, plan.Spec.ApprovedBy = true, user
	if err := h.c.Patch(context.Background(), plan, client.MergeFrom(before)); err != nil {
		h.t.Fatal(err)
	}
}

func TestTerraformPlanLifecycle(t *testing.T) {
	h := start(t)
	tc := h.create("life", infrav1.ApplyManual, "small", func(tc *infrav1.TerraformCluster) {
		tc.Labels = map[string]string{infrav1.LabelClusterName: "demo"}
	})
	h.wait(tc, "first apply", ready)
	if n := len(h.plans(tc)); n != 0 {
		t.Errorf("%d TerraformPlans for the ungated first apply", n)
	}

	// A change: one TerraformPlan, named from the Job and the hash, owned
	// by the target, labelled, with the plan's summary and no value.
	h.setSize(tc, "medium")
	a := h.livePlanOf(tc)
	p := tc.Status.Plan
	if a.Name != engine.PlanName(tc.Name, p.Job, p.PlanHash) || a.Spec.PlanHash != p.PlanHash || a.Spec.InputsHash != p.InputsHash {
		t.Errorf("plan %s %+v for status.plan %+v", a.Name, a.Spec, p)
	}
	wantLabels := map[string]string{infrav1.LabelClusterName: "demo", infrav1.LabelDestructive: "false",
		infrav1.LabelPlanPhase: "Pending", infrav1.LabelPlanReason: "Manual"}
	for k, v := range wantLabels {
		if a.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, a.Labels[k], v)
		}
	}
	if s := a.Spec.Summary; s.Update != 1 || s.Create+s.Replace+s.Delete+s.OutputChanges != 0 || len(s.Resources) != 1 {
		t.Errorf("summary %+v", s)
	}
	if len(a.OwnerReferences) != 1 || a.OwnerReferences[0].UID != tc.UID {
		t.Errorf("owner references %+v", a.OwnerReferences)
	}

	// Approved through spec.approved: Approved, then Applied; one apply.
	h.approvePlan(a, "alice")
	a = h.phaseWait(tc, a.Name, infrav1.PlanApplied)
	h.wait(tc, "applied", func(tc *infrav1.TerraformCluster) bool {
		return ready(tc) && tc.Status.Plan == nil && tc.Status.PendingPlanRef == nil
	})
	if c := meta.FindStatusCondition(a.Status.Conditions, infrav1.ConditionApproved); c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "alice") {
		t.Errorf("Approved condition %+v", c)
	}
	applies := 0
	for _, j := range h.jobs(tc) {
		if j.Annotations[infrav1.AnnotationApprovedPlan] == a.Spec.PlanHash {
			applies++
		}
	}
	if applies != 1 {
		t.Errorf("%d apply Jobs for one approval", applies)
	}

	// A new change supersedes: b waits, then c replaces it.
	h.setSize(tc, "large")
	h.wait(tc, "a plan", func(tc *infrav1.TerraformCluster) bool {
		return tc.Status.PendingPlanRef != nil && tc.Status.ActiveJob == nil && tc.Status.Plan != nil
	})
	b := h.livePlanOf(tc)
	h.setSize(tc, "huge")
	h.wait(tc, "a newer plan", func(tc *infrav1.TerraformCluster) bool {
		return tc.Status.PendingPlanRef != nil && tc.Status.PendingPlanRef.Name != b.Name && tc.Status.ActiveJob == nil && tc.Status.Plan != nil
	})
	c := h.livePlanOf(tc)
	b = h.phaseWait(tc, b.Name, infrav1.PlanSuperseded)

	// An approval that lands after the supersession is ignored, visibly.
	h.approvePlan(b, "bob")
	h.wait(tc, "the late approval ignored", func(*infrav1.TerraformCluster) bool {
		b = h.plans(tc)[b.Name]
		c := meta.FindStatusCondition(b.Status.Conditions, infrav1.ConditionApproved)
		return c != nil && c.Reason == infrav1.ReasonApprovalIgnored
	})
	evs := h.events(tc)
	found := false
	for _, e := range evs {
		if e.Reason == infrav1.EventPlanSuperseded && e.Type == "Warning" && strings.Contains(e.Note, b.Name) && strings.Contains(e.Note, c.Name) {
			found = true
		}
	}
	if !found || count(evs, infrav1.EventPlanSuperseded) != 1 {
		t.Errorf("no single PlanSuperseded warning naming %s and %s: %v", b.Name, c.Name, reasons(evs))
	}
	for _, j := range h.jobs(tc) {
		if j.Annotations[infrav1.AnnotationApprovedPlan] == b.Spec.PlanHash {
			t.Errorf("the ignored approval started Job %s", j.Name)
		}
	}

	// The annotation approves the same object's flow: c goes Approved and
	// Applied, and the annotation is consumed.
	h.approve(tc, c.Spec.PlanHash)
	c = h.phaseWait(tc, c.Name, infrav1.PlanApplied)
	h.wait(tc, "applied by annotation", func(tc *infrav1.TerraformCluster) bool {
		return ready(tc) && tc.Status.PendingPlanRef == nil && tc.Annotations[infrav1.AnnotationApprovePlan] == ""
	})
	if c.Spec.Approved {
		t.Error("the annotation wrote spec.approved")
	}

	// Pruning keeps the 10 newest finished plans and never the live one.
	prev := ""
	for i := range 10 {
		h.setSize(tc, "size-"+string(rune('a'+i)))
		h.wait(tc, "a new plan", func(tc *infrav1.TerraformCluster) bool {
			ref := tc.Status.PendingPlanRef
			return ref != nil && ref.Name != prev && tc.Status.Plan != nil && tc.Status.ActiveJob == nil
		})
		prev = h.livePlanOf(tc).Name
	}
	h.wait(tc, "pruned", func(tc *infrav1.TerraformCluster) bool {
		finished, live := 0, 0
		for _, plan := range h.plans(tc) {
			if infrav1.PlanPhase(plan.Labels[infrav1.LabelPlanPhase]).Terminal() {
				finished++
			} else {
				live++
			}
		}
		return finished == engine.KeepFinished && live == 1
	})
	if _, ok := h.plans(tc)[a.Name]; ok {
		for _, plan := range h.plans(tc) {
			t.Logf("%s %s %s", plan.Name, plan.CreationTimestamp, plan.Labels[infrav1.LabelPlanPhase])
		}
		t.Errorf("the oldest finished plan %s was not pruned", a.Name)
	}

	// No plan holds a value: neither the Secret's canary nor an inline one.
	all, _ := json.Marshal(h.plans(tc))
	if strings.Contains(string(all), canary) || strings.Contains(string(all), "huge") {
		t.Error("a TerraformPlan holds a value")
	}
}

// TestTerraformPlanFailed: an approved plan whose apply found other
// changes is Failed, and the new plan waits as a new object.
func TestTerraformPlanFailed(t *testing.T) {
	h := start(t)
	tc := h.create("fails", infrav1.ApplyManual, "small")
	h.wait(tc, "first apply", ready)
	h.setVar(tc, "moving", "true")
	a := h.livePlanOf(tc)
	time.Sleep(1100 * time.Millisecond) // see TestPlanChanged
	h.approvePlan(a, "alice")
	h.phaseWait(tc, a.Name, infrav1.PlanFailed)
	fresh := h.waitingPlan(tc, infrav1.ReasonPlanChanged)
	if tc.Status.PendingPlanRef == nil || tc.Status.PendingPlanRef.Name == a.Name {
		t.Fatalf("pendingPlanRef %+v after the plan changed", tc.Status.PendingPlanRef)
	}
	b := h.plans(tc)[tc.Status.PendingPlanRef.Name]
	if b == nil || b.Spec.PlanHash != fresh.PlanHash || b.Labels[infrav1.LabelPlanPhase] != "Pending" || b.Spec.Approved {
		t.Errorf("the new plan %+v", b)
	}
}

// TestApproveWithKubectlCaptf drives a real approval the way a person
// would: the webhook is served and the manager runs as its ServiceAccount;
// alice, who holds only the sample approver role, runs `kubectl captf
// approve`; the plan is applied. A plan approved in someone else's name is
// refused by the webhook.
func TestApproveWithKubectlCaptf(t *testing.T) {
	h := startWith(t, true)
	h.env.CreateFromFile(t, "../../../config/samples/terraformplan-rbac.yaml")
	tc := h.create("kubectl", infrav1.ApplyManual, "small")
	h.wait(tc, "first apply", ready)
	h.setSize(tc, "medium")
	plan := h.livePlanOf(tc)

	// mallory may patch plans too, but not in alice's name.
	mallory := h.env.ClientAs(t, "mallory", "platform-approvers")
	forged := plan.DeepCopy()
	before := plan.DeepCopy()
	forged.Spec.Approved, forged.Spec.ApprovedBy = true, "alice"
	if err := mallory.Patch(context.Background(), forged, client.MergeFrom(before)); err == nil || !strings.Contains(err.Error(), "mallory") {
		t.Errorf("an approval in someone else's name: %v", err)
	}

	h.kubectlCaptf(h.env.UserKubeconfig(t, "alice", "platform-approvers"), "approve", plan.Name)
	applied := h.phaseWait(tc, plan.Name, infrav1.PlanApplied)
	if applied.Spec.ApprovedBy != "alice" {
		t.Errorf("approvedBy %q", applied.Spec.ApprovedBy)
	}
	h.wait(tc, "applied", func(tc *infrav1.TerraformCluster) bool { return ready(tc) && tc.Status.PendingPlanRef == nil })
}

// kubectlCaptf runs kubectl captf in this process with args, in the
// namespace default, as the kubeconfig says, and returns what it printed;
// an error fails the test.
func (h *harness) kubectlCaptf(kubeconfig string, args ...string) string {
	h.t.Helper()
	var out, errOut bytes.Buffer
	cmd := kubectlcaptf.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(append(args, "-n", "default", "--kubeconfig", kubeconfig))
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		h.t.Fatalf("kubectl captf %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
	}
	return out.String()
}
