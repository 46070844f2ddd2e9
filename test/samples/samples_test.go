// Package samples applies the example RBAC and the tiered-approval
// ValidatingAdmissionPolicy of config/samples to a real API server, with the
// TerraformPlan webhook served by the test, and shows for each tier and
// role a request that is allowed and one that is refused.
package samples

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/testenv"
	"github.com/captf/captf/internal/webhook/terraformplan"
)

const (
	manager   = "system:serviceaccount:captf-system:captf-manager"
	pipeline  = "system:serviceaccount:ci:deployer"
	tierGroup = "captf:destructive-approvers"
	denial    = "only a member of captf:destructive-approvers may approve it"
)

func plan(name string, replace, del int32) *infrav1.TerraformPlan {
	return &infrav1.TerraformPlan{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{
			infrav1.LabelPlanPhase: string(infrav1.PlanPending),
		}},
		Spec: infrav1.TerraformPlanSpec{
			TargetRef:  infrav1.PlanTargetReference{Kind: "TerraformCluster", Name: "demo"},
			PlanHash:   "p2:" + strings.Repeat("ab", 32),
			InputsHash: "h2:" + strings.Repeat("cd", 32),
			Reason:     infrav1.ReasonManual,
			Summary:    infrav1.PlanSummary{Create: 1, Replace: replace, Delete: del},
		},
	}
}

func approve(c client.Client, p *infrav1.TerraformPlan, user string, opts ...client.PatchOption) error {
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"approved":true,"approvedBy":"`+user+`"}}`))
	return c.Patch(context.Background(), p.DeepCopy(), patch, opts...)
}

func TestSamples(t *testing.T) {
	env := testenv.StartWithWebhooks(t, "../..")
	env.ServeWebhooks(t, (&terraformplan.Validator{ManagerUsername: manager}).SetupWithManager)
	env.CreateFromFile(t, "../../config/samples/terraformplan-rbac.yaml")
	env.CreateFromFile(t, "../../config/samples/terraformplan-tiered-approval.yaml")
	ctx := context.Background()

	mgr := env.ClientAs(t, manager, "system:masters")
	alice := env.ClientAs(t, "alice", "platform-approvers")
	dana := env.ClientAs(t, "dana", "platform-approvers", tierGroup)
	ci := env.ClientAs(t, pipeline)
	mover := env.ClientAs(t, "capi-mover")
	nobody := env.ClientAs(t, "eve")

	for _, p := range []*infrav1.TerraformPlan{
		plan("probe", 1, 0),
		plan("ci-update", 0, 0), plan("ci-replace", 1, 0), plan("ci-delete", 0, 2),
		plan("alice-update", 0, 0), plan("alice-delete", 0, 1), plan("dana-delete", 0, 1),
	} {
		if err := mgr.Create(ctx, p); err != nil {
			t.Fatalf("the manager creates %s: %v", p.Name, err)
		}
	}

	// The API server loads a new policy asynchronously: wait until it
	// refuses a dry-run approval of a destructive plan.
	probe := plan("probe", 1, 0)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		err := approve(alice, probe, "alice", client.DryRunAll)
		if err != nil && strings.Contains(err.Error(), denial) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the policy never refused: last answer %v", err)
		}
	}

	refusedByPolicy := func(t *testing.T, err error) {
		t.Helper()
		if err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), denial) {
			t.Errorf("err = %v, want 403 Forbidden by the tiered-approval policy", err)
		}
	}
	forbiddenByRBAC := func(t *testing.T, err error) {
		t.Helper()
		if err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "cannot") {
			t.Errorf("err = %v, want 403 Forbidden by RBAC", err)
		}
	}

	t.Run("pipeline tier: approves a plan that deletes and replaces nothing", func(t *testing.T) {
		if err := approve(ci, plan("ci-update", 0, 0), pipeline); err != nil {
			t.Errorf("the pipeline approves a non-destructive plan: %v", err)
		}
		refusedByPolicy(t, approve(ci, plan("ci-replace", 1, 0), pipeline))
		refusedByPolicy(t, approve(ci, plan("ci-delete", 0, 2), pipeline))
	})

	t.Run("people tier: a destructive plan needs captf:destructive-approvers", func(t *testing.T) {
		if err := approve(alice, plan("alice-update", 0, 0), "alice"); err != nil {
			t.Errorf("alice approves a non-destructive plan: %v", err)
		}
		refusedByPolicy(t, approve(alice, plan("alice-delete", 0, 1), "alice"))
		if err := approve(dana, plan("dana-delete", 0, 1), "dana"); err != nil {
			t.Errorf("dana (captf:destructive-approvers) approves a destructive plan: %v", err)
		}
		var got infrav1.TerraformPlan
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "dana-delete"}, &got); err != nil {
			t.Fatal(err)
		}
		if got.Spec.ApprovedBy != "dana" {
			t.Errorf("approvedBy = %q, want dana", got.Spec.ApprovedBy)
		}
	})

	t.Run("approver role: plans only, and no create", func(t *testing.T) {
		var list infrav1.TerraformPlanList
		if err := alice.List(ctx, &list, client.InNamespace("default")); err != nil || len(list.Items) == 0 {
			t.Errorf("alice lists plans: %d, %v", len(list.Items), err)
		}
		forbiddenByRBAC(t, alice.Get(ctx, client.ObjectKey{Namespace: "default", Name: "demo"}, &infrav1.TerraformCluster{}))
		forbiddenByRBAC(t, alice.Create(ctx, plan("alice-own", 0, 0)))
		forbiddenByRBAC(t, alice.List(ctx, &list, client.InNamespace("kube-system")))
		forbiddenByRBAC(t, nobody.List(ctx, &list, client.InNamespace("default")))
	})

	t.Run("mover role: creates plans, which the webhook still checks", func(t *testing.T) {
		moved := plan("moved-applied", 0, 1)
		moved.Labels[infrav1.LabelPlanPhase] = string(infrav1.PlanApplied)
		moved.Spec.Approved, moved.Spec.ApprovedBy = true, "dana"
		if err := mover.Create(ctx, moved); err != nil {
			t.Errorf("the mover carries an applied plan: %v", err)
		}
		forged := plan("moved-pending", 0, 0)
		forged.Spec.Approved, forged.Spec.ApprovedBy = true, "dana"
		err := mover.Create(ctx, forged)
		if err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `must be your own username "capi-mover"`) {
			t.Errorf("the mover creates a live plan approved by dana: err = %v, want the webhook's refusal", err)
		}
	})
}

// TestClusterSamples: the TerraformCluster, TerraformClusterIdentity and
// Cluster samples are accepted by the real API server's schema (Cluster
// API's for the Cluster), with the defaults the docs name. The ClusterClass
// sample is test/clusterapi's.
func TestClusterSamples(t *testing.T) {
	env := testenv.StartWithClusterAPI(t, "../..")
	env.CreateFromFile(t, "../../config/samples/terraformclusteridentity.yaml")
	env.CreateFromFile(t, "../../config/samples/terraformcluster.yaml")
	env.CreateFromFile(t, "../../config/samples/cluster.yaml")
	var tc infrav1.TerraformCluster
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "demo"}, &tc); err != nil {
		t.Fatal(err)
	}
	if tc.Spec.IdentityRef == nil || tc.Spec.IdentityRef.Kind != infrav1.IdentityKindTerraformClusterIdentity ||
		tc.Spec.Jobs.ActiveDeadlineSeconds == nil || *tc.Spec.Jobs.ActiveDeadlineSeconds != 3600 || tc.Spec.DeletionPolicy != infrav1.DeletionDestroy ||
		tc.Spec.Drift.IntervalSeconds == nil || *tc.Spec.Drift.IntervalSeconds != 3600 || tc.Spec.Drift.Action != infrav1.DriftActionRemediate || tc.Spec.AllowDestructivePlans {
		t.Errorf("the sample read back: %+v", tc.Spec)
	}
	var id infrav1.TerraformClusterIdentity
	if err := env.Client.Get(context.Background(), client.ObjectKey{Name: "platform-aws"}, &id); err != nil || id.Spec.AllowedNamespaces == nil {
		t.Errorf("the identity sample: %+v, %v", id.Spec, err)
	}
}
