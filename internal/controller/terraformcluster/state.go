package terraformcluster

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
)

// ReasonStateLost (ApplyJobSucceeded=False, and a Warning event): the
// object applied before, and its terraform state Secret is gone. Nothing
// runs: an apply would create everything a second time beside what
// exists.
const ReasonStateLost = "StateLost"

// history is what the API server says of tc's past, read right before a
// Job would start while the state records no inputs hash: whether it
// applied (the applied marker on its durable inputs Secret, or an image
// digest a successful apply pinned there) and whether its state Secret
// exists.
type history struct {
	applied, pinned, state bool
}

// first reports whether an apply would be the object's first, which is not
// gated. It fails closed: only when there is neither an applied marker nor
// a state Secret at all. A state without captf's inputs hash, or a marker
// without a state, needs an approval like any other change.
func (h history) first() bool { return !h.applied && !h.state }

// lost reports whether the object applied before and its state Secret is
// gone.
func (h history) lost() bool { return (h.applied || h.pinned) && !h.state }

// readHistory reads tc's history from the API server itself.
func (r *Reconciler) readHistory(ctx context.Context, tc *infrav1.TerraformCluster) (history, error) {
	var h history
	var s corev1.Secret
	err := r.Reader.Get(ctx, client.ObjectKey{Namespace: tc.Namespace, Name: inputsName(tc.Name)}, &s)
	switch {
	case err == nil:
		h.applied = s.Annotations[infrav1.AnnotationApplied] == "true"
		h.pinned = s.Annotations[infrav1.AnnotationImageDigest] != ""
	case !apierrors.IsNotFound(err):
		return h, fmt.Errorf("durable inputs: %w", err)
	}
	err = r.Reader.Get(ctx, client.ObjectKey{Namespace: tc.Namespace, Name: stateSecretName(tc.Name)}, &corev1.Secret{})
	switch {
	case err == nil:
		h.state = true
	case !apierrors.IsNotFound(err):
		return h, fmt.Errorf("state: %w", err)
	}
	return h, nil
}

// guardLostState stops tc when its history says its state is lost and
// nobody accepted starting from an empty one: it says so in
// ApplyJobSucceeded and in one Warning event, and reports true.
func (r *Reconciler) guardLostState(ctx context.Context, tc *infrav1.TerraformCluster, past history) (bool, error) {
	if !past.lost() || tc.Annotations[infrav1.AnnotationAcceptEmptyState] == "true" {
		return false, nil
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
	if _, ok := x.tc.Annotations[infrav1.AnnotationAcceptEmptyState]; !ok {
		return nil
	}
	err := r.patchObject(x.ctx, x.tc, func(tc *infrav1.TerraformCluster) {
		delete(tc.Annotations, infrav1.AnnotationAcceptEmptyState)
	})
	if err != nil {
		return fmt.Errorf("accept-empty-state annotation: %w", err)
	}
	return nil
}

// labelStateSuffix is the label terraform's kubernetes backend puts on the
// Secrets of a state (the state and, for a large one, its parts).
const labelStateSuffix = "tfstateSecretSuffix"

// ownState makes tc an owner of the Secrets that hold its state, after a
// successful apply, so that clusterctl move carries them with it. The
// backend writes the state again on every apply; this finds out whether
// it kept the reference each time.
type ownState struct{}

func (ownState) apply(r *Reconciler, x *stepContext) error {
	if x.paused {
		// Deferred until the pause is lifted (ownStateForMove): see
		// reconcilePaused.
		return nil
	}
	return r.setStateOwner(x.ctx, x.tc, true)
}

// setStateOwner adds tc as an owner of its state Secrets (own), or takes
// it away (before the object is released under deletionPolicy Retain, so
// that garbage collection keeps the state). The reference is not the
// controller's and blocks no deletion: terraform's backend writes these
// Secrets, the manager only marks them.
func (r *Reconciler) setStateOwner(ctx context.Context, tc *infrav1.TerraformCluster, own bool) error {
	var list corev1.SecretList
	if err := r.Reader.List(ctx, &list, client.InNamespace(tc.Namespace), client.MatchingLabels{labelStateSuffix: stateSuffix(tc.Name)}); err != nil {
		return fmt.Errorf("state Secrets: %w", err)
	}
	for i := range list.Items {
		s := &list.Items[i]
		at := slices.IndexFunc(s.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == tc.UID })
		_, labelled := s.Labels[labelMove]
		if (at >= 0) == own && (!own || labelled) {
			continue
		}
		patch := client.MergeFrom(s.DeepCopy())
		if own {
			if at < 0 {
				s.OwnerReferences = append(s.OwnerReferences, metav1.OwnerReference{
					APIVersion: infrav1.GroupVersion.String(), Kind: "TerraformCluster", Name: tc.Name, UID: tc.UID,
				})
			}
			// clusterctl move carries it with the object (move.go).
			s.Labels[labelMove] = ""
		} else {
			s.OwnerReferences = slices.Delete(s.OwnerReferences, at, at+1)
		}
		if err := r.Client.Patch(ctx, s, patch); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("owner of state Secret %s: %w", s.Name, err)
		}
	}
	return nil
}
