package kubectlcaptf

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/testenv"
	"github.com/captf/captf/internal/webhook/providerid"
	"github.com/captf/captf/internal/webhook/terraformplan"
)

const manager = "system:serviceaccount:captf-system:captf-manager"

// run runs kubectl captf in this process with args and returns what it
// printed on stdout and its error.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String() + errOut.String(), err
}

// TestPlugin runs plans, show and approve against a real API server, with
// the TerraformPlan webhook served by the test, as alice: a user with a
// client certificate of her own and only the sample approver role.
func TestPlugin(t *testing.T) {
	env := testenv.StartWithWebhooks(t, "../..")
	env.ServeWebhooks(t, func(mgr ctrl.Manager) error {
		return errors.Join((&terraformplan.Validator{ManagerUsername: manager}).SetupWithManager(mgr), providerid.SetupWithManager(mgr, manager))
	})
	env.CreateFromFile(t, "../../config/samples/terraformplan-rbac.yaml")
	ctx := context.Background()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "infra"}}); err != nil {
		t.Fatal(err)
	}
	mgr := env.ClientAs(t, manager, "system:masters")
	// Oldest first as the listing sorts them: creation times have a
	// resolution of one second, and within one second names decide, so the
	// superseded demo-0a0b0c0d0e is created before demo-3f9a1c07be.
	plans := examplePlans()
	slices.Reverse(plans)
	for _, p := range plans {
		p.CreationTimestamp = metav1.Time{}
		p.Status = infrav1.TerraformPlanStatus{}
		if p.Spec.Approved {
			// Created pending; approved below as its approver would.
			p.Spec.Approved, p.Spec.ApprovedBy = false, ""
		}
		if err := mgr.Create(ctx, p); err != nil {
			t.Fatalf("the manager creates %s: %v", p.Name, err)
		}
	}
	alice := env.UserKubeconfig(t, "alice", "platform-approvers")
	admin := env.Kubeconfig(t)

	t.Run("plans", func(t *testing.T) {
		out, err := run(t, "plans", "--kubeconfig", alice)
		if err != nil {
			t.Fatalf("plans: %v\n%s", err, out)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME ") {
			t.Fatalf("plans printed %d lines, want a header and the 2 plans of default:\n%s", len(lines), out)
		}
		for _, want := range []string{"demo-3f9a1c07be", "Pending", "TerraformCluster/demo", "Destructive", "+1 ~2 -/+1 -0"} {
			if !strings.Contains(lines[2], want) {
				t.Errorf("the row of demo-3f9a1c07be lacks %q: %s", want, lines[2])
			}
		}

		out, err = run(t, "plans", "--kubeconfig", alice, "--pending", "--json")
		if err != nil {
			t.Fatalf("plans --pending --json: %v\n%s", err, out)
		}
		var plans []Plan
		if err := json.Unmarshal([]byte(out), &plans); err != nil {
			t.Fatalf("plans --json is not JSON: %v\n%s", err, out)
		}
		if len(plans) != 1 || plans[0].Name != "demo-3f9a1c07be" || !plans[0].Destructive || plans[0].Summary.Replace != 1 {
			t.Errorf("plans --pending --json = %+v, want only demo-3f9a1c07be", plans)
		}

		out, err = run(t, "plans", "--kubeconfig", alice, "--pending", "-o", "yaml")
		if err != nil {
			t.Fatalf("plans --pending -o yaml: %v\n%s", err, out)
		}
		plans = nil
		if err := yaml.UnmarshalStrict([]byte(out), &plans); err != nil {
			t.Fatalf("plans -o yaml is not YAML of plans: %v\n%s", err, out)
		}
		if len(plans) != 1 || plans[0].Name != "demo-3f9a1c07be" || plans[0].PlanHash != examplePlans()[0].Spec.PlanHash || plans[0].Summary.Replace != 1 {
			t.Errorf("plans --pending -o yaml = %+v, want only demo-3f9a1c07be", plans)
		}

		out, err = run(t, "plans", "--kubeconfig", admin, "-n", "kube-system")
		if err != nil || out != "No TerraformPlans found in namespace kube-system.\n" {
			t.Errorf("plans of an empty namespace: %v, %q", err, out)
		}

		// alice may read plans of default only.
		if out, err := run(t, "plans", "--kubeconfig", alice, "-A"); err == nil || !strings.Contains(err.Error(), "forbidden") {
			t.Errorf("plans -A as alice: err = %v, want forbidden\n%s", err, out)
		}
		out, err = run(t, "plans", "--kubeconfig", admin, "-A", "--json")
		if err != nil {
			t.Fatalf("plans -A: %v\n%s", err, out)
		}
		plans = nil
		if err := json.Unmarshal([]byte(out), &plans); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range plans {
			names = append(names, p.Namespace+"/"+p.Name)
		}
		if want := "default/demo-0a0b0c0d0e default/demo-3f9a1c07be infra/pool-a-77d0e1f2aa"; strings.Join(names, " ") != want {
			t.Errorf("plans -A = %v, want %s", names, want)
		}
	})

	t.Run("show", func(t *testing.T) {
		out, err := run(t, "show", "demo-3f9a1c07be", "--kubeconfig", alice)
		if err != nil {
			t.Fatalf("show: %v\n%s", err, out)
		}
		for _, want := range []string{
			"Target:    TerraformCluster/demo\n", "Phase:     Pending\n", "Reason:    Destructive\n",
			"Changes:   1 to create, 2 to update, 1 to replace, 0 to delete (destructive)\n",
			"  aws_instance.control_plane (replace)\n",
			"Approved:  no; to approve: kubectl captf approve demo-3f9a1c07be -n default\n",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("show lacks %q:\n%s", want, out)
			}
		}
		out, err = run(t, "show", "demo-3f9a1c07be", "--kubeconfig", alice, "--json")
		if err != nil {
			t.Fatal(err)
		}
		var p Plan
		if err := json.Unmarshal([]byte(out), &p); err != nil {
			t.Fatalf("show --json: %v\n%s", err, out)
		}
		if p.PlanHash != examplePlans()[0].Spec.PlanHash || len(p.Summary.Resources) != 4 {
			t.Errorf("show --json = %+v", p)
		}
		out, err = run(t, "show", "demo-3f9a1c07be", "--kubeconfig", alice, "-o", "yaml")
		if err != nil {
			t.Fatal(err)
		}
		var fromYAML Plan
		if err := yaml.UnmarshalStrict([]byte(out), &fromYAML); err != nil {
			t.Fatalf("show -o yaml: %v\n%s", err, out)
		}
		if diff := cmp.Diff(p, fromYAML); diff != "" {
			t.Errorf("show -o yaml differs from show --json (-json +yaml):\n%s", diff)
		}
		if _, err := run(t, "show", "missing", "--kubeconfig", alice); err == nil || !strings.Contains(err.Error(), "TerraformPlan default/missing") {
			t.Errorf("show of a missing plan: err = %v", err)
		}
	})

	t.Run("completion of a plan's name", func(t *testing.T) {
		out, err := run(t, "__complete", "show", "--kubeconfig", alice, "demo-")
		if err != nil || !strings.HasPrefix(out, "demo-0a0b0c0d0e\ndemo-3f9a1c07be\n:4\n") {
			t.Errorf("completing show demo-: %v\n%s", err, out)
		}
		out, err = run(t, "__complete", "approve", "--kubeconfig", admin, "-n", "infra", "")
		if err != nil || !strings.HasPrefix(out, "pool-a-77d0e1f2aa\n:4\n") {
			t.Errorf("completing approve in infra: %v\n%s", err, out)
		}
	})

	t.Run("logs", func(t *testing.T) {
		// The happy path, through a node's log endpoint, is test/quickstart.
		if _, err := run(t, "logs", "demo-3f9a1c07be", "--kubeconfig", admin); err == nil || !strings.Contains(err.Error(), "names no plan Job (annotation captf.io/plan-job)") {
			t.Errorf("logs of a plan without a plan Job: err = %v", err)
		}
		p := &infrav1.TerraformPlan{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "demo-3f9a1c07be"}, p); err != nil {
			t.Fatal(err)
		}
		before := p.DeepCopy()
		p.Annotations = map[string]string{infrav1.AnnotationPlanJob: "demo-plan-gone"}
		if err := env.Client.Patch(ctx, p, client.MergeFrom(before)); err != nil {
			t.Fatal(err)
		}
		// alice, with only the approver role, may look for the Job.
		if _, err := run(t, "logs", "demo-3f9a1c07be", "--kubeconfig", alice); err == nil || !strings.Contains(err.Error(), "the plan Job demo-plan-gone of TerraformPlan default/demo-3f9a1c07be is gone") {
			t.Errorf("logs of a plan whose Job is gone: err = %v", err)
		}
		if _, err := run(t, "logs", "demo-3f9a1c07be", "--kubeconfig", admin, "--json"); err == nil || !strings.Contains(err.Error(), "--json does not apply") {
			t.Errorf("logs --json: err = %v", err)
		}
		if _, err := run(t, "logs", "demo-3f9a1c07be", "--kubeconfig", admin, "-o", "yaml"); err == nil || !strings.Contains(err.Error(), "-o yaml does not apply") {
			t.Errorf("logs -o yaml: err = %v", err)
		}
	})

	t.Run("approve a machine's plan", func(t *testing.T) {
		m := &infrav1.TerraformMachine{ObjectMeta: metav1.ObjectMeta{Name: "node-0", Namespace: "default"},
			Spec: infrav1.TerraformMachineSpec{RunnerSpec: infrav1.RunnerSpec{Image: "registry.example.com/m:1"}}}
		if err := env.Client.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		if err := approveMachine(ctx, env.Client, "default", "node-0", "p2:"+strings.Repeat("ab", 32)); err == nil ||
			!strings.Contains(err.Error(), "has no plan waiting for an approval: nothing approved") {
			t.Errorf("approving a machine with no plan: %v", err)
		}
		hash := "p2:" + strings.Repeat("cd", 32)
		m.Status.Plan = &infrav1.PlanStatus{InputsHash: "sha256:" + strings.Repeat("0", 64), Job: "node-0-plan-1", PlanHash: hash,
			Add: 1, Destroy: 1, CreatedAt: metav1.Now(), Reason: infrav1.ReasonDestructive}
		if err := env.Client.Status().Update(ctx, m); err != nil {
			t.Fatal(err)
		}
		if err := approveMachine(ctx, env.Client, "default", "node-0", "p2:"+strings.Repeat("ab", 32)); err == nil ||
			!strings.Contains(err.Error(), "waits with plan hash "+hash+", not p2:abab") {
			t.Errorf("approving a machine with another hash: %v", err)
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil || len(m.Annotations) != 0 {
			t.Fatalf("after the refusals the machine carries %v (%v)", m.Annotations, err)
		}
		// A plan the destructive-plan guard stopped takes the guard's own
		// annotation, as the page's command says.
		if err := approveMachine(ctx, env.Client, "default", "node-0", hash); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil ||
			m.Annotations[infrav1.AnnotationApproveDestructivePlan] != hash || len(m.Annotations) != 1 {
			t.Errorf("after the approval the machine carries %v (%v), want %s=%s", m.Annotations, err, infrav1.AnnotationApproveDestructivePlan, hash)
		}
		if pg := newMachinePage(m, time.Now()); pg.Approvable || !strings.HasPrefix(pg.Status, "Approved: ") {
			t.Errorf("the page of the approved machine: approvable %v, status %q", pg.Approvable, pg.Status)
		}
	})

	t.Run("approve", func(t *testing.T) {
		if out, err := run(t, "approve", "demo-3f9a1c07be", "--kubeconfig", alice, "--plan-hash", "p2:"+strings.Repeat("00", 32)); err == nil ||
			!strings.Contains(err.Error(), "nothing approved") {
			t.Errorf("approve with another hash: err = %v\n%s", err, out)
		}
		out, err := run(t, "approve", "demo-3f9a1c07be", "--kubeconfig", alice, "--json",
			"--plan-hash", examplePlans()[0].Spec.PlanHash)
		if err != nil {
			t.Fatalf("approve: %v\n%s", err, out)
		}
		var p Plan
		if err := json.Unmarshal([]byte(out), &p); err != nil {
			t.Fatalf("approve --json: %v\n%s", err, out)
		}
		if !p.Approved || p.ApprovedBy != "alice" {
			t.Errorf("approve --json = approved %v by %q, want by alice", p.Approved, p.ApprovedBy)
		}
		var stored infrav1.TerraformPlan
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "demo-3f9a1c07be"}, &stored); err != nil {
			t.Fatal(err)
		}
		if !stored.Spec.Approved || stored.Spec.ApprovedBy != "alice" {
			t.Errorf("stored approval = %v by %q, want by alice", stored.Spec.Approved, stored.Spec.ApprovedBy)
		}

		out, err = run(t, "approve", "demo-3f9a1c07be", "--kubeconfig", alice)
		if err != nil || !strings.Contains(out, "approved by alice") {
			t.Errorf("approving again: %v\n%s", err, out)
		}
		out, err = run(t, "approve", "demo-3f9a1c07be", "--kubeconfig", admin)
		if err == nil || !strings.Contains(err.Error(), "already approved by alice") {
			t.Errorf("another user approving an approved plan: err = %v\n%s", err, out)
		}
		_, err = run(t, "approve", "demo-0a0b0c0d0e", "--kubeconfig", alice)
		if err == nil || !strings.Contains(err.Error(), "is Superseded and can no longer be approved") {
			t.Errorf("approving a superseded plan: err = %v", err)
		}
		// alice has no RoleBinding in infra.
		_, err = run(t, "approve", "pool-a-77d0e1f2aa", "-n", "infra", "--kubeconfig", alice)
		if err == nil || !strings.Contains(err.Error(), "forbidden") {
			t.Errorf("approving outside her namespace: err = %v", err)
		}
	})
}
