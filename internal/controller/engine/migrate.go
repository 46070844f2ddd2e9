package engine

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/tfstate"
)

// A state under the old suffix. Before StateSuffix, every object's state
// suffix was captf-<short>-<name>. For a name ending in -<digits>
// terraform refused it, but tofu took it, so an object named like prod-1
// that tofu applied has its state there, and StateSuffix now names
// another. Read as no state, the object would plan to create everything
// again (or, with signs of a past, stop as StateLost). Before the state
// is read, the manager moves it to the current suffix:
//
//  1. It takes the old state's lock, as terraform does (the Lease
//     lock-tfstate-default-<old suffix>); a lock someone else holds stops
//     it like any StateLocked.
//  2. It copies every Secret of the old state (chunk 0 and its parts,
//     data, labels but the suffix, annotations, owners) to the names of
//     the current suffix, or finds them copied by an earlier attempt.
//  3. It reads the copy back from the API server and checks that its
//     chunks are the old ones byte for byte; then it marks the copy's
//     chunk 0 with AnnotationStateMigratedFrom (the copy is complete).
//  4. It deletes the old Secrets (each only as read), then the lock.
//
// Each step is idempotent: a manager killed at any point takes it up
// again. A current state that is not such a copy (both suffixes hold a
// state) is never overwritten: the object stops with an error that names
// both, and a person chooses.

// migrationOwner is the holder the lock of a migration names.
const migrationOwner = "captf-manager"

// errMigrated: a state was moved; the reconcile looks again in a moment,
// when the cache shows the moved state.
var errMigrated = errors.New("state moved to the current suffix")

// oldStateSuffix is the suffix obj's state had before StateSuffix, when it
// differs from the current one and could have held a state (a valid
// label value).
func oldStateSuffix(short, name string) (string, bool) {
	old := "captf-" + short + "-" + name
	if old == StateSuffix(short, name) || len(old) > MaxLabel {
		return "", false
	}
	return old, true
}

// migrateState moves obj's state from its old suffix to the current one,
// if a state is there (see above). It returns errMigrated when it moved
// one. The cache says whether there is anything to do: for most objects
// no suffix ever changed, and for the others it costs no request.
func (r *Reconciler) migrateState(ctx context.Context, obj Object) error {
	old, ok := oldStateSuffix(r.kind().Short(), obj.GetName())
	if !ok {
		return nil
	}
	var cached corev1.SecretList
	if err := r.metadataReader().List(ctx, &cached, client.InNamespace(obj.GetNamespace()), client.MatchingLabels(tfstate.Selector(old))); err != nil {
		return fmt.Errorf("state Secrets of the old suffix: %w", err)
	}
	if len(cached.Items) == 0 {
		return nil
	}
	// No Job of the object may run on either state meanwhile.
	if err := r.noUnprocessedJob(ctx, obj); err != nil {
		return err
	}
	suffix := StateSuffix(r.kind().Short(), obj.GetName())
	unlock, err := r.lockOldState(ctx, obj.GetNamespace(), old)
	if err != nil {
		return err
	}
	olds, err := r.stateSecrets(ctx, obj.GetNamespace(), old)
	if err != nil {
		return err
	}
	news, err := r.stateSecrets(ctx, obj.GetNamespace(), suffix)
	if err != nil {
		return err
	}
	switch {
	case news.chunk0() != nil && news.chunk0().Annotations[infrav1.AnnotationStateMigratedFrom] == old && news.err == nil:
		// The copy is complete: what remains of the old state goes.
	case olds.err != nil:
		return olds.err
	case olds.chunks == nil:
		// Gone since the cache showed it.
		return unlock()
	case news.chunks != nil && !equalChunks(olds.chunks, news.chunks):
		return fmt.Errorf("the state is in two places: Secret %s (the suffix it had before names ending in -<digits> got a new one) and Secret %s; keep the right one (delete the other) and the object goes on",
			tfstate.SecretName(old), tfstate.SecretName(suffix))
	default:
		// No state under the current suffix, or only an earlier
		// attempt's copy, whole or in part (parts without chunk 0).
		if err := r.copyState(ctx, obj, olds, old, suffix); err != nil {
			return err
		}
	}
	// Parts first, chunk 0 last: what remains is still a state whose
	// copy is marked complete.
	for i := len(olds.secrets) - 1; i >= 0; i-- {
		s := &olds.secrets[i]
		if err := r.Client.Delete(ctx, s, client.Preconditions{UID: &s.UID, ResourceVersion: &s.ResourceVersion}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete Secret %s of the old state: %w", s.Name, err)
		}
	}
	if err := unlock(); err != nil {
		return err
	}
	if err := r.announce(ctx, obj, announce{Key: "state-migrated", Type: corev1.EventTypeNormal, Reason: infrav1.EventStateMigrated, Action: "Migrate",
		Note: fmt.Sprintf("The terraform state moved from Secret %s (the suffix it had before names ending in -<digits> got a new one) to %s.", tfstate.SecretName(old), tfstate.SecretName(suffix))}); err != nil {
		return err
	}
	return errMigrated
}

// storedState is what the API server holds of the state of one suffix:
// its Secrets, chunk 0 first, and its chunks (nil for no state), or why
// they make no state (a missing or duplicated chunk).
type storedState struct {
	suffix  string
	secrets []corev1.Secret
	chunks  [][]byte
	err     error
}

// chunk0 is the Secret of chunk 0, nil when there is none.
func (s storedState) chunk0() *corev1.Secret {
	if len(s.secrets) == 0 || s.secrets[0].Name != tfstate.SecretName(s.suffix) {
		return nil
	}
	return &s.secrets[0]
}

// stateSecrets reads the state of suffix from the API server.
func (r *Reconciler) stateSecrets(ctx context.Context, namespace, suffix string) (storedState, error) {
	var list corev1.SecretList
	if err := r.Reader.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels(tfstate.Selector(suffix))); err != nil {
		return storedState{}, fmt.Errorf("state Secrets: %w", err)
	}
	slices.SortFunc(list.Items, func(a, b corev1.Secret) int {
		if d := len(a.Name) - len(b.Name); d != 0 {
			return d
		}
		return strings.Compare(a.Name, b.Name)
	})
	st := storedState{suffix: suffix, secrets: list.Items}
	st.chunks, st.err = tfstate.Chunks(suffix, toState(list.Items))
	if errors.Is(st.err, tfstate.ErrNoState) {
		st.chunks, st.err = nil, nil
	}
	if st.err != nil {
		st.err = fmt.Errorf("state of suffix %s: %w", suffix, st.err)
	}
	return st, nil
}

// copyState copies the state olds of suffix old to the names of suffix
// (parts first, chunk 0 last, so that a copy cut short is no state),
// checks the copy as the API server holds it, and marks it complete.
func (r *Reconciler) copyState(ctx context.Context, obj Object, olds storedState, old, suffix string) error {
	for n := len(olds.chunks) - 1; n >= 0; n-- {
		from := olds.secrets[slices.IndexFunc(olds.secrets, func(s corev1.Secret) bool { return s.Name == tfstate.PartName(old, n) })]
		labels := maps.Clone(from.Labels)
		labels[tfstate.LabelSuffix] = suffix
		to := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: tfstate.PartName(suffix, n), Namespace: obj.GetNamespace(),
				Labels: labels, Annotations: maps.Clone(from.Annotations), OwnerReferences: from.OwnerReferences},
			Type: from.Type,
			Data: map[string][]byte{tfstate.DataKey: olds.chunks[n]},
		}
		delete(to.Annotations, infrav1.AnnotationStateMigratedFrom)
		// An earlier attempt's copy is checked below with the rest.
		if err := r.Client.Create(ctx, to); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("copy state Secret %s to %s: %w", from.Name, to.Name, err)
		}
	}
	news, err := r.stateSecrets(ctx, obj.GetNamespace(), suffix)
	if err != nil {
		return err
	}
	if news.err != nil || !equalChunks(olds.chunks, news.chunks) {
		return fmt.Errorf("the copy of state Secret %s in %s does not read back as it (%v): nothing of the old state is deleted", tfstate.SecretName(old), tfstate.SecretName(suffix), news.err)
	}
	first := news.chunk0()
	patch := client.MergeFromWithOptions(first.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if first.Annotations == nil {
		first.Annotations = map[string]string{}
	}
	first.Annotations[infrav1.AnnotationStateMigratedFrom] = old
	if err := r.Client.Patch(ctx, first, patch); err != nil {
		return fmt.Errorf("mark the moved state %s: %w", first.Name, err)
	}
	return nil
}

func equalChunks(a, b [][]byte) bool { return slices.EqualFunc(a, b, bytes.Equal) }

// lockOldState takes the lock of the state of suffix old as terraform's
// kubernetes backend does, so that no terraform or tofu writes the old
// state while it moves, and returns what releases it (deletes the Lease:
// the old suffix is used no more). A lock someone else holds is an
// *errLocked; one a migration left behind is taken over.
func (r *Reconciler) lockOldState(ctx context.Context, namespace, old string) (func() error, error) {
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return nil, err
	}
	info := tfstate.LockInfo{ID: hex.EncodeToString(id), Operation: "captf-migrate-state", Who: migrationOwner, Created: time.Now().UTC()}
	infoJSON, err := json.Marshal(info)
	if err != nil {
		return nil, err
	}
	name := tfstate.LeaseName(old)
	var lease coordinationv1.Lease
	err = r.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &lease)
	switch {
	case apierrors.IsNotFound(err):
		lease = coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: tfstate.Selector(old)}}
		lease.Annotations = map[string]string{tfstate.AnnotationLockInfo: string(infoJSON)}
		lease.Spec.HolderIdentity = &info.ID
		err = r.Client.Create(ctx, &lease)
	case err != nil:
	default:
		if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
			held, _ := tfstate.ParseLockInfo(lease.Annotations[tfstate.AnnotationLockInfo])
			if held.Who != migrationOwner {
				return nil, &errLocked{id: *h, msg: fmt.Sprintf("The terraform state under the suffix it had before (Secret %s) is locked by %s (lock %s); it moves to the current suffix once the lock is released, and no Job starts until then.",
					tfstate.SecretName(old), held.Who, *h)}
			}
		}
		if lease.Annotations == nil {
			lease.Annotations = map[string]string{}
		}
		lease.Annotations[tfstate.AnnotationLockInfo] = string(infoJSON)
		lease.Spec.HolderIdentity = &info.ID
		// An update: it fails if the lock changed hands since it was read.
		err = r.Client.Update(ctx, &lease)
	}
	if err != nil {
		return nil, fmt.Errorf("lock the state of the old suffix: %w", err)
	}
	return func() error {
		if err := r.Client.Delete(ctx, &lease, client.Preconditions{ResourceVersion: &lease.ResourceVersion}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("release the lock of the old state: %w", err)
		}
		return nil
	}, nil
}
