package terraformcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
)

// ReasonStateLost (ApplyJobSucceeded=False, and a Warning event): the
// object applied before, and its terraform state Secret is gone. Nothing
// runs: an apply would create everything a second time beside what
// exists.
const ReasonStateLost = "StateLost"

// stateLost reports, reading the API server, whether tc applied before
// (the applied marker, or an image digest pinned by a successful apply, on
// its durable inputs Secret) and its state Secret is gone.
func (r *Reconciler) stateLost(ctx context.Context, tc *infrav1.TerraformCluster) (bool, error) {
	err := r.Reader.Get(ctx, client.ObjectKey{Namespace: tc.Namespace, Name: stateSecretName(tc.Name)}, &corev1.Secret{})
	if err == nil {
		return false, nil
	}
	if !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("state: %w", err)
	}
	var s corev1.Secret
	err = r.Reader.Get(ctx, client.ObjectKey{Namespace: tc.Namespace, Name: inputsName(tc.Name)}, &s)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("durable inputs: %w", err)
	}
	return s.Annotations[infrav1.AnnotationApplied] == "true" || s.Annotations[infrav1.AnnotationImageDigest] != "", nil
}

// guardLostState stops tc when its state is lost and nobody accepted
// starting from an empty one: it says so in ApplyJobSucceeded and in one
// Warning event, and reports true.
func (r *Reconciler) guardLostState(ctx context.Context, tc *infrav1.TerraformCluster) (bool, error) {
	if tc.Annotations[infrav1.AnnotationAcceptEmptyState] == "true" {
		return false, nil
	}
	lost, err := r.stateLost(ctx, tc)
	if err != nil || !lost {
		return false, err
	}
	msg := fmt.Sprintf("The object applied before and its terraform state Secret %s is gone; nothing runs, since an apply would create everything a second time. Restore the state Secret, or annotate the object %s=true to start again from an empty state.",
		stateSecretName(tc.Name), infrav1.AnnotationAcceptEmptyState)
	setCondition(tc, infrav1.ConditionApplyJobSucceeded, false, ReasonStateLost, msg)
	tc.Status.Plan = nil
	return true, r.announce(ctx, tc, announce{Key: "state-lost", Type: corev1.EventTypeWarning, Reason: ReasonStateLost, Action: "Guard", Note: msg})
}

// acceptedEmptyState removes captf.io/accept-empty-state after the apply
// it allowed succeeded, so that a later loss is guarded again.
type acceptedEmptyState struct{}

func (acceptedEmptyState) apply(r *Reconciler, x *stepContext) error {
	tc := x.tc
	if _, ok := tc.Annotations[infrav1.AnnotationAcceptEmptyState]; !ok {
		return nil
	}
	patch := client.MergeFrom(tc.DeepCopy())
	delete(tc.Annotations, infrav1.AnnotationAcceptEmptyState)
	status := tc.Status
	if err := r.Client.Patch(x.ctx, tc, patch); err != nil {
		return fmt.Errorf("accept-empty-state annotation: %w", err)
	}
	// The patch answers with the stored status; the reconcile's own stays.
	tc.Status = status
	return nil
}
