package terraformcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/render"
	"github.com/captf/captf/pkg/fingerprint"
)

// reconcileManual runs the Manual flow once an apply is due: plan first,
// then wait for captf.io/approve-plan to name the plan hash, then apply
// with --expect-plan.
func (r *Reconciler) reconcileManual(ctx context.Context, tc *infrav1.TerraformCluster, root *render.Root) (ctrl.Result, error) {
	p := tc.Status.Plan
	if p == nil || p.InputsHash != root.InputsHash {
		// No plan yet, or one made for other inputs: plan these.
		tc.Status.Plan = nil
		if err := r.startJob(ctx, tc, root, infrav1.OperationPlan, "", false); err != nil {
			return ctrl.Result{}, err
		}
		setCondition(tc, infrav1.ConditionApplyJobSucceeded, unknown, ReasonPlanning, "A plan Job runs; its plan will wait for approval.")
		return ctrl.Result{}, nil
	}
	by, err := r.approvedBy(ctx, tc, p.PlanHash)
	if err != nil || by == "" {
		return ctrl.Result{RequeueAfter: r.recheck()}, err
	}
	if err := r.startJob(ctx, tc, root, infrav1.OperationApply, p.PlanHash, true); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.approveLivePlan(ctx, tc, by); err != nil {
		return ctrl.Result{}, err
	}
	r.Recorder.Eventf(tc, nil, corev1.EventTypeNormal, infrav1.EventPlanApproved, "Apply",
		"Plan %s approved by %s; an apply Job runs with --expect-plan.", p.PlanHash, by)
	setCondition(tc, infrav1.ConditionApplyJobSucceeded, unknown, ReasonApplying, "The approved plan is being applied.")
	return ctrl.Result{}, nil
}

// recordPlan makes a plan wait for approval: its TerraformPlan,
// status.plan and the condition with the exact command.
func (r *Reconciler) recordPlan(ctx context.Context, tc *infrav1.TerraformCluster, job string, report *fingerprint.Report, inputsHash string, reason string) error {
	if err := r.openPlan(ctx, tc, job, report, inputsHash); err != nil {
		return err
	}
	tc.Status.Plan = &infrav1.PlanStatus{
		InputsHash: inputsHash, Job: job, PlanHash: report.PlanHash,
		Add: int32(report.Add), Change: int32(report.Change), Destroy: int32(report.Destroy),
		OutputChanges: int32(report.OutputChanges), Resources: report.Resources, Truncated: report.Truncated,
		CreatedAt: nowTime(),
	}
	msg := fmt.Sprintf("Plan %s (%d to add, %d to change, %d to destroy, %d output changes) waits for approval: %s",
		report.PlanHash, report.Add, report.Change, report.Destroy, report.OutputChanges, approveCommand(tc, report.PlanHash))
	if ref := tc.Status.PendingPlanRef; ref != nil {
		msg += fmt.Sprintf(" (or approve TerraformPlan %s: kubectl captf approve %s -n %s)", ref.Name, ref.Name, tc.Namespace)
	}
	setCondition(tc, infrav1.ConditionApplyJobSucceeded, unknown, reason, msg)
	return nil
}

// approveCommand is the exact command that approves hash.
func approveCommand(tc *infrav1.TerraformCluster, hash string) string {
	return fmt.Sprintf("kubectl annotate terraformcluster %s -n %s %s=%s --overwrite", tc.Name, tc.Namespace, infrav1.AnnotationApprovePlan, hash)
}

// consumeApproval removes captf.io/approve-plan after the approved apply,
// in its own patch with an optimistic lock: a newer value written in the
// meantime survives, and a conflict fails the reconcile so it runs again.
func (r *Reconciler) consumeApproval(ctx context.Context, tc *infrav1.TerraformCluster, hash string) error {
	latest := &infrav1.TerraformCluster{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(tc), latest); err != nil {
		return err
	}
	if latest.Annotations[infrav1.AnnotationApprovePlan] != hash {
		return nil
	}
	patch := client.MergeFromWithOptions(latest.DeepCopy(), client.MergeFromWithOptimisticLock{})
	delete(latest.Annotations, infrav1.AnnotationApprovePlan)
	if err := r.Client.Patch(ctx, latest, patch); err != nil {
		return fmt.Errorf("remove the consumed approval: %w", err)
	}
	return nil
}
