package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/captf/captf/api/v1alpha1"
)

// The credentials of spec.identityRef reach a runner Job through a per-run
// Secret the manager copies them into (a Job cannot mount a Secret of
// another namespace): as environment variables (envFrom) and as files of
// mode 0440 under CredentialsPath. The copy is owned by the Job and
// deleted with its per-run inputs. The manager never logs, records or
// announces a credential; the inputs hash binds the reference, not the
// values, so rotating a key applies nothing.

// CredentialsPath is where a runner Job finds its credentials as files.
const CredentialsPath = "/var/run/captf/credentials"

// Reasons of ApplyJobSucceeded=False when the identity cannot be used.
const (
	ReasonIdentityNotAllowed = "IdentityNotAllowed"
	ReasonIdentityNotFound   = "IdentityNotFound"
)

// errIdentity marks an identity the object cannot use; its reason is the
// condition's.
type errIdentity struct {
	reason, msg string
}

func (e *errIdentity) Error() string { return e.msg }

// credentials reads the Secret the identity ref names (obj's identityRef,
// or the one a destroy or drift check runs with) from the API server
// itself, once per Job start, and checks that obj may use it. It returns
// nil for no identity, and an *errIdentity when the identity is missing or
// does not allow obj's namespace.
func (r *Reconciler) credentials(ctx context.Context, obj Object, ref *infrav1.IdentityReference) (map[string][]byte, error) {
	if ref == nil {
		return nil, nil
	}
	key, id, err := r.identitySecret(ctx, r.Reader, obj, ref)
	if err != nil {
		return nil, err
	}
	var s corev1.Secret
	if err := r.Reader.Get(ctx, key, &s); err != nil {
		return nil, secretError(err, key, ref)
	}
	if err := r.ownForMove(ctx, &s, id); err != nil {
		return nil, err
	}
	return s.Data, nil
}

// checkIdentity reports, from the manager's cache, whether obj may use the
// identity its spec names: an *errIdentity when not. An idle object says
// so at once, when a watch of the identity, its Secret or its namespace
// brings it back, rather than when its next Job is due.
func (r *Reconciler) checkIdentity(ctx context.Context, obj Object) error {
	ref := obj.GetRunnerSpec().IdentityRef
	if ref == nil {
		return nil
	}
	key, id, err := r.identitySecret(ctx, r.Client, obj, ref)
	if err != nil {
		return err
	}
	// Its existence and owners only, from the cache: no request, no data
	// kept.
	var s corev1.Secret
	if err := r.metadataReader().Get(ctx, key, &s); err != nil {
		return secretError(err, key, ref)
	}
	return r.ownForMove(ctx, &s, id)
}

// identitySecret checks, reading through reader, that obj may use the
// identity ref, and returns the key of the Secret of its credentials and
// the TerraformClusterIdentity that names it (nil for a Secret of obj's
// namespace).
func (r *Reconciler) identitySecret(ctx context.Context, reader client.Reader, obj Object, ref *infrav1.IdentityReference) (client.ObjectKey, *infrav1.TerraformClusterIdentity, error) {
	if ref.Kind != infrav1.IdentityKindTerraformClusterIdentity {
		return client.ObjectKey{Namespace: obj.GetNamespace(), Name: ref.Name}, nil, nil
	}
	var id infrav1.TerraformClusterIdentity
	if err := reader.Get(ctx, client.ObjectKey{Name: ref.Name}, &id); apierrors.IsNotFound(err) {
		return client.ObjectKey{}, nil, &errIdentity{ReasonIdentityNotFound, fmt.Sprintf("TerraformClusterIdentity %s does not exist; no Job runs until it does.", ref.Name)}
	} else if err != nil {
		return client.ObjectKey{}, nil, fmt.Errorf("identity %s: %w", ref.Name, err)
	}
	allowed, err := allows(ctx, reader, id.Spec.AllowedNamespaces, obj.GetNamespace())
	if err != nil {
		return client.ObjectKey{}, nil, err
	}
	if !allowed {
		return client.ObjectKey{}, nil, &errIdentity{ReasonIdentityNotAllowed, fmt.Sprintf("TerraformClusterIdentity %s does not allow namespace %s (spec.allowedNamespaces); no Job runs.", ref.Name, obj.GetNamespace())}
	}
	return client.ObjectKey{Namespace: id.Spec.SecretRef.Namespace, Name: id.Spec.SecretRef.Name}, &id, nil
}

// ownForMove makes the TerraformClusterIdentity id an owner of s, the
// Secret it names, when it is not yet: clusterctl move copies an identity
// (its CRD carries clusterctl.cluster.x-k8s.io/move-hierarchy) with the
// objects its owner references lead to, and keeps both on the source, as
// for Cluster API AWS's identities. The reference is not a controller's
// and does not block the owner's deletion; deleting the identity lets
// garbage collection delete the Secret, unless another identity owns it
// too. A Secret of the object's own namespace (id nil) moves with the
// namespace and is left as it is.
func (r *Reconciler) ownForMove(ctx context.Context, s *corev1.Secret, id *infrav1.TerraformClusterIdentity) error {
	if id == nil || slices.ContainsFunc(s.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == id.UID }) {
		return nil
	}
	// Only the owner references and the resource version go in the patch
	// (an optimistic lock: a concurrent change of the owners is not lost),
	// never the data, which a Secret read from the cache lacks.
	meta := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: s.Name, Namespace: s.Namespace, ResourceVersion: s.ResourceVersion, OwnerReferences: s.OwnerReferences,
	}}
	meta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
	before := meta.DeepCopy()
	meta.OwnerReferences = append(slices.Clone(meta.OwnerReferences), metav1.OwnerReference{
		APIVersion: infrav1.GroupVersion.String(), Kind: infrav1.IdentityKindTerraformClusterIdentity, Name: id.Name, UID: id.UID,
	})
	if err := r.Client.Patch(ctx, meta, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			// The next reconcile reads the Secret as it is now.
			return nil
		}
		return fmt.Errorf("make identity %s an owner of Secret %s/%s: %w", id.Name, s.Namespace, s.Name, err)
	}
	return nil
}

// secretError is the error of reading the credentials Secret key of ref.
func secretError(err error, key client.ObjectKey, ref *infrav1.IdentityReference) error {
	if apierrors.IsNotFound(err) {
		return &errIdentity{ReasonIdentityNotFound, fmt.Sprintf("the credentials Secret %s/%s of identity %s %s does not exist; no Job runs until it does.", key.Namespace, key.Name, ref.Kind, ref.Name)}
	}
	return fmt.Errorf("credentials of identity %s %s: %w", ref.Kind, ref.Name, err)
}

// allows reports whether namespace ns may use an identity: nil allows
// none, an empty one every namespace, else those listed and those whose
// labels the selector matches. The namespace's metadata is all it reads
// (the cache holds no more of namespaces).
func allows(ctx context.Context, reader client.Reader, a *infrav1.AllowedNamespaces, ns string) (bool, error) {
	switch {
	case a == nil:
		return false, nil
	case a.List == nil && a.Selector == nil:
		return true, nil
	case slices.Contains(a.List, ns):
		return true, nil
	case a.Selector == nil:
		return false, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(a.Selector)
	if err != nil {
		return false, nil // an invalid selector selects nothing
	}
	n := &metav1.PartialObjectMetadata{}
	n.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := reader.Get(ctx, client.ObjectKey{Name: ns}, n); err != nil {
		return false, fmt.Errorf("namespace %s: %w", ns, err)
	}
	return sel.Matches(labels.Set(n.Labels)), nil
}

// createCredentials writes the per-run copy of the credentials of job,
// owned by the Job.
func (r *Reconciler) createCredentials(ctx context.Context, job *batchv1.Job, data map[string][]byte) error {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: CredentialsName(job.Name), Namespace: job.Namespace, Labels: map[string]string{infrav1.LabelManaged: "true"}},
		Data:       data,
	}
	if err := controllerutil.SetOwnerReference(job, s, r.Client.Scheme()); err != nil {
		return err
	}
	if err := r.Client.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("per-run credentials: %w", err)
	}
	return nil
}

// identityFailure is the condition an identity error sets, if err is one.
func identityFailure(err error) (reason, msg string, ok bool) {
	var e *errIdentity
	if errors.As(err, &e) {
		return e.reason, e.msg, true
	}
	return "", "", false
}

// parseIdentity reads an identity as identity() writes it, "Kind/Name";
// nil for "".
func parseIdentity(s string) *infrav1.IdentityReference {
	kind, name, ok := strings.Cut(s, "/")
	if !ok {
		return nil
	}
	return &infrav1.IdentityReference{Kind: kind, Name: name}
}
