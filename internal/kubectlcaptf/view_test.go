package kubectlcaptf

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/captf/api/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite the golden files")

var now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func examplePlans() []*infrav1.TerraformPlan {
	pending := &infrav1.TerraformPlan{
		ObjectMeta: metav1.ObjectMeta{
			Name: "demo-3f9a1c07be", Namespace: "default",
			CreationTimestamp: metav1.NewTime(now.Add(-5 * time.Minute)),
			Labels:            map[string]string{infrav1.LabelPlanPhase: "Pending"},
		},
		Spec: infrav1.TerraformPlanSpec{
			TargetRef:  infrav1.PlanTargetReference{Kind: "TerraformCluster", Name: "demo"},
			PlanHash:   "p2:9c1e0d4a6b7f2e3d5a8c1b0f4e6d7a9c2b3e5f8a1d4c6b7e0f2a3d5c8b1e4f6a",
			InputsHash: "h2:51ab0c3d7e9f2a4b6c8d0e1f3a5b7c9d1e3f5a7b9c1d3e5f7a9b1c3d5e7f9a1b",
			Reason:     infrav1.ReasonDestructive,
			Summary: infrav1.PlanSummary{Create: 1, Update: 2, Replace: 1, Resources: []string{
				"aws_instance.control_plane (replace)", "aws_lb.api (update)",
				"aws_route53_record.api (update)", "aws_security_group_rule.api (create)",
			}},
		},
		Status: infrav1.TerraformPlanStatus{Phase: infrav1.PlanPending, ObservedGeneration: 1},
	}
	approved := &infrav1.TerraformPlan{
		ObjectMeta: metav1.ObjectMeta{
			Name: "pool-a-77d0e1f2aa", Namespace: "infra",
			CreationTimestamp: metav1.NewTime(now.Add(-3 * time.Hour)),
		},
		Spec: infrav1.TerraformPlanSpec{
			TargetRef:  infrav1.PlanTargetReference{Kind: "TerraformMachinePool", Name: "pool-a"},
			PlanHash:   "p2:" + strings.Repeat("1f", 32),
			InputsHash: "h2:" + strings.Repeat("2e", 32),
			Reason:     infrav1.ReasonManual,
			Summary:    infrav1.PlanSummary{Update: 1, OutputChanges: 2, Resources: []string{"terraform_data.pool (update)"}},
			Approved:   true, ApprovedBy: "alice@example.com",
		},
		Status: infrav1.TerraformPlanStatus{Phase: infrav1.PlanApproved},
	}
	moved := &infrav1.TerraformPlan{
		ObjectMeta: metav1.ObjectMeta{
			Name: "demo-0a0b0c0d0e", Namespace: "default",
			CreationTimestamp: metav1.NewTime(now.Add(-50 * time.Hour)),
			Labels:            map[string]string{infrav1.LabelPlanPhase: "Superseded"},
		},
		Spec: infrav1.TerraformPlanSpec{
			TargetRef:  infrav1.PlanTargetReference{Kind: "TerraformCluster", Name: "demo"},
			PlanHash:   "p2:" + strings.Repeat("3d", 32),
			InputsHash: "h2:" + strings.Repeat("4c", 32),
			Reason:     infrav1.ReasonManual,
			Summary:    infrav1.PlanSummary{Delete: 3},
		},
	}
	return []*infrav1.TerraformPlan{pending, approved, moved}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-want +got):\n%s", name, diff)
	}
}

func TestRender(t *testing.T) {
	var plans []Plan
	for _, p := range examplePlans() {
		plans = append(plans, newPlan(p))
	}
	sortPlans(plans)

	var table, tableA, detail, jsonOut bytes.Buffer
	if err := writeTable(&table, plans, false, now); err != nil {
		t.Fatal(err)
	}
	if err := writeTable(&tableA, plans, true, now); err != nil {
		t.Fatal(err)
	}
	for _, p := range plans {
		if err := writeDetail(&detail, p, now); err != nil {
			t.Fatal(err)
		}
		detail.WriteString("---\n")
	}
	if err := writeJSON(&jsonOut, plans); err != nil {
		t.Fatal(err)
	}
	golden(t, "plans.golden", table.Bytes())
	golden(t, "plans-all-namespaces.golden", tableA.Bytes())
	golden(t, "show.golden", detail.Bytes())
	golden(t, "plans.json.golden", jsonOut.Bytes())
}

func TestPhaseOf(t *testing.T) {
	cases := []struct {
		reason string
		status infrav1.PlanPhase
		label  string
		want   infrav1.PlanPhase
	}{
		{"status wins", infrav1.PlanApproved, "Pending", infrav1.PlanApproved},
		{"the label until the manager writes status (after a move)", "", "Applied", infrav1.PlanApplied},
		{"neither", "", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			p := &infrav1.TerraformPlan{Status: infrav1.TerraformPlanStatus{Phase: tc.status}}
			if tc.label != "" {
				p.Labels = map[string]string{infrav1.LabelPlanPhase: tc.label}
			}
			if diff := cmp.Diff(tc.want, phaseOf(p)); diff != "" {
				t.Errorf("phaseOf (-want +got):\n%s", diff)
			}
		})
	}
}
