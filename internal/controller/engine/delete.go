package engine

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/captf/captf/api/v1alpha1"
)

// Finalizer holds an object until its infrastructure is destroyed
// and its Secrets are cleaned up.
const Finalizer = "captf.io/destroy"

// ensureFinalizer adds the finalizer in its own patch.
func (r *Reconciler) ensureFinalizer(ctx context.Context, obj Object) error {
	if controllerutil.ContainsFinalizer(obj, Finalizer) {
		return nil
	}
	before := obj.DeepCopyObject().(Object)
	controllerutil.AddFinalizer(obj, Finalizer)
	if err := r.Client.Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		r.forget(obj)
		return fmt.Errorf("add finalizer: %w", err)
	}
	r.wrote(obj)
	return nil
}

// ReasonDestroyInputsUnknown (Ready=False, and a Warning event): the
// object is deleted, and the durable inputs Secret holds no inputs that
// hash to the inputs hash its state records, so a destroy could run with
// a configuration the state was not applied with (another region, account
// or endpoint), find nothing and orphan everything. Nothing runs and the
// object is kept.
const ReasonDestroyInputsUnknown = "DestroyInputsUnknown"

// reconcileDelete destroys what the state holds with a destroy Job (not
// gated, no plan key) that runs what the last successful apply ran, then
// deletes the object's Secrets and lets it go. A failed destroy is
// retried with the usual backoff. Whatever Job runs finishes first: it
// holds the state lock, and until its outcome is recorded nothing is
// released.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) (ctrl.Result, error) {
	obj := s.obj
	if !controllerutil.ContainsFinalizer(obj, Finalizer) {
		return ctrl.Result{}, nil
	}
	running, err := r.settleJobs(ctx, s, nil, true)
	if err != nil || running != nil {
		return ctrl.Result{}, err
	}
	// The cache may not show a Job started a moment ago whose start was
	// not recorded (its status write failed): released now, the object
	// would take the Job with it halfway through an apply.
	if err := r.noUnprocessedJob(ctx, obj); err != nil {
		return ctrl.Result{}, err
	}
	// What runs on this object's infrastructure goes first (a cluster's
	// machines), whatever the deletion policy. The kind's watches bring
	// the object back when it is gone.
	if w, err := r.kind().DeletionWaits(ctx, r.Client, obj); err != nil || w != nil {
		if w != nil {
			setCondition(obj, infrav1.ConditionReady, false, w.Reason, w.Message)
		}
		return ctrl.Result{RequeueAfter: r.recheck()}, err
	}
	if obj.GetRunnerSpec().DeletionPolicy == infrav1.DeletionRetain {
		// The infrastructure stays, and with it its state: an object made
		// again under this name finds the state, so its first change is
		// gated like any other.
		if err := r.announce(ctx, obj, announce{Key: "retain", Type: corev1.EventTypeNormal, Reason: EventRetained, Action: "Delete",
			Note: fmt.Sprintf("Deleted with deletionPolicy Retain: nothing was destroyed; the terraform state stays in Secret %s.", StateSecretName(r.kind().Short(), obj.GetName()))}); err != nil {
			return ctrl.Result{}, err
		}
		if _, err := r.setStateOwner(ctx, obj, false); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.cleanup(ctx, obj, PlanKeyName(r.kind().Short(), obj.GetName()), InputsName(r.kind().Short(), obj.GetName()))
	}
	if run := obj.GetRunnerStatus().LastRun; run != nil && run.Operation == infrav1.OperationDestroy {
		if run.Succeeded {
			return ctrl.Result{}, r.cleanup(ctx, obj, PlanKeyName(r.kind().Short(), obj.GetName()), InputsName(r.kind().Short(), obj.GetName()), StateSecretName(r.kind().Short(), obj.GetName()))
		}
		if wait := r.backoff(obj); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
	}
	// A restore asked for runs first: a lost state is destroyed once it
	// is back.
	if serial, ok := restoreRequest(obj); ok {
		if started, err := r.startRestore(ctx, obj, serial); err != nil || started {
			return ctrl.Result{}, err
		}
	}
	if err := r.migrateState(ctx, obj); err != nil {
		return ctrl.Result{}, err
	}
	state, err := r.readState(ctx, r.Reader, obj)
	if err != nil {
		return ctrl.Result{}, err
	}
	if state.InputsHash() == "" {
		// Nothing to destroy, unless the object applied before and its
		// state is lost (gone, or made again empty): then what exists
		// would be left behind unseen.
		past, err := r.readHistory(ctx, obj, &freshState{state: state})
		if err != nil {
			return ctrl.Result{}, err
		}
		if stop, err := r.guardLostState(ctx, obj, past); err != nil || stop {
			return ctrl.Result{RequeueAfter: r.recheck()}, err
		}
		if state == nil || past.lost() {
			// Lost and accepted (captf.io/accept-empty-state): released
			// without a destroy.
			return ctrl.Result{}, r.cleanup(ctx, obj, PlanKeyName(r.kind().Short(), obj.GetName()), InputsName(r.kind().Short(), obj.GetName()), StateSecretName(r.kind().Short(), obj.GetName()))
		}
	}
	// The state the destroy takes down is backed up first, as every
	// serial is: a reconcile cut short (a kill) between the last apply
	// and the deletion may not have got to it.
	if err := r.syncBackups(ctx, obj, state); err != nil {
		return ctrl.Result{}, err
	}
	// From the API server: the cache may not show what the last apply's
	// outcome kept a moment ago, and a refusal is announced.
	applied, err := r.appliedInputs(ctx, r.Reader, obj, state.InputsHash())
	if err != nil {
		return ctrl.Result{}, err
	}
	if applied != nil {
		return ctrl.Result{}, r.startJob(ctx, obj, applied.root, jobRequest{op: infrav1.OperationDestroy, applied: applied, lineage: state.lineage()})
	}
	if obj.GetAnnotations()[infrav1.AnnotationDestroyWithCurrentInputs] != "true" {
		msg := fmt.Sprintf("The terraform state was applied with inputs %q, and the durable inputs Secret %s holds none that hash to it (an apply of other inputs started since, or the Secret is gone); nothing is destroyed and the object is kept, since a destroy with other inputs may find nothing and leave the infrastructure behind. Restore inputs that hash to it, or annotate the object %s=true to destroy with the inputs it renders now.",
			state.InputsHash(), InputsName(r.kind().Short(), obj.GetName()), infrav1.AnnotationDestroyWithCurrentInputs)
		setCondition(obj, infrav1.ConditionReady, false, ReasonDestroyInputsUnknown, msg)
		return ctrl.Result{RequeueAfter: r.recheck()}, r.announce(ctx, obj, announce{Key: "destroy-inputs", Type: corev1.EventTypeWarning, Reason: ReasonDestroyInputsUnknown, Action: "Delete", Note: msg})
	}
	key, err := r.planKey(ctx, obj)
	if err != nil {
		return ctrl.Result{}, err
	}
	root, wait, err := r.render(ctx, obj, key)
	if wait != nil {
		// What the kind renders from other objects (a machine's Machine
		// and bootstrap data) may have gone with the deletion, and may
		// never come back: say so, rather than wait as if for a first
		// apply.
		msg := fmt.Sprintf("Deleted under %s=true, and the inputs it renders now cannot be had: %s (%s). Nothing is destroyed and the object is kept. Restore inputs that hash to the state's in the durable inputs Secret %s, or make what is missing available again.",
			infrav1.AnnotationDestroyWithCurrentInputs, wait.Message, wait.Reason, InputsName(r.kind().Short(), obj.GetName()))
		setCondition(obj, infrav1.ConditionReady, false, infrav1.ReasonDestroyInputsUnavailable, msg)
		return ctrl.Result{RequeueAfter: r.recheck()}, r.announce(ctx, obj, announce{Key: "destroy-inputs-unavailable", Type: corev1.EventTypeWarning, Reason: infrav1.ReasonDestroyInputsUnavailable, Action: "Delete", Note: msg})
	}
	if err == nil {
		err = checkImage(obj.GetRunnerSpec().Image)
	}
	if errors.Is(err, errInputs) {
		setCondition(obj, infrav1.ConditionReady, false, ReasonInvalidInputs, err.Error())
		return ctrl.Result{RequeueAfter: r.recheck()}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.startJob(ctx, obj, root, jobRequest{op: infrav1.OperationDestroy, lineage: state.lineage()})
}

// cleanup deletes the named Secrets of the object (plan key, durable
// inputs, the emptied state) and removes the finalizer.
func (r *Reconciler) cleanup(ctx context.Context, obj Object, secrets ...string) error {
	for _, name := range secrets {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: obj.GetNamespace()}}
		if err := r.Client.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("cleanup: %w", err)
		}
	}
	before := obj.DeepCopyObject().(Object)
	controllerutil.RemoveFinalizer(obj, Finalizer)
	if err := r.Client.Patch(ctx, obj, client.MergeFrom(before)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer: %w", err)
	}
	return nil
}
