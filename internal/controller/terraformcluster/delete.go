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
	"github.com/captf/captf/internal/runner"
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
// A failed destroy is retried with the usual backoff.
func (r *Reconciler) reconcileDelete(ctx context.Context, tc *infrav1.TerraformCluster) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(tc, Finalizer) {
		return ctrl.Result{}, nil
	}
	if tc.Status.ActiveJob != nil {
		// Whatever runs finishes first: a Job holds the state lock.
		job, msg, done, err := r.collect(ctx, tc)
		if err != nil || !done {
			return ctrl.Result{}, err
		}
		if run := tc.Status.LastRun; job != nil && run.Operation == infrav1.OperationDestroy {
			if msg != nil && msg.Outcome == runner.OutcomeDestroyed {
				return ctrl.Result{}, r.cleanup(ctx, tc)
			}
			run.Succeeded = false
			if msg != nil {
				run.Error = &infrav1.RunError{Kind: msg.Outcome, Message: msg.Error}
			}
			tc.Status.Failures++
			setCondition(tc, infrav1.ConditionReady, false, ReasonDestroyFailed, fmt.Sprintf("Destroy Job %s failed (%s)", job.Name, run.Error.Kind))
		}
	}
	if failedRun(tc.Status.LastRun) && tc.Status.LastRun.Operation == infrav1.OperationDestroy {
		if wait := r.backoff(tc); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
	}
	var state corev1.Secret
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: tc.Namespace, Name: stateSecretName(tc.Name)}, &state)
	if apierrors.IsNotFound(err) {
		// Nothing was ever applied: nothing to destroy.
		return ctrl.Result{}, r.cleanup(ctx, tc)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	root, err := r.lastInputs(ctx, tc)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.startJob(ctx, tc, root, infrav1.OperationDestroy, "", false); err != nil {
		return ctrl.Result{}, err
	}
	setCondition(tc, infrav1.ConditionReady, false, ReasonDestroying, "A destroy Job runs.")
	return ctrl.Result{}, nil
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

// cleanup deletes the object's Secrets (plan key, durable inputs, the
// emptied state) and removes the finalizer.
func (r *Reconciler) cleanup(ctx context.Context, tc *infrav1.TerraformCluster) error {
	for _, name := range []string{planKeyName(tc.Name), inputsName(tc.Name), stateSecretName(tc.Name)} {
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
