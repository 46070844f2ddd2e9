package engine

import (
	"context"
	"fmt"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/render"
	"github.com/captf/captf/pkg/fingerprint"
)

// reconcileManual runs the Manual flow once an apply is due: plan first,
// then wait for an approval of the plan hash, then apply with
// --expect-plan on the image digest the plan Job ran.
// state is the state the decision read.
func (r *Reconciler) reconcileManual(ctx context.Context, obj Object, root *render.Root, state *stateRead, exportsChange bool) (ctrl.Result, error) {
	p := obj.GetRunnerStatus().Plan
	oldScheme := p != nil && !strings.HasPrefix(p.PlanHash, fingerprint.Prefix)
	if p != nil && (p.InputsHash != root.InputsHash || oldScheme || planPredatesDrift(obj, p)) {
		// A plan made for other inputs, recorded by an older release
		// under another hash scheme (p1:), or made before drift that is
		// to be undone: plan again.
		obj.GetRunnerStatus().Plan, p = nil, nil
	}
	if p == nil {
		var plan *infrav1.PlanStatus
		if !oldScheme {
			// A plan whose record status lost is taken up again; a p1:
			// record is planned again (spec 000), not swapped for the live
			// plan it left behind.
			var err error
			if plan, err = r.reattach(ctx, obj, root); err != nil {
				return ctrl.Result{}, err
			}
		}
		if plan == nil {
			return ctrl.Result{}, r.startJob(ctx, obj, root, jobRequest{op: infrav1.OperationPlan, exportsChange: exportsChange, lineage: state.lineage()})
		}
		p = plan
	}
	req := jobRequest{op: infrav1.OperationApply, expect: p.PlanHash, digest: p.ImageDigest, lineage: state.lineage()}
	if p.PlanHash != fingerprint.EmptyPlanHash {
		if obj.GetRunnerStatus().PendingPlanRef == nil {
			// The reference to the live plan was lost: find it again
			// before asking whether it was approved through spec.approved.
			plans, err := r.plansOf(ctx, obj)
			if err != nil {
				return ctrl.Result{}, err
			}
			reattachRef(obj, plans)
		}
		// An empty plan needs no approval; any other does.
		by, err := r.approvedBy(ctx, obj, p.PlanHash)
		if err != nil {
			return ctrl.Result{}, err
		}
		if by == "" {
			// Drift checks continue while a plan waits, on the inputs the
			// state records; after failed applies there are none to check.
			return r.idleJobs(ctx, obj, state, func() (*appliedRun, error) {
				if obj.GetRunnerStatus().Failures > 0 {
					return nil, nil
				}
				return r.appliedInputs(ctx, r.Client, obj, state.InputsHash())
			})
		}
		req.approved = true
		if ref := obj.GetRunnerStatus().PendingPlanRef; ref != nil {
			req.plan = ref.Name
		}
	}
	return ctrl.Result{}, r.startJob(ctx, obj, root, req)
}

// approvals are the annotations that approve a plan by its hash: any
// plan, and by its own name one the destructive-plan guard stopped.
var approvals = []string{infrav1.AnnotationApprovePlan, infrav1.AnnotationApproveDestructivePlan}

// approveCommand is the exact command that approves hash: for a plan the
// destructive-plan guard stopped, through captf.io/approve-destructive-plan.
func approveCommand(k Kind, obj Object, hash string) string {
	annotation := infrav1.AnnotationApprovePlan
	if WaitsDestructive(obj) {
		annotation = infrav1.AnnotationApproveDestructivePlan
	}
	return fmt.Sprintf("kubectl annotate %s %s -n %s %s=%s --overwrite", strings.ToLower(k.Name()), obj.GetName(), obj.GetNamespace(), annotation, hash)
}

// consumeApproval removes the approvals of hash after the approved apply,
// in its own patch with an optimistic lock: a newer value written in the
// meantime survives, and a conflict fails the reconcile so it runs again.
func (r *Reconciler) consumeApproval(ctx context.Context, obj Object, hash string) error {
	// The object as this reconcile read it from the API server, or as its
	// own last write answered: anything written since fails the lock.
	latest := obj.DeepCopyObject().(Object)
	patch := client.MergeFromWithOptions(latest.DeepCopyObject().(Object), client.MergeFromWithOptimisticLock{})
	found := false
	for _, a := range approvals {
		if latest.GetAnnotations()[a] == hash {
			delete(latest.GetAnnotations(), a)
			found = true
		}
	}
	if !found {
		return nil
	}
	if err := r.Client.Patch(ctx, latest, patch); err != nil {
		r.forget(obj)
		return fmt.Errorf("remove the consumed approval: %w", err)
	}
	r.wrote(latest)
	obj.SetAnnotations(latest.GetAnnotations())
	obj.SetResourceVersion(latest.GetResourceVersion())
	return nil
}

// observeApproval times an approved apply whose Job was just created:
// from its plan's TerraformPlan to the approval, and from the approval to
// now. The approval's time is when its writer last wrote the approving
// field (the object's annotation, or the plan's spec.approved), as the
// API server's managedFields record it, to the second.
func (r *Reconciler) observeApproval(ctx context.Context, obj Object, planName string) {
	var plan infrav1.TerraformPlan
	if planName == "" || r.Client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: planName}, &plan) != nil {
		return
	}
	var at time.Time
	for _, a := range approvals {
		if t, ok := writtenAt(obj, "f:metadata", "f:annotations", "f:"+a); ok && t.After(at) {
			at = t
		}
	}
	if t, ok := writtenAt(&plan, "f:spec", "f:approved"); ok && t.After(at) {
		at = t
	}
	if at.IsZero() {
		return
	}
	kind := r.kind().Name()
	approvalSeconds.WithLabelValues(kind).Observe(max(0, at.Sub(plan.CreationTimestamp.Time).Seconds()))
	approvalToJobSeconds.WithLabelValues(kind).Observe(max(0, time.Since(at).Seconds()))
}
