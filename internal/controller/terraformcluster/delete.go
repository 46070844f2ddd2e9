package terraformcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/render"
)

// Finalizer holds a TerraformCluster until its infrastructure is destroyed
// and its Secrets are cleaned up.
const Finalizer = "captf.io/destroy"

// ensureFinalizer adds the finalizer in its own patch.
func (r *Reconciler) ensureFinalizer(ctx context.Context, tc *infrav1.TerraformCluster) error {
	if controllerutil.ContainsFinalizer(tc, Finalizer) {
		return nil
	}
	before := tc.DeepCopy()
	controllerutil.AddFinalizer(tc, Finalizer)
	if err := r.Client.Patch(ctx, tc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("add finalizer: %w", err)
	}
	return nil
}

// reconcileDelete destroys what the state holds with a destroy Job (not
// gated, no plan key), then deletes the object's Secrets and lets it go.
// A failed destroy is retried with the usual backoff. Whatever Job runs
// finishes first: it holds the state lock.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) (ctrl.Result, error) {
	tc := s.tc
	if !controllerutil.ContainsFinalizer(tc, Finalizer) {
		return ctrl.Result{}, nil
	}
	running, err := r.settleJobs(ctx, s, nil, true)
	if err != nil || running != nil {
		return ctrl.Result{}, err
	}
	if tc.Spec.DeletionPolicy == infrav1.DeletionRetain {
		// The infrastructure stays, and with it its state: an object made
		// again under this name finds the state, so its first change is
		// gated like any other.
		if err := r.announce(ctx, tc, announce{Key: "retain", Type: corev1.EventTypeNormal, Reason: EventRetained, Action: "Delete",
			Note: fmt.Sprintf("Deleted with deletionPolicy Retain: nothing was destroyed; the terraform state stays in Secret %s.", stateSecretName(tc.Name))}); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.setStateOwner(ctx, tc, false); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.cleanup(ctx, tc, planKeyName(tc.Name), inputsName(tc.Name))
	}
	if run := tc.Status.LastRun; run != nil && run.Operation == infrav1.OperationDestroy {
		if run.Succeeded {
			return ctrl.Result{}, r.cleanup(ctx, tc, planKeyName(tc.Name), inputsName(tc.Name), stateSecretName(tc.Name))
		}
		if wait := r.backoff(tc); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
	}
	err = r.Reader.Get(ctx, client.ObjectKey{Namespace: tc.Namespace, Name: stateSecretName(tc.Name)}, &corev1.Secret{})
	if apierrors.IsNotFound(err) {
		// Nothing was ever applied: nothing to destroy.
		return ctrl.Result{}, r.cleanup(ctx, tc, planKeyName(tc.Name), inputsName(tc.Name), stateSecretName(tc.Name))
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	root, err := r.lastInputs(ctx, tc)
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.startJob(ctx, tc, root, jobRequest{op: infrav1.OperationDestroy})
}

// lastInputs are the inputs of the last apply, from the durable Secret, so
// a destroy does not depend on variable sources that may be gone by now.
func (r *Reconciler) lastInputs(ctx context.Context, tc *infrav1.TerraformCluster) (*render.Root, error) {
	var s corev1.Secret
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: tc.Namespace, Name: inputsName(tc.Name)}, &s); err != nil {
		return nil, fmt.Errorf("inputs of the last apply: %w", err)
	}
	return &render.Root{MainTF: s.Data["main.tf.json"], Vars: s.Data["terraform.tfvars.json"]}, nil
}

// cleanup deletes the named Secrets of the object (plan key, durable
// inputs, the emptied state) and removes the finalizer.
func (r *Reconciler) cleanup(ctx context.Context, tc *infrav1.TerraformCluster, secrets ...string) error {
	for _, name := range secrets {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tc.Namespace}}
		if err := r.Client.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("cleanup: %w", err)
		}
	}
	before := tc.DeepCopy()
	controllerutil.RemoveFinalizer(tc, Finalizer)
	if err := r.Client.Patch(ctx, tc, client.MergeFrom(before)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer: %w", err)
	}
	return nil
}
