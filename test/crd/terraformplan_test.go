package crd

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/google/go-cmp/cmp"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/testenv"
)

func plan(name string, mutate func(*infrav1.TerraformPlan)) *infrav1.TerraformPlan {
	p := &infrav1.TerraformPlan{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: infrav1.TerraformPlanSpec{
			TargetRef:  infrav1.PlanTargetReference{Kind: "TerraformCluster", Name: "demo"},
			PlanHash:   "p2:" + strings.Repeat("9c", 32),
			InputsHash: "h2:" + strings.Repeat("51", 32),
			Reason:     infrav1.ReasonDestructive,
			Summary: infrav1.PlanSummary{Create: 1, Update: 2, Replace: 1, Resources: []string{
				"aws_instance.control_plane (replace)", "aws_lb.api (update)",
				"aws_route53_record.api (update)", "aws_security_group_rule.api (create)",
			}},
		},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

// wantInvalid fails unless err is a 422 Invalid whose message names want.
func wantInvalid(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil || !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want 422 Invalid naming %q", err, want)
	}
}

// TestTerraformPlanCEL proves the schema and the CEL rules of spec 002 on
// a real API server with no webhook registered: they hold even when the
// webhook is down.
func TestTerraformPlanCEL(t *testing.T) {
	env := testenv.Start(t, "../..")
	ctx := context.Background()

	t.Run("create", func(t *testing.T) {
		if err := env.Client.Create(ctx, plan("valid", nil)); err != nil {
			t.Fatalf("a valid plan: %v", err)
		}
		refused := []struct {
			name   string
			mutate func(*infrav1.TerraformPlan)
			want   string
		}{
			{"approved-without-approvedby", func(p *infrav1.TerraformPlan) { p.Spec.Approved = true }, "approvedBy is required exactly when approved is true"},
			{"approvedby-without-approved", func(p *infrav1.TerraformPlan) { p.Spec.ApprovedBy = "alice" }, "approvedBy is required exactly when approved is true"},
			{"bad-plan-hash", func(p *infrav1.TerraformPlan) { p.Spec.PlanHash = "p1:abc" }, "spec.planHash"},
			{"bad-inputs-hash", func(p *infrav1.TerraformPlan) { p.Spec.InputsHash = "" }, "spec.inputsHash"},
			{"bad-reason", func(p *infrav1.TerraformPlan) { p.Spec.Reason = "Because" }, "spec.reason: Unsupported value"},
			{"bad-target-kind", func(p *infrav1.TerraformPlan) { p.Spec.TargetRef.Kind = "Secret" }, "spec.targetRef.kind: Unsupported value"},
			{"no-target-name", func(p *infrav1.TerraformPlan) { p.Spec.TargetRef.Name = "" }, "spec.targetRef.name"},
			{"negative-count", func(p *infrav1.TerraformPlan) { p.Spec.Summary.Delete = -1 }, "spec.summary.delete"},
			{"too-many-resources", func(p *infrav1.TerraformPlan) {
				p.Spec.Summary.Resources = nil
				for i := range 51 {
					p.Spec.Summary.Resources = append(p.Spec.Summary.Resources, fmt.Sprintf("terraform_data.x[%d] (create)", i))
				}
			}, "spec.summary.resources: Too many"},
		}
		for _, r := range refused {
			t.Run(r.name, func(t *testing.T) {
				wantInvalid(t, env.Client.Create(ctx, plan(r.name, r.mutate)), r.want)
			})
		}
	})

	t.Run("required-and-min-properties", func(t *testing.T) {
		for _, tc := range []struct {
			name   string
			remove []string
			want   string
		}{
			{"no-summary", []string{"spec", "summary"}, "spec.summary: Required value"},
			{"no-plan-hash", []string{"spec", "planHash"}, "spec.planHash: Required value"},
			{"no-reason", []string{"spec", "reason"}, "spec.reason: Required value"},
			{"no-target", []string{"spec", "targetRef"}, "spec.targetRef: Required value"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				u := toUnstructured(t, env, plan(tc.name, nil))
				unstructured.RemoveNestedField(u.Object, tc.remove...)
				wantInvalid(t, env.Client.Create(ctx, u), tc.want)
			})
		}
		t.Run("empty-summary", func(t *testing.T) {
			u := toUnstructured(t, env, plan("empty-summary", nil))
			if err := unstructured.SetNestedMap(u.Object, map[string]any{}, "spec", "summary"); err != nil {
				t.Fatal(err)
			}
			wantInvalid(t, env.Client.Create(ctx, u), "spec.summary: Invalid value: 0: spec.summary in body should have at least 1 properties")
		})
	})

	t.Run("update", func(t *testing.T) {
		immutable := []struct {
			name   string
			mutate func(*infrav1.TerraformPlan)
			want   string
		}{
			{"plan-hash", func(p *infrav1.TerraformPlan) { p.Spec.PlanHash = "p2:" + strings.Repeat("0f", 32) }, "planHash is immutable"},
			{"inputs-hash", func(p *infrav1.TerraformPlan) { p.Spec.InputsHash = "h2:" + strings.Repeat("0f", 32) }, "inputsHash is immutable"},
			{"reason", func(p *infrav1.TerraformPlan) { p.Spec.Reason = infrav1.ReasonManual }, "reason is immutable"},
			{"summary-count", func(p *infrav1.TerraformPlan) { p.Spec.Summary.Delete = 3 }, "summary is immutable"},
			{"summary-resources", func(p *infrav1.TerraformPlan) { p.Spec.Summary.Resources = p.Spec.Summary.Resources[1:] }, "summary is immutable"},
			{"target", func(p *infrav1.TerraformPlan) { p.Spec.TargetRef.Name = "other" }, "targetRef is immutable"},
		}
		for _, r := range immutable {
			t.Run(r.name, func(t *testing.T) {
				p := plan("immutable-"+r.name, nil)
				if err := env.Client.Create(ctx, p); err != nil {
					t.Fatal(err)
				}
				r.mutate(p)
				wantInvalid(t, env.Client.Update(ctx, p), r.want)
			})
		}
	})

	t.Run("approval", func(t *testing.T) {
		p := plan("approval", nil)
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		approved := p.DeepCopy()
		approved.Spec.Approved, approved.Spec.ApprovedBy = true, "alice"
		if err := env.Client.Update(ctx, approved); err != nil {
			t.Fatalf("approve: %v", err)
		}
		for _, tc := range []struct {
			name   string
			mutate func(*infrav1.TerraformPlan)
			want   string
		}{
			{"withdraw", func(p *infrav1.TerraformPlan) { p.Spec.Approved, p.Spec.ApprovedBy = false, "" }, "an approval can be neither withdrawn nor changed"},
			{"withdraw-keep-name", func(p *infrav1.TerraformPlan) { p.Spec.Approved = false }, "approvedBy is required exactly when approved is true"},
			{"change-approver", func(p *infrav1.TerraformPlan) { p.Spec.ApprovedBy = "mallory" }, "an approval can be neither withdrawn nor changed"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				q := approved.DeepCopy()
				tc.mutate(q)
				wantInvalid(t, env.Client.Update(ctx, q), tc.want)
			})
		}
		var got infrav1.TerraformPlan
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), &got); err != nil {
			t.Fatal(err)
		}
		if !got.Spec.Approved || got.Spec.ApprovedBy != "alice" {
			t.Errorf("stored approval = %v by %q, want true by alice", got.Spec.Approved, got.Spec.ApprovedBy)
		}
	})

	t.Run("status", func(t *testing.T) {
		p := plan("status", nil)
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		p.Status = infrav1.TerraformPlanStatus{Phase: infrav1.PlanPending, ObservedGeneration: 1}
		if err := env.Client.Status().Update(ctx, p); err != nil {
			t.Fatalf("status: %v", err)
		}
		bad := p.DeepCopy()
		bad.Status.Phase = "Waiting"
		wantInvalid(t, env.Client.Status().Update(ctx, bad), "status.phase: Unsupported value")

		bad = p.DeepCopy()
		for i := range 33 {
			bad.Status.Conditions = append(bad.Status.Conditions, metav1.Condition{
				Type: fmt.Sprintf("C%d", i), Status: metav1.ConditionTrue, Reason: "R", LastTransitionTime: metav1.Now(),
			})
		}
		wantInvalid(t, env.Client.Status().Update(ctx, bad), "status.conditions: Too many")

		u := toUnstructured(t, env, p)
		if err := unstructured.SetNestedMap(u.Object, map[string]any{}, "status"); err != nil {
			t.Fatal(err)
		}
		wantInvalid(t, env.Client.Status().Update(ctx, u), "status: Invalid value: 0:  in body should have at least 1 properties")
	})
}

func toUnstructured(t *testing.T, env *testenv.Env, p *infrav1.TerraformPlan) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := env.Client.Scheme().Convert(p, u, nil); err != nil {
		t.Fatal(err)
	}
	u.SetGroupVersionKind(infrav1.GroupVersion.WithKind("TerraformPlan"))
	return u
}

var update = flag.Bool("update", false, "rewrite the golden files")

// TestTerraformPlanPrinterColumns asks the real API server for the table
// kubectl get terraformplans prints (every column, -o wide included) and
// compares it with a golden file; Age is left out, since it moves.
func TestTerraformPlanPrinterColumns(t *testing.T) {
	env := testenv.Start(t, "../..")
	ctx := context.Background()
	pending := plan("demo-3f9a1c07be", nil)
	approved := plan("demo-77d0e1f2aa", func(p *infrav1.TerraformPlan) {
		p.Spec.Reason = infrav1.ReasonManual
		p.Spec.Summary = infrav1.PlanSummary{Update: 1, OutputChanges: 1}
		p.Spec.Approved, p.Spec.ApprovedBy = true, "alice"
	})
	for _, p := range []*infrav1.TerraformPlan{pending, approved} {
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	pending.Status.Phase = infrav1.PlanPending
	approved.Status.Phase = infrav1.PlanApproved
	for _, p := range []*infrav1.TerraformPlan{pending, approved} {
		if err := env.Client.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
	}

	cfg := rest.CopyConfig(env.Config)
	cfg.GroupVersion = &infrav1.GroupVersion
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := rc.Get().Namespace("default").Resource("terraformplans").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").Do(ctx).Raw()
	if err != nil {
		t.Fatalf("get the table: %v", err)
	}
	var table metav1.Table
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	var keep []int
	for i, c := range table.ColumnDefinitions {
		if c.Name == "Age" {
			fmt.Fprintf(&b, "# Age: %s, priority %d (not compared below)\n", c.Type, c.Priority)
			continue
		}
		keep = append(keep, i)
		fmt.Fprintf(tw, "%s(%s,%d)\t", c.Name, c.Type, c.Priority)
	}
	fmt.Fprintln(tw)
	for _, row := range table.Rows {
		for _, i := range keep {
			fmt.Fprintf(tw, "%v\t", row.Cells[i])
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	path := filepath.Join("testdata", "terraformplan-columns.golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("printer columns (-want +got):\n%s", diff)
	}
}

// TestTerraformPlanHoldsNoValue sends a plan with values where the schema
// has no field for them: the API server prunes them, so a TerraformPlan
// cannot carry a value even when its writer tries.
func TestTerraformPlanHoldsNoValue(t *testing.T) {
	env := testenv.Start(t, "../..")
	ctx := context.Background()
	const canary = "CANARY-PLAN-VALUE-7e21"
	u := toUnstructured(t, env, plan("canary", nil))
	for _, path := range [][]string{
		{"spec", "values"},
		{"spec", "summary", "before"},
		{"spec", "targetRef", "password"},
		{"status", "plan"},
	} {
		if err := unstructured.SetNestedField(u.Object, canary, path...); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Client.Create(ctx, u); err != nil {
		t.Fatalf("create: %v", err)
	}
	var stored unstructured.Unstructured
	stored.SetGroupVersionKind(u.GroupVersionKind())
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "canary"}, &stored); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(stored.Object)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), canary) {
		t.Errorf("the stored plan holds the canary: %s", raw)
	}
	if !strings.Contains(string(raw), `"planHash":"p2:`) {
		t.Errorf("the stored plan lacks its hash: %s", raw)
	}
}
