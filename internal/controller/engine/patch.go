package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// scope is one reconcile of one object: the object as the reconcile
// changes it, and its status as last written, so that every status write
// sends only what changed (and no resourceVersion: the status is this
// manager's alone, and a concurrent write of the object's metadata or
// spec, such as Cluster API setting an owner reference, must not fail it).
type scope struct {
	obj Object
	// written is the object as its status was last written.
	written Object
	// paused: the object is paused; steps that wait for the pause to be
	// lifted are left out (reconcilePaused).
	paused bool
	// processed names the Jobs this reconcile marked processed, which the
	// cache may not show yet (releaseMove).
	processed map[string]bool
}

func newScope(obj Object) *scope {
	return &scope{obj: obj, written: obj.DeepCopyObject().(Object)}
}

// patchStatus writes what changed in the status since it was last
// written, as a merge patch of the status alone.
func (r *Reconciler) patchStatus(ctx context.Context, s *scope) error {
	base := s.obj.DeepCopyObject().(Object)
	r.kind().CopyStatus(base, s.written)
	if equality.Semantic.DeepEqual(base, s.obj) {
		// An idle re-check changes nothing: an empty patch would still be
		// a request per object per re-check.
		return nil
	}
	written := s.obj.DeepCopyObject().(Object)
	if err := r.Client.Status().Patch(ctx, s.obj, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	r.kind().CopyStatus(s.obj, written)
	s.written = written
	return nil
}

// removeAnnotation removes the annotation key from obj, in a merge patch
// that names that key alone. A patch made by diffing would, when key is
// the last annotation obj was read with, clear the whole field, and with it
// any annotation written since, such as an approval.
func (r *Reconciler) removeAnnotation(ctx context.Context, obj Object, key string) error {
	if _, ok := obj.GetAnnotations()[key]; !ok {
		return nil
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: nil}}})
	if err != nil {
		return err
	}
	status := obj.DeepCopyObject().(Object)
	if err := r.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, body)); err != nil {
		return fmt.Errorf("remove %s: %w", key, err)
	}
	r.kind().CopyStatus(obj, status)
	return nil
}

// PatchObject changes obj as change does, in a merge patch of the object
// (not its status, which the reconcile writes at its end). The patch
// answers with the stored status; the reconcile's own stays.
func (r *Reconciler) PatchObject(ctx context.Context, obj Object, change func(Object)) error {
	patch := client.MergeFrom(obj.DeepCopyObject().(Object))
	change(obj)
	status := obj.DeepCopyObject().(Object)
	if err := r.Client.Patch(ctx, obj, patch); err != nil {
		return err
	}
	r.kind().CopyStatus(obj, status)
	return nil
}

func nowTime() metav1.Time { return metav1.Now() }
