// Package webhook runs the manager binary with --enable-webhooks against a
// real API server, as config/default runs it, and shows that the API
// server calls its TerraformPlan webhook: the binary's flags, the webhook
// server and the generated webhook configuration fit together.
package webhook

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/managertest"
	"github.com/captf/captf/internal/testenv"
)

const manager = "system:serviceaccount:captf-system:captf-manager"

func TestManagerServesWebhook(t *testing.T) {
	env := testenv.StartWithWebhooks(t, "../..")
	ctx := context.Background()
	bin := managertest.Build(t, "../..")

	// Without the manager's identity the webhook does not start.
	out, err := exec.Command(bin, "--runner-image=example.test/runner:dev", "--enable-webhooks").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--manager-username is required with --enable-webhooks") {
		t.Errorf("--enable-webhooks without --manager-username: err = %v\n%s", err, out)
	}

	managertest.Start(t, bin, env.Kubeconfig(t), "--runner-image=example.test/runner:dev", "--metrics-bind-address=0",
		"--enable-webhooks", "--manager-username="+manager,
		fmt.Sprintf("--webhook-port=%d", env.Webhook.LocalServingPort),
		"--webhook-cert-dir="+env.Webhook.LocalServingCertDir)
	// Start waited for /readyz, which includes the webhook server's
	// started check.

	for _, o := range []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "plans"}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{infrav1.GroupVersion.Group}, Resources: []string{"terraformplans"},
			Verbs: []string{"create", "get", "patch"},
		}}},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "plans"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "plans"},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "plan-users"}},
		},
	} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	p := &infrav1.TerraformPlan{
		ObjectMeta: metav1.ObjectMeta{Name: "demo-1", Namespace: "default", Labels: map[string]string{
			infrav1.LabelPlanPhase: string(infrav1.PlanPending),
		}},
		Spec: infrav1.TerraformPlanSpec{
			TargetRef:  infrav1.PlanTargetReference{Kind: "TerraformCluster", Name: "demo"},
			PlanHash:   "p2:" + strings.Repeat("ab", 32),
			InputsHash: "h2:" + strings.Repeat("cd", 32),
			Reason:     infrav1.ReasonManual,
			Summary:    infrav1.PlanSummary{Update: 1},
		},
	}
	if err := env.ClientAs(t, manager, "plan-users").Create(ctx, p); err != nil {
		t.Fatalf("the manager's identity creates a plan: %v", err)
	}
	approve := func(as, name string) error {
		return env.ClientAs(t, as, "plan-users").Patch(ctx, p.DeepCopy(),
			client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"approved":true,"approvedBy":"`+name+`"}}`)))
	}
	err = approve("mallory", "alice")
	if err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `must be your own username "mallory"`) {
		t.Errorf("mallory approves as alice: err = %v, want the webhook's refusal", err)
	}
	if err := approve("alice", "alice"); err != nil {
		t.Errorf("alice approves as alice: %v", err)
	}

	// The templates' webhook: a template's spec cannot change.
	mt := &infrav1.TerraformMachineTemplate{ObjectMeta: metav1.ObjectMeta{Name: "workers-1", Namespace: "default"},
		Spec: infrav1.TerraformMachineTemplateSpec{Template: infrav1.TerraformMachineTemplateResource{
			Spec: infrav1.TerraformMachineSpec{RunnerSpec: infrav1.RunnerSpec{Image: "registry.example.com/m:1"}}}}}
	if err := env.Client.Create(ctx, mt); err != nil {
		t.Fatal(err)
	}
	err = env.Client.Patch(ctx, mt.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"template":{"spec":{"image":"registry.example.com/m:2"}}}}`)))
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec cannot change") {
		t.Errorf("a change of a TerraformMachineTemplate's spec: err = %v, want the webhook's refusal", err)
	}
}
