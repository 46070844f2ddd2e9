package engine

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/render"
	"github.com/captf/captf/pkg/fingerprint"
)

// The TerraformPlan of spec 002: the manager opens one for each plan that
// waits for an approval, names it in status.pendingPlanRef, and moves it
// through its phases as the flow of spec 001 goes on. A person approves it
// with spec.approved, or through the captf.io/approve-plan annotation:
// either way there is one approval, one apply and one phase history.

// indexPlanTarget indexes TerraformPlans by the name of their target, so
// a reconcile lists its own plans, not the namespace's. Targets of two
// kinds may share a name: the list is filtered by kind. (The field is the
// CRD's selectable field, so a list from the API server selects the same.)
const indexPlanTarget = "spec.targetRef.name"

// IndexPlans registers indexPlanTarget with the manager's cache, once.
func IndexPlans(ctx context.Context, indexer client.FieldIndexer) error {
	return indexOnce(ctx, indexer, &infrav1.TerraformPlan{}, indexPlanTarget, func(obj client.Object) []string {
		return []string{obj.(*infrav1.TerraformPlan).Spec.TargetRef.Name}
	})
}

// KeepFinished is how many finished plans of a target are kept.
const KeepFinished = 10

// openPlan creates the TerraformPlan of a plan that waits for approval
// (or takes up the one an earlier attempt created), and supersedes every
// other live plan of the object.
func (r *Reconciler) openPlan(ctx context.Context, obj Object, o openPlan) error {
	report := o.Report
	summary := infrav1.PlanSummary{
		Create: int32(report.Add - report.Replace), Update: int32(report.Change),
		Replace: int32(report.Replace), Delete: int32(report.Destroy - report.Replace),
		OutputChanges: int32(report.OutputChanges), Resources: report.Resources,
	}
	plan := &infrav1.TerraformPlan{
		ObjectMeta: metav1.ObjectMeta{
			Name: o.Name, Namespace: obj.GetNamespace(),
			Labels: map[string]string{
				infrav1.LabelClusterName: NameLabel(ClusterName(obj)),
				infrav1.LabelDestructive: strconv.FormatBool(summary.Destructive()),
				infrav1.LabelPlanPhase:   string(infrav1.PlanPending),
				infrav1.LabelPlanReason:  string(o.Reason),
			},
			Annotations: map[string]string{infrav1.AnnotationPlanJob: o.Job},
		},
		Spec: infrav1.TerraformPlanSpec{
			TargetRef: infrav1.PlanTargetReference{Kind: r.kind().Name(), Name: obj.GetName()},
			PlanHash:  report.PlanHash, InputsHash: o.InputsHash, Reason: o.Reason, Summary: summary,
		},
	}
	if o.Digest != "" {
		plan.Annotations[infrav1.AnnotationImageDigest] = o.Digest
	}
	if err := controllerutil.SetControllerReference(obj, plan, r.Client.Scheme()); err != nil {
		return err
	}
	err := r.Client.Create(ctx, plan)
	if apierrors.IsAlreadyExists(err) {
		// An earlier attempt created it: take it up again.
		err = r.Reader.Get(ctx, client.ObjectKeyFromObject(plan), plan)
	}
	if err != nil {
		return fmt.Errorf("create TerraformPlan: %w", err)
	}
	r.wrote(plan)
	if plan.Status.Phase == "" {
		plan.Status.Phase = infrav1.PlanPending
		plan.Status.ObservedGeneration = plan.Generation
		setPlanCondition(plan, infrav1.ConditionApproved, metav1.ConditionFalse, infrav1.ReasonAwaitingApproval, "Nobody approved the plan yet.")
		setPlanCondition(plan, infrav1.ConditionApplied, metav1.ConditionUnknown, infrav1.ReasonAwaitingApproval, "The plan waits for an approval.")
		if err := r.Client.Status().Update(ctx, plan); err != nil {
			return fmt.Errorf("TerraformPlan status: %w", err)
		}
		r.wrote(plan)
	}
	return r.supersedeOthers(ctx, obj, o.Name)
}

// supersedeOthers finishes every live plan of obj but keep: a target has at
// most one live plan.
func (r *Reconciler) supersedeOthers(ctx context.Context, obj Object, keep string) error {
	plans, err := r.plansOf(ctx, obj)
	if err != nil {
		return err
	}
	for i := range plans {
		if plans[i].Name == keep || phaseOf(&plans[i]).Terminal() {
			continue
		}
		err := r.finishPlan(ctx, obj, finishPlan{Name: plans[i].Name, Phase: infrav1.PlanSuperseded, Reason: infrav1.ReasonPlanSuperseded,
			Message: "A newer plan replaced this one, or it became moot: the inputs changed, no apply is due any more, or the applyPolicy changed."})
		if err != nil {
			return err
		}
	}
	return nil
}

// plansOf lists the TerraformPlans of obj from the cache.
func (r *Reconciler) plansOf(ctx context.Context, obj Object) ([]infrav1.TerraformPlan, error) {
	var list infrav1.TerraformPlanList
	if err := r.Client.List(ctx, &list, client.InNamespace(obj.GetNamespace()), client.MatchingFields{indexPlanTarget: obj.GetName()}); err != nil {
		return nil, fmt.Errorf("list TerraformPlans: %w", err)
	}
	plans := list.Items[:0]
	for _, p := range list.Items {
		if p.Spec.TargetRef.Kind != r.kind().Name() {
			continue
		}
		if ref := metav1.GetControllerOf(&p); ref == nil || ref.UID == obj.GetUID() {
			plans = append(plans, p)
		}
	}
	return plans, nil
}

// reattach finds the live plan status lost (a status write that failed,
// a move): a plan of obj that is not finished, made for these inputs. Its
// record in status.plan is rebuilt from the plan, so approving it works.
// Live plans for other inputs are superseded by syncPlans.
func (r *Reconciler) reattach(ctx context.Context, obj Object, root *render.Root) (*infrav1.PlanStatus, error) {
	plans, err := r.plansOf(ctx, obj)
	if err != nil {
		return nil, err
	}
	for i := range plans {
		plan := &plans[i]
		// An ExportsChange plan is made for the approval hash.
		forInputs := plan.Spec.InputsHash == root.InputsHash || (plan.Spec.Reason == infrav1.ReasonExportsChange && plan.Spec.InputsHash == root.ApprovalHash)
		if phaseOf(plan).Terminal() || !forInputs ||
			planPredatesDrift(obj, &infrav1.PlanStatus{CreatedAt: plan.CreationTimestamp}) {
			continue
		}
		sum := plan.Spec.Summary
		p := &infrav1.PlanStatus{
			InputsHash: plan.Spec.InputsHash, Job: plan.Annotations[infrav1.AnnotationPlanJob], PlanHash: plan.Spec.PlanHash,
			Add: sum.Create + sum.Replace, Change: sum.Update, Destroy: sum.Delete + sum.Replace,
			OutputChanges: sum.OutputChanges, Resources: sum.Resources, Truncated: len(sum.Resources) >= 50,
			CreatedAt: plan.CreationTimestamp, ImageDigest: plan.Annotations[infrav1.AnnotationImageDigest],
			Reason: plan.Spec.Reason,
		}
		obj.GetRunnerStatus().Plan = p
		obj.GetRunnerStatus().PendingPlanRef = &infrav1.PlanReference{Name: plan.Name}
		setCondition(obj, infrav1.ConditionApplyJobSucceeded, unknown, infrav1.ReasonPlanAwaitingApproval,
			fmt.Sprintf("Plan %s waits for approval: %s (or approve TerraformPlan %s: kubectl captf approve %s -n %s)",
				p.PlanHash, approveCommand(r.kind(), obj, p.PlanHash), plan.Name, plan.Name, obj.GetNamespace()))
		return p, nil
	}
	return nil, nil
}

// approvedBy says who approved hash: through the annotation, or through
// spec.approved of the live plan; "" when nobody did. An approval of a
// finished plan counts for nothing, and an annotation only ever matches a
// hash of the current scheme.
func (r *Reconciler) approvedBy(ctx context.Context, obj Object, hash string) (string, error) {
	if !strings.HasPrefix(hash, fingerprint.Prefix) {
		return "", nil
	}
	for _, a := range approvals {
		if obj.GetAnnotations()[a] == hash {
			return "the " + a + " annotation", nil
		}
	}
	ref := obj.GetRunnerStatus().PendingPlanRef
	if ref == nil {
		return "", nil
	}
	// From the cache: an approval only ever goes from unset to set, and
	// its event brings the object back, so a stale read only waits.
	plan := &infrav1.TerraformPlan{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: ref.Name}, plan); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	if plan.Spec.Approved && plan.Spec.PlanHash == hash && !phaseOf(plan).Terminal() {
		return plan.Spec.ApprovedBy, nil
	}
	return "", nil
}

// approvePlan moves a plan to Approved as its apply starts (a retry after
// a failed step finds it there already).
func (r *Reconciler) approvePlan(ctx context.Context, name, namespace, by string) error {
	if name == "" {
		return nil
	}
	plan, err := r.readPlan(ctx, namespace, name)
	if plan == nil || err != nil {
		return err
	}
	if phaseOf(plan) != infrav1.PlanPending {
		return nil
	}
	return r.setPhase(ctx, plan, infrav1.PlanApproved, func(p *infrav1.TerraformPlan) {
		setPlanCondition(p, infrav1.ConditionApproved, metav1.ConditionTrue, infrav1.ReasonApprovalAccepted, "Approved by "+by+".")
		setPlanCondition(p, infrav1.ConditionApplied, metav1.ConditionUnknown, infrav1.ReasonApplying, "The approved plan is being applied with --expect-plan.")
	})
}

// readPlan reads a plan from the cache, or from the API server when the
// cache does not show it (yet); nil when it is gone. A phase move of a
// plan read so is made with an optimistic lock (setPhase): a cache that
// lags behind a move fails it, and the reconcile runs again.
func (r *Reconciler) readPlan(ctx context.Context, namespace, name string) (*infrav1.TerraformPlan, error) {
	plan := &infrav1.TerraformPlan{}
	key := client.ObjectKey{Namespace: namespace, Name: name}
	err := r.Client.Get(ctx, key, plan)
	if apierrors.IsNotFound(err) {
		err = r.Reader.Get(ctx, key, plan)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("TerraformPlan %s: %w", name, err)
	}
	return plan, nil
}

// finishPlan moves a plan to a terminal phase: a plan already finished
// (or gone) is left alone.
func (r *Reconciler) finishPlan(ctx context.Context, obj Object, f finishPlan) error {
	plan, err := r.readPlan(ctx, obj.GetNamespace(), f.Name)
	if plan == nil || err != nil {
		return err
	}
	if phaseOf(plan).Terminal() {
		return nil
	}
	applied := metav1.ConditionFalse
	if f.Phase == infrav1.PlanApplied {
		applied = metav1.ConditionTrue
	}
	return r.setPhase(ctx, plan, f.Phase, func(p *infrav1.TerraformPlan) {
		setPlanCondition(p, infrav1.ConditionApplied, applied, f.Reason, f.Message)
	})
}

// syncPlans keeps the plans of obj in step with status.plan: a lost
// reference to its live plan is restored; every live plan but the one
// status names became moot; an approval that landed on a plan already
// superseded is ignored, visibly; old finished plans are pruned.
func (r *Reconciler) syncPlans(ctx context.Context, obj Object) error {
	if ref, p := obj.GetRunnerStatus().PendingPlanRef, obj.GetRunnerStatus().Plan; ref != nil && (p == nil || ref.Name != PlanName(obj.GetName(), p.Job, p.PlanHash)) {
		obj.GetRunnerStatus().PendingPlanRef = nil
	}
	plans, err := r.plansOf(ctx, obj)
	if err != nil {
		return err
	}
	reattachRef(obj, plans)
	live := ""
	if ref := obj.GetRunnerStatus().PendingPlanRef; ref != nil {
		live = ref.Name
	}
	var finished []*infrav1.TerraformPlan
	stale := false
	for i := range plans {
		plan := &plans[i]
		if !phaseOf(plan).Terminal() {
			stale = stale || plan.Name != live
			continue
		}
		finished = append(finished, plan)
		if err := r.ignoreLateApproval(ctx, obj, plan); err != nil {
			return err
		}
	}
	if stale && obj.GetRunnerStatus().ActiveJob == nil {
		// No Job runs that could still take it up.
		if err := r.supersedeOthers(ctx, obj, live); err != nil {
			return err
		}
	}
	if _, paused := obj.GetAnnotations()[AnnotationPaused]; paused || !obj.GetDeletionTimestamp().IsZero() || len(finished) <= KeepFinished {
		return nil
	}
	for _, plan := range prunable(finished) {
		if err := r.Client.Delete(ctx, plan); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("prune TerraformPlan %s: %w", plan.Name, err)
		}
	}
	return nil
}

// prunable is what to delete of finished, an object's finished plans: all
// but the KeepFinished newest. Creation timestamps have a resolution of a
// second, so plans made within one second are ordered by name (the greater
// counts as newer): whatever order the list came in, every reconcile, and
// every manager, keeps the same ones.
func prunable(finished []*infrav1.TerraformPlan) []*infrav1.TerraformPlan {
	if len(finished) <= KeepFinished {
		return nil
	}
	newestFirst := slices.Clone(finished)
	slices.SortFunc(newestFirst, func(a, b *infrav1.TerraformPlan) int {
		if c := b.CreationTimestamp.Compare(a.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(b.Name, a.Name)
	})
	return newestFirst[KeepFinished:]
}

// reattachRef names the live plan of status.plan in status.pendingPlanRef
// again when status lost the reference but kept the plan (a status write
// lost or undone): the plan would otherwise be superseded as stale, and an
// approval through its spec.approved would never count.
func reattachRef(obj Object, plans []infrav1.TerraformPlan) {
	p := obj.GetRunnerStatus().Plan
	if obj.GetRunnerStatus().PendingPlanRef != nil || p == nil {
		return
	}
	name := PlanName(obj.GetName(), p.Job, p.PlanHash)
	for i := range plans {
		plan := &plans[i]
		if plan.Name == name && !phaseOf(plan).Terminal() && plan.Spec.PlanHash == p.PlanHash && plan.Spec.InputsHash == p.InputsHash {
			obj.GetRunnerStatus().PendingPlanRef = &infrav1.PlanReference{Name: name}
			return
		}
	}
}

// ignoreLateApproval answers an approval that landed on a plan after it
// was superseded: the plan says ApprovalIgnored, and a PlanSuperseded
// warning on the target names the current plan. Once per plan.
func (r *Reconciler) ignoreLateApproval(ctx context.Context, obj Object, plan *infrav1.TerraformPlan) error {
	c := meta.FindStatusCondition(plan.Status.Conditions, infrav1.ConditionApproved)
	if phaseOf(plan) != infrav1.PlanSuperseded || !plan.Spec.Approved || (c != nil && (c.Status == metav1.ConditionTrue || c.Reason == infrav1.ReasonApprovalIgnored)) {
		return nil
	}
	current := "none"
	if obj.GetRunnerStatus().PendingPlanRef != nil {
		current = obj.GetRunnerStatus().PendingPlanRef.Name
	}
	// The event first: the condition ends this step, so an event that
	// failed after it would never be sent again; sent twice, it is found
	// there.
	err := r.announce(ctx, obj, announce{Key: plan.Name, Type: corev1.EventTypeWarning, Reason: infrav1.EventPlanSuperseded, Action: "Approve",
		Note: fmt.Sprintf("Plan %s was approved by %s after it was superseded; the approval was ignored. The current plan is %s.", plan.Name, plan.Spec.ApprovedBy, current)})
	if err != nil {
		return err
	}
	before := plan.DeepCopy()
	setPlanCondition(plan, infrav1.ConditionApproved, metav1.ConditionFalse, infrav1.ReasonApprovalIgnored,
		fmt.Sprintf("Approved by %s after the plan was superseded; the approval was ignored. The current plan is %s.", plan.Spec.ApprovedBy, current))
	plan.Status.ObservedGeneration = plan.Generation
	if err := r.Client.Status().Patch(ctx, plan, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("TerraformPlan %s status: %w", plan.Name, err)
	}
	r.wrote(plan)
	return nil
}

// setPhase moves a plan to phase: its label (which travels with the plan
// through clusterctl move), then its status.
func (r *Reconciler) setPhase(ctx context.Context, plan *infrav1.TerraformPlan, phase infrav1.PlanPhase, conditions func(*infrav1.TerraformPlan)) error {
	before := plan.DeepCopy()
	if plan.Labels == nil {
		plan.Labels = map[string]string{}
	}
	plan.Labels[infrav1.LabelPlanPhase] = string(phase)
	if err := r.Client.Patch(ctx, plan, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("TerraformPlan %s phase: %w", plan.Name, err)
	}
	r.wrote(plan)
	before = plan.DeepCopy()
	plan.Status.Phase = phase
	plan.Status.ObservedGeneration = plan.Generation
	conditions(plan)
	if err := r.Client.Status().Patch(ctx, plan, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("TerraformPlan %s status: %w", plan.Name, err)
	}
	r.wrote(plan)
	return nil
}

// phaseOf is a plan's phase as its label says: the label is what moves
// with the plan and what the webhook reads.
func phaseOf(plan *infrav1.TerraformPlan) infrav1.PlanPhase {
	if p := plan.Labels[infrav1.LabelPlanPhase]; p != "" {
		return infrav1.PlanPhase(p)
	}
	return plan.Status.Phase
}

func setPlanCondition(plan *infrav1.TerraformPlan, typ string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&plan.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: plan.Generation,
	})
}
