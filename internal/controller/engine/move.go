package engine

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/render"
	"github.com/captf/captf/internal/tfstate"
)

// clusterctl move (docs/move.md). clusterctl discovers the
// objects to move once, before it pauses the Cluster: the kinds whose CRD
// carries the label clusterctl.cluster.x-k8s.io, and Secrets and
// ConfigMaps, each moved when it carries infrav1.LabelMove or when an owner
// reference leads to a moved object. Then it pauses the Cluster, waits
// while any discovered object carries AnnotationBlockMove, copies every
// object (metadata and spec, never status) to the target cluster, deletes
// them on the source, and lifts the pause on the target.
//
//   - The state Secrets get infrav1.LabelMove with the owner reference that
//     setStateOwner adds after a successful apply. The durable inputs
//     Secret, the plan key and the TerraformPlans move by their owner
//     reference. Jobs, their per-run Secrets, events and terraform's lock
//     Lease do not move.
//   - AnnotationBlockMove is on the object from before a runner Job that
//     may write its state (writesState: any but a plan Job once the state
//     exists) is created until no Job of it is left unprocessed. While the object is
//     paused (clusterctl pauses its Cluster) the manager still records a
//     finished Job's outcome (reconcilePaused), so the Job stays the record
//     of its outcome until every consequence is written and the move is not
//     held for ever.
//   - On the target, status is rebuilt from what moved: the applied marker
//     on the durable inputs Secret, the state, and the TerraformPlans, whose
//     phase is their label captf.io/plan-phase (rebuildPlans, reattach,
//     syncPlans).

// releaseMove removes AnnotationBlockMove once no Job of obj is left
// unprocessed: status names no active Job (a Job this manager started is
// named there from its start, and one adopted when it is taken up) and the
// cache shows none unprocessed but those this reconcile processed, whose
// mark the cache may not show yet. It reads the cache only: while a Job
// runs, a reconcile reads nothing else from the API server. A crash
// between setting the annotation and creating the Job leaves the
// annotation with no Job; this removes it, and a Job found later is
// blocked again when it is taken up (activate). An annotation set by the
// object's copy on another management cluster is replaced, in the same
// patch, by infrav1.AnnotationMovedMidRun, so that the sign of the cut run
// outlives it.
func (r *Reconciler) releaseMove(ctx context.Context, s *scope) error {
	obj := s.obj
	if _, ok := obj.GetAnnotations()[AnnotationBlockMove]; !ok || obj.GetRunnerStatus().ActiveJob != nil {
		return nil
	}
	jobs, err := r.jobsOf(ctx, r.Client, obj)
	if err != nil {
		return err
	}
	for i := range jobs {
		if !Processed(&jobs[i]) && !s.processed[jobs[i].Name] {
			return nil
		}
	}
	if foreignBlockMove(obj) {
		err := r.PatchObject(ctx, obj, func(obj Object) {
			annotate(obj, infrav1.AnnotationMovedMidRun, "true")
			delete(obj.GetAnnotations(), AnnotationBlockMove)
		})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("mark the run cut short by a move: %w", err)
		}
		return nil
	}
	if err := r.removeAnnotation(ctx, obj, AnnotationBlockMove); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// reconcilePaused is the reconcile of a paused object: no Job starts and
// no inputs are written, but a finished Job's outcome is recorded and
// AnnotationBlockMove released, so that clusterctl move, which pauses the
// Cluster and then waits for the annotation to go, neither waits for ever
// nor copies an object whose last run is not recorded yet. One consequence
// waits for the pause to be lifted: making the object the owner of its
// state Secrets (stepContext.paused). clusterctl took its list of objects
// to move before the Job ended; a state Secret the Job created (a first
// apply, a new part of a large state) is not on it, and were it owned now,
// garbage collection would delete it on the source with the moved object.
// Unowned, it stays on the source, and the target stops at StateLost
// (the applied marker moved) instead of applying from an empty state.
func (r *Reconciler) reconcilePaused(ctx context.Context, s *scope, why string) error {
	obj := s.obj
	setCondition(obj, ConditionPaused, true, ReasonPaused, "Paused: "+why+". No Job starts and nothing but status changes until the pause is lifted, except that a finished Job's outcome is recorded.")
	if _, blocking := obj.GetAnnotations()[AnnotationBlockMove]; !blocking && obj.GetRunnerStatus().ActiveJob == nil {
		// No Job of the object runs or waits to be recorded: an idle
		// paused object costs no more than before.
		return r.patchStatus(ctx, s)
	}
	root := renderQuiet(ctx, r, obj)
	s.paused = true
	_, err := r.settleJobs(ctx, s, root, !obj.GetDeletionTimestamp().IsZero())
	if err == nil {
		err = r.releaseMove(ctx, s)
	}
	return errors.Join(err, r.patchStatus(ctx, s))
}

// ownStateForMove makes obj the owner of its state Secrets, with infrav1.LabelMove,
// once the pause that deferred it (reconcilePaused) is lifted: when the
// last recorded run is a successful apply. It reads the cache; a Secret
// already owned and labelled costs no request.
func (r *Reconciler) ownStateForMove(ctx context.Context, obj Object) error {
	run := obj.GetRunnerStatus().LastRun
	if run == nil || !run.Succeeded || run.Operation != infrav1.OperationApply || !obj.GetDeletionTimestamp().IsZero() {
		return nil
	}
	var list corev1.SecretList
	if err := r.metadataReader().List(ctx, &list, client.InNamespace(obj.GetNamespace()), client.MatchingLabels{tfstate.LabelSuffix: StateSuffix(r.kind().Short(), obj.GetName())}); err != nil {
		return fmt.Errorf("state Secrets: %w", err)
	}
	for i := range list.Items {
		if !MovesWith(&list.Items[i], obj) {
			_, err := r.setStateOwner(ctx, obj, true)
			return err
		}
	}
	return nil
}

// MovesWith reports whether a state Secret moves with obj: obj owns it and it
// carries infrav1.LabelMove.
func MovesWith(s *corev1.Secret, obj Object) bool {
	if _, ok := s.Labels[infrav1.LabelMove]; !ok {
		return false
	}
	for _, o := range s.OwnerReferences {
		if o.UID == obj.GetUID() {
			return true
		}
	}
	return false
}

// renderQuiet renders obj's inputs for a paused reconcile, which needs them
// only to finish the start of a Job that status does not name yet; nil when
// they do not render (that Job is then dropped and started again later).
func renderQuiet(ctx context.Context, r *Reconciler, obj Object) *render.Root {
	// Read, never created: a paused object gets no new Secret.
	var key corev1.Secret
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: PlanKeyName(r.kind().Short(), obj.GetName())}, &key); err != nil {
		return nil
	}
	root, wait, err := r.inputs(ctx, obj, key.Data["key"])
	if err != nil || wait != nil || checkImage(obj.GetRunnerSpec().Image) != nil {
		return nil
	}
	return root
}

// rebuildPlans gives every TerraformPlan of obj whose status is empty —
// clusterctl move copies no status — the status of the phase its label
// captf.io/plan-phase keeps, so that status.phase and the conditions say
// the same as the label again. The label is the truth; nothing else
// changes. A plan the manager just created has its status written before
// its Job is marked processed, so an empty status here is a lost one.
func (r *Reconciler) rebuildPlans(ctx context.Context, obj Object) error {
	plans, err := r.plansOf(ctx, obj)
	if err != nil {
		return err
	}
	for i := range plans {
		plan := &plans[i]
		phase := infrav1.PlanPhase(plan.Labels[infrav1.LabelPlanPhase])
		if plan.Status.Phase != "" || phase == "" {
			continue
		}
		before := plan.DeepCopy()
		rebuiltPlanStatus(plan, phase)
		if err := r.Client.Status().Patch(ctx, plan, client.MergeFrom(before)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("TerraformPlan %s status: %w", plan.Name, err)
		}
	}
	return nil
}

// rebuiltPlanStatus is the status of a plan in phase, rebuilt from its
// label and spec after its status was lost.
func rebuiltPlanStatus(plan *infrav1.TerraformPlan, phase infrav1.PlanPhase) {
	const lost = " (status rebuilt from the label " + infrav1.LabelPlanPhase + " after it was lost, e.g. by clusterctl move)"
	plan.Status.Phase = phase
	plan.Status.ObservedGeneration = plan.Generation
	approved := func() {
		if plan.Spec.Approved {
			setPlanCondition(plan, infrav1.ConditionApproved, metav1.ConditionTrue, infrav1.ReasonApprovalAccepted, "Approved by "+plan.Spec.ApprovedBy+"."+lost)
		}
	}
	switch phase {
	case infrav1.PlanPending:
		if plan.Spec.Approved {
			// Approved, but the manager has not acted on it yet: it does
			// when it starts the apply (approvePlan).
			setPlanCondition(plan, infrav1.ConditionApproved, metav1.ConditionFalse, infrav1.ReasonAwaitingApproval, "Approved by "+plan.Spec.ApprovedBy+"; the apply is not started yet."+lost)
		} else {
			setPlanCondition(plan, infrav1.ConditionApproved, metav1.ConditionFalse, infrav1.ReasonAwaitingApproval, "Nobody approved the plan yet."+lost)
		}
		setPlanCondition(plan, infrav1.ConditionApplied, metav1.ConditionUnknown, infrav1.ReasonAwaitingApproval, "The plan waits for an approval."+lost)
	case infrav1.PlanApproved:
		approved()
		setPlanCondition(plan, infrav1.ConditionApplied, metav1.ConditionUnknown, infrav1.ReasonApplying, "The approved plan is applied with --expect-plan."+lost)
	case infrav1.PlanApplied:
		approved()
		setPlanCondition(plan, infrav1.ConditionApplied, metav1.ConditionTrue, infrav1.ReasonPlanApplied, "The apply planned exactly these changes and applied them."+lost)
	case infrav1.PlanFailed:
		approved()
		setPlanCondition(plan, infrav1.ConditionApplied, metav1.ConditionFalse, infrav1.ReasonApplyPlanChanged, "The apply found other changes than the approved ones and applied nothing."+lost)
	case infrav1.PlanSuperseded:
		if plan.Spec.Approved {
			// Its late approval was answered where it landed; a second
			// PlanSuperseded warning would say nothing new.
			setPlanCondition(plan, infrav1.ConditionApproved, metav1.ConditionFalse, infrav1.ReasonApprovalIgnored, "Approved by "+plan.Spec.ApprovedBy+", but the plan was superseded before it was applied; the approval was ignored."+lost)
		}
		setPlanCondition(plan, infrav1.ConditionApplied, metav1.ConditionFalse, infrav1.ReasonPlanSuperseded, "A newer plan replaced this one, or it became moot."+lost)
	}
}
