package engine

import (
	"context"
	"crypto/rand"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/pkg/fingerprint"
)

// OwnerLabels mark what the manager makes for obj of kind k.
func OwnerLabels(k Kind, obj Object) map[string]string {
	return map[string]string{
		infrav1.LabelManaged:   "true",
		infrav1.LabelOwnerKind: k.Name(),
		infrav1.LabelOwnerName: NameLabel(obj.GetName()),
	}
}

// planKey returns the object's plan key, creating the Secret on first use:
// 32 random bytes under "key", owned by the object, never rotated. It also
// keys the inputs hash, so it is created under both apply policies (see
// docs/runner-job.md).
func (r *Reconciler) planKey(ctx context.Context, obj Object) ([]byte, error) {
	name := PlanKeyName(r.kind().Short(), obj.GetName())
	var s corev1.Secret
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}, &s)
	if apierrors.IsNotFound(err) {
		key := make([]byte, fingerprint.MinKeySize)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("plan key: %w", err)
		}
		s = corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: obj.GetNamespace(), Labels: OwnerLabels(r.kind(), obj)},
			Data:       map[string][]byte{"key": key},
		}
		if err := controllerutil.SetOwnerReference(obj, &s, r.Client.Scheme()); err != nil {
			return nil, err
		}
		if err := r.Client.Create(ctx, &s); err != nil {
			// Another reconcile may have won: read what it wrote.
			return nil, fmt.Errorf("create plan key: %w", err)
		}
		return key, nil
	}
	if err != nil {
		return nil, fmt.Errorf("plan key: %w", err)
	}
	if len(s.Data["key"]) < fingerprint.MinKeySize {
		return nil, fmt.Errorf("plan key Secret %s holds %d bytes under key; at least %d are needed", name, len(s.Data["key"]), fingerprint.MinKeySize)
	}
	return s.Data["key"], nil
}

// markApplied sets the applied marker on the durable inputs Secret: after
// a successful apply, and whenever the manager reads a state that records
// an inputs hash. Without the Secret there is nothing to mark; the first-apply
// check (history.first) then still sees the state.
func (r *Reconciler) markApplied(ctx context.Context, obj Object) error {
	var s corev1.Secret
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: InputsName(r.kind().Short(), obj.GetName())}, &s)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("durable inputs: %w", err)
	}
	if s.Annotations[infrav1.AnnotationApplied] == "true" {
		return nil
	}
	before := s.DeepCopy()
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[infrav1.AnnotationApplied] = "true"
	if err := r.Client.Patch(ctx, &s, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("applied marker: %w", err)
	}
	return nil
}

func identity(obj Object) string {
	if id := obj.GetRunnerSpec().IdentityRef; id != nil {
		return id.Kind + "/" + id.Name
	}
	return ""
}
