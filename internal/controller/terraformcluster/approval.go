package terraformcluster

import (
	"context"
	"fmt"
	"strings"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/render"
	"github.com/captf/captf/pkg/fingerprint"
)

// reconcileManual runs the Manual flow once an apply is due: plan first,
// then wait for an approval of the plan hash, then apply with
// --expect-plan on the image digest the plan Job ran.
// stateHash is the inputs hash the state records.
func (r *Reconciler) reconcileManual(ctx context.Context, tc *infrav1.TerraformCluster, root *render.Root, stateHash string) (ctrl.Result, error) {
	p := tc.Status.Plan
	oldScheme := p != nil && !strings.HasPrefix(p.PlanHash, fingerprint.Prefix)
	if p != nil && (p.InputsHash != root.InputsHash || oldScheme || planPredatesDrift(tc, p)) {
		// A plan made for other inputs, recorded by an older release
		// under another hash scheme (p1:), or made before drift that is
		// to be undone: plan again.
		tc.Status.Plan, p = nil, nil
	}
	if p == nil {
		var plan *infrav1.PlanStatus
		if !oldScheme {
			// A plan whose record status lost is taken up again; a p1:
			// record is planned again (spec 000), not swapped for the live
			// plan it left behind.
			var err error
			if plan, err = r.reattach(ctx, tc, root); err != nil {
				return ctrl.Result{}, err
			}
		}
		if plan == nil {
			return ctrl.Result{}, r.startJob(ctx, tc, root, jobRequest{op: infrav1.OperationPlan})
		}
		p = plan
	}
	req := jobRequest{op: infrav1.OperationApply, expect: p.PlanHash, digest: p.ImageDigest}
	if p.PlanHash != fingerprint.EmptyPlanHash {
		if tc.Status.PendingPlanRef == nil {
			// The reference to the live plan was lost: find it again
			// before asking whether it was approved through spec.approved.
			plans, err := r.plansOf(ctx, tc)
			if err != nil {
				return ctrl.Result{}, err
			}
			reattachRef(tc, plans)
		}
		// An empty plan needs no approval; any other does.
		by, err := r.approvedBy(ctx, tc, p.PlanHash)
		if err != nil {
			return ctrl.Result{}, err
		}
		if by == "" {
			// Drift checks continue while a plan waits, on the inputs the
			// state records; after failed applies there are none to check.
			return r.checkDrift(ctx, tc, func() (*appliedRun, error) {
				if tc.Status.Failures > 0 {
					return nil, nil
				}
				return r.appliedInputs(ctx, r.Client, tc, stateHash)
			})
		}
		req.approved = true
		if ref := tc.Status.PendingPlanRef; ref != nil {
			req.plan = ref.Name
		}
	}
	return ctrl.Result{}, r.startJob(ctx, tc, root, req)
}

// approvals are the annotations that approve a plan by its hash: any
// plan, and by its own name one the destructive-plan guard stopped.
var approvals = []string{infrav1.AnnotationApprovePlan, infrav1.AnnotationApproveDestructivePlan}

// approveCommand is the exact command that approves hash: for a plan the
// destructive-plan guard stopped, through captf.io/approve-destructive-plan.
func approveCommand(tc *infrav1.TerraformCluster, hash string) string {
	annotation := infrav1.AnnotationApprovePlan
	if waitsDestructive(tc) {
		annotation = infrav1.AnnotationApproveDestructivePlan
	}
	return fmt.Sprintf("kubectl annotate terraformcluster %s -n %s %s=%s --overwrite", tc.Name, tc.Namespace, annotation, hash)
}

// consumeApproval removes the approvals of hash after the approved apply,
// in its own patch with an optimistic lock: a newer value written in the
// meantime survives, and a conflict fails the reconcile so it runs again.
func (r *Reconciler) consumeApproval(ctx context.Context, tc *infrav1.TerraformCluster, hash string) error {
	latest := &infrav1.TerraformCluster{}
	if err := r.Reader.Get(ctx, client.ObjectKeyFromObject(tc), latest); err != nil {
		return fmt.Errorf("read the approval: %w", err)
	}
	patch := client.MergeFromWithOptions(latest.DeepCopy(), client.MergeFromWithOptimisticLock{})
	found := false
	for _, a := range approvals {
		if latest.Annotations[a] == hash {
			delete(latest.Annotations, a)
			found = true
		}
	}
	if !found {
		return nil
	}
	if err := r.Client.Patch(ctx, latest, patch); err != nil {
		return fmt.Errorf("remove the consumed approval: %w", err)
	}
	tc.Annotations = latest.Annotations
	return nil
}
