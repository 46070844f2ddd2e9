package terraformplan

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	infrav1 "github.com/captf/captf/api/v1alpha1"
)

const manager = "system:serviceaccount:captf-system:captf-manager"

func testPlan(phase infrav1.PlanPhase, approvedBy string) *infrav1.TerraformPlan {
	p := &infrav1.TerraformPlan{
		ObjectMeta: metav1.ObjectMeta{Name: "demo-3f9a1c07be", Namespace: "default"},
		Spec: infrav1.TerraformPlanSpec{
			TargetRef:  infrav1.PlanTargetReference{Kind: "TerraformCluster", Name: "demo"},
			PlanHash:   "p2:" + strings.Repeat("9c", 32),
			InputsHash: "h2:" + strings.Repeat("51", 32),
			Reason:     infrav1.ReasonDestructive,
			Summary:    infrav1.PlanSummary{Create: 1, Replace: 1, Resources: []string{"a (replace)", "b (create)"}},
		},
	}
	if phase != "" {
		p.Labels = map[string]string{infrav1.LabelPlanPhase: string(phase)}
	}
	if approvedBy != "" {
		p.Spec.Approved, p.Spec.ApprovedBy = true, approvedBy
	}
	return p
}

func messages(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func TestValidateCreate(t *testing.T) {
	v := &Validator{ManagerUsername: manager}
	cases := []struct {
		reason string
		user   string
		plan   *infrav1.TerraformPlan
		want   []string
	}{
		{"the manager creates a pending plan", manager, testPlan(infrav1.PlanPending, ""), nil},
		{"the manager may create a plan in any phase", manager, testPlan(infrav1.PlanFailed, ""), nil},
		{"approved needs approvedBy, even from the manager", manager, func() *infrav1.TerraformPlan {
			p := testPlan(infrav1.PlanPending, "")
			p.Spec.Approved = true
			return p
		}(), []string{"spec.approvedBy: Required value: set it to your own username when you set approved to true"}},
		{"approvedBy without approved", "alice", func() *infrav1.TerraformPlan {
			p := testPlan(infrav1.PlanPending, "")
			p.Spec.ApprovedBy = "alice"
			return p
		}(), []string{"spec.approvedBy: Forbidden: must be empty unless approved is true: it names who approved"}},
		{"a creator approves as themself", "alice", testPlan(infrav1.PlanApproved, "alice"), nil},
		{"a creator approves as someone else", "mallory", testPlan(infrav1.PlanPending, "alice"), []string{
			`spec.approvedBy: Invalid value: "alice": must be your own username "mallory": whoever creates an approved plan approves it, and approvedBy records who approved`,
		}},
		{"a mover creates a finished plan approved by someone else", "mover", testPlan(infrav1.PlanApplied, "alice"), nil},
		{"a mover creates a superseded plan", "mover", testPlan(infrav1.PlanSuperseded, ""), nil},
		{"a creator without a phase label", "alice", testPlan("", ""), nil},
		{"a creator may not claim Approved for a plan that is not", "alice", testPlan(infrav1.PlanApproved, ""), []string{
			"metadata.labels[captf.io/plan-phase]: Forbidden: a plan that is not approved cannot be created in phase Approved",
		}},
		{"an unknown phase", "alice", testPlan("Waiting", ""), []string{
			`metadata.labels[captf.io/plan-phase]: Unsupported value: "Waiting": supported values: "Pending", "Approved", "Applied", "Superseded", "Failed"`,
		}},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			got := messages(v.validateCreate(tc.user, tc.plan))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("validateCreate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	v := &Validator{ManagerUsername: manager}
	with := func(p *infrav1.TerraformPlan, mutate func(*infrav1.TerraformPlan)) *infrav1.TerraformPlan {
		p = p.DeepCopy()
		mutate(p)
		return p
	}
	pending := testPlan(infrav1.PlanPending, "")
	approved := testPlan(infrav1.PlanApproved, "alice")
	cases := []struct {
		reason   string
		user     string
		old, new *infrav1.TerraformPlan
		want     []string
	}{
		{"approve as yourself", "alice", pending, with(pending, func(p *infrav1.TerraformPlan) {
			p.Spec.Approved, p.Spec.ApprovedBy = true, "alice"
		}), nil},
		{"approve as someone else", "mallory", pending, with(pending, func(p *infrav1.TerraformPlan) {
			p.Spec.Approved, p.Spec.ApprovedBy = true, "alice"
		}), []string{`spec.approvedBy: Invalid value: "alice": must be your own username "mallory": approvedBy records who approved, not who is claimed to have (kubectl captf approve fills it in)`}},
		{"approve a plan without a phase label", "alice", testPlan("", ""), with(testPlan("", ""), func(p *infrav1.TerraformPlan) {
			p.Spec.Approved, p.Spec.ApprovedBy = true, "alice"
		}), nil},
		{"approve a superseded plan", "alice", testPlan(infrav1.PlanSuperseded, ""), with(testPlan(infrav1.PlanSuperseded, ""), func(p *infrav1.TerraformPlan) {
			p.Spec.Approved, p.Spec.ApprovedBy = true, "alice"
		}), []string{"spec.approved: Forbidden: the plan is Superseded (label captf.io/plan-phase), so it can no longer be approved; approve the plan its target names in status.pendingPlanRef.name"}},
		{"withdraw", "alice", approved, with(approved, func(p *infrav1.TerraformPlan) {
			p.Spec.Approved, p.Spec.ApprovedBy = false, ""
		}), []string{"spec.approved: Forbidden: an approval cannot be withdrawn: alice approved this plan"}},
		{"change the approver", "bob", approved, with(approved, func(p *infrav1.TerraformPlan) {
			p.Spec.ApprovedBy = "bob"
		}), []string{"spec.approvedBy: Forbidden: an approval cannot be changed: alice approved this plan"}},
		{"edit the hash after approval", "alice", approved, with(approved, func(p *infrav1.TerraformPlan) {
			p.Spec.PlanHash = "p2:" + strings.Repeat("00", 32)
		}), []string{"spec.planHash: Forbidden: is immutable: the manager wrote it when it made the plan, and an approval approves exactly that plan"}},
		{"edit the summary, even as the manager", manager, pending, with(pending, func(p *infrav1.TerraformPlan) {
			p.Spec.Summary.Delete = 1
		}), []string{"spec.summary: Forbidden: is immutable: the manager wrote it when it made the plan, and an approval approves exactly that plan"}},
		{"the manager moves the phase", manager, approved, with(approved, func(p *infrav1.TerraformPlan) {
			p.Labels[infrav1.LabelPlanPhase] = string(infrav1.PlanApplied)
		}), nil},
		{"a person moves the phase", "alice", pending, with(pending, func(p *infrav1.TerraformPlan) {
			p.Labels[infrav1.LabelPlanPhase] = string(infrav1.PlanApproved)
		}), []string{"metadata.labels[captf.io/plan-phase]: Forbidden: only the manager may change the phase label; approve with spec.approved and the manager moves the phase"}},
		{"a person removes the phase", "alice", testPlan(infrav1.PlanSuperseded, ""), with(testPlan(infrav1.PlanSuperseded, ""), func(p *infrav1.TerraformPlan) {
			delete(p.Labels, infrav1.LabelPlanPhase)
		}), []string{"metadata.labels[captf.io/plan-phase]: Forbidden: only the manager may remove the phase label; approve with spec.approved and the manager moves the phase"}},
		{"other metadata of a finished plan may change", "alice", testPlan(infrav1.PlanApplied, "bob"), with(testPlan(infrav1.PlanApplied, "bob"), func(p *infrav1.TerraformPlan) {
			p.Labels["team"] = "network"
		}), nil},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			got := messages(v.validateUpdate(tc.user, tc.old, tc.new))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("validateUpdate (-want +got):\n%s", diff)
			}
		})
	}
}
