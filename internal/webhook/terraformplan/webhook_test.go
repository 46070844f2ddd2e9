package terraformplan

import (
	"context"
	"errors"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/testenv"
)

const testers = "plan-testers"

// serve runs the webhook in this process, where the real API server calls
// it.
func serve(t *testing.T, env *testenv.Env) (stop func()) {
	t.Helper()
	return env.ServeWebhooks(t, (&Validator{ManagerUsername: manager}).SetupWithManager)
}

// grantPlans lets the group testers do everything to terraformplans, so
// that only admission decides.
func grantPlans(t *testing.T, env *testenv.Env) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "plan-testers"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{infrav1.GroupVersion.Group}, Resources: []string{"terraformplans"},
			Verbs: []string{"create", "get", "list", "watch", "patch", "update", "delete"},
		}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "plan-testers"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "Group", Name: testers}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}

func refused(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Errorf("allowed, want a refusal naming %q", want)
		return
	}
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want 422 Invalid naming %q", err, want)
	}
}

func approve(t *testing.T, c client.Client, p *infrav1.TerraformPlan, as string) error {
	t.Helper()
	patch := client.RawPatch("application/merge-patch+json",
		[]byte(`{"spec":{"approved":true,"approvedBy":"`+as+`"}}`))
	return c.Patch(context.Background(), p.DeepCopy(), patch)
}

func setPhase(t *testing.T, c client.Client, p *infrav1.TerraformPlan, phase infrav1.PlanPhase) error {
	t.Helper()
	q := p.DeepCopy()
	patch := client.MergeFrom(p.DeepCopy())
	q.Labels[infrav1.LabelPlanPhase] = string(phase)
	return c.Patch(context.Background(), q, patch)
}

// TestWebhook sends every admission rule of spec 002 through the real API
// server, as different users (impersonation), to the webhook served by
// this process.
func TestWebhook(t *testing.T) {
	env := testenv.StartWithWebhooks(t, "../../..")
	grantPlans(t, env)
	stop := serve(t, env)
	ctx := context.Background()

	mgrC := env.ClientAs(t, manager, testers)
	alice := env.ClientAs(t, "alice", testers)
	mallory := env.ClientAs(t, "mallory", testers)
	mover := env.ClientAs(t, "capi-mover", testers)

	create := func(t *testing.T, c client.Client, name string, phase infrav1.PlanPhase, approvedBy string) (*infrav1.TerraformPlan, error) {
		t.Helper()
		p := testPlan(phase, approvedBy)
		p.Name = name
		return p, c.Create(ctx, p)
	}
	mustCreate := func(t *testing.T, name string, phase infrav1.PlanPhase) *infrav1.TerraformPlan {
		t.Helper()
		p, err := create(t, mgrC, name, phase, "")
		if err != nil {
			t.Fatalf("the manager creates %s: %v", name, err)
		}
		return p
	}

	t.Run("approve as someone else is refused, as yourself allowed", func(t *testing.T) {
		p := mustCreate(t, "approve", infrav1.PlanPending)
		refused(t, approve(t, mallory, p, "alice"), `spec.approvedBy: Invalid value: "alice": must be your own username "mallory"`)
		if err := approve(t, alice, p, "alice"); err != nil {
			t.Fatalf("alice approves as alice: %v", err)
		}
		var got infrav1.TerraformPlan
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), &got); err != nil {
			t.Fatal(err)
		}
		if !got.Spec.Approved || got.Spec.ApprovedBy != "alice" {
			t.Errorf("stored approval = %v by %q", got.Spec.Approved, got.Spec.ApprovedBy)
		}

		// After the approval: the hash, the approver and the approval
		// itself are frozen (the CRD's CEL rules answer first here; the
		// webhook's own copy of these rules is TestValidateUpdate's).
		q := got.DeepCopy()
		q.Spec.PlanHash = "p2:" + strings.Repeat("00", 32)
		refused(t, alice.Update(ctx, q), "planHash is immutable")
		q = got.DeepCopy()
		q.Spec.Approved, q.Spec.ApprovedBy = false, ""
		refused(t, alice.Update(ctx, q), "an approval can be neither withdrawn nor changed")
		refused(t, approve(t, mallory, &got, "mallory"), "an approval can be neither withdrawn nor changed")
	})

	t.Run("approving a finished plan is refused", func(t *testing.T) {
		for _, phase := range []infrav1.PlanPhase{infrav1.PlanApplied, infrav1.PlanSuperseded, infrav1.PlanFailed} {
			p := mustCreate(t, "terminal-"+strings.ToLower(string(phase)), infrav1.PlanPending)
			if err := setPhase(t, mgrC, p, phase); err != nil {
				t.Fatalf("the manager moves the phase to %s: %v", phase, err)
			}
			refused(t, approve(t, alice, p, "alice"), "the plan is "+string(phase)+" (label captf.io/plan-phase), so it can no longer be approved")
		}
	})

	t.Run("only the manager moves the phase label", func(t *testing.T) {
		p := mustCreate(t, "phase", infrav1.PlanPending)
		refused(t, setPhase(t, mallory, p, infrav1.PlanApproved), "metadata.labels[captf.io/plan-phase]: Forbidden: only the manager may change the phase label")
		q := p.DeepCopy()
		delete(q.Labels, infrav1.LabelPlanPhase)
		refused(t, alice.Patch(ctx, q, client.MergeFrom(p)), "only the manager may remove the phase label")
		// Other metadata stays writable, for example for a dashboard.
		q = p.DeepCopy()
		q.Labels["team"] = "network"
		if err := alice.Patch(ctx, q, client.MergeFrom(p)); err != nil {
			t.Errorf("alice adds a label of her own: %v", err)
		}
		if err := setPhase(t, mgrC, q, infrav1.PlanSuperseded); err != nil {
			t.Errorf("the manager moves the phase: %v", err)
		}
	})

	t.Run("create: a pre-approved plan must name its creator", func(t *testing.T) {
		_, err := create(t, mallory, "preapproved-other", infrav1.PlanPending, "alice")
		refused(t, err, `spec.approvedBy: Invalid value: "alice": must be your own username "mallory"`)
		if _, err := create(t, mallory, "preapproved-self", infrav1.PlanApproved, "mallory"); err != nil {
			t.Errorf("mallory creates a plan she approves herself: %v", err)
		}
		_, err = create(t, mallory, "approved-label-unapproved", infrav1.PlanApproved, "")
		refused(t, err, "a plan that is not approved cannot be created in phase Approved")
	})

	t.Run("create: a mover carries finished plans with their approver", func(t *testing.T) {
		for _, phase := range []infrav1.PlanPhase{infrav1.PlanApplied, infrav1.PlanSuperseded, infrav1.PlanFailed} {
			if _, err := create(t, mover, "moved-"+strings.ToLower(string(phase)), phase, "alice"); err != nil {
				t.Errorf("the mover creates a %s plan approved by alice: %v", phase, err)
			}
		}
		_, err := create(t, mover, "moved-approved", infrav1.PlanApproved, "alice")
		refused(t, err, `must be your own username "capi-mover"`)
		if _, err := create(t, mover, "moved-pending", infrav1.PlanPending, ""); err != nil {
			t.Errorf("the mover creates a pending plan: %v", err)
		}
	})

	t.Run("the webhook unreachable refuses every write", func(t *testing.T) {
		stop()
		_, err := create(t, mgrC, "while-down", infrav1.PlanPending, "")
		if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
			t.Errorf("create with the webhook down: err = %v, want a refusal by the failure policy", err)
		}
		var status apierrors.APIStatus
		if !errors.As(err, &status) {
			t.Errorf("err = %T, want an API status", err)
		}
	})
}
