package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	infrav1 "github.com/captf/captf/api/v1alpha1"
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
		r.forget(s.obj)
		return fmt.Errorf("status: %w", err)
	}
	r.wrote(s.obj)
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
		r.forget(obj)
		return fmt.Errorf("remove %s: %w", key, err)
	}
	r.wrote(obj)
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
		r.forget(obj)
		return err
	}
	r.wrote(obj)
	r.kind().CopyStatus(obj, status)
	return nil
}

// Every write of the manager's own to an object of the kind or to one of
// its TerraformPlans comes back as a watch event, which would cost a
// reconcile (and its read of the object) that has nothing to do: the
// reconcile that wrote went on with what it wrote. The reconciler keeps,
// per object, the resourceVersions its last few writes answered with (a
// reconcile writes an object up to three times before the first echo
// arrives), and the watches let such an update through only when it
// carries more than that write could have made (echoes).

// keptWrites is how many of an object's last writes are kept.
const keptWrites = 4

// writeKey names an object the manager wrote: its Go type and its key.
type writeKey struct {
	kind string
	key  types.NamespacedName
}

func writeKeyOf(obj client.Object) writeKey {
	return writeKey{fmt.Sprintf("%T", obj), client.ObjectKeyFromObject(obj)}
}

// ownWrites are the resourceVersions of an object's last writes.
type ownWrites struct {
	mu  sync.Mutex
	rvs [keptWrites]string
	// next is where the next one goes.
	next int
	// last is what the last write of an object of the kind answered with
	// (without managed fields), until the cache shows it (readObject).
	last Object
	// read is the resourceVersion of readObject's last read of the object
	// from the API server: it holds every write made before it, the
	// manager's too (those of a process before a restart, or one that
	// failed on its way back but landed), so a cache copy at least as new
	// holds them as well (caughtUp).
	read string
}

// wrote records the resourceVersion a write of obj answered with, and
// for an object of the kind the object itself.
func (r *Reconciler) wrote(obj client.Object) {
	v, _ := r.written.LoadOrStore(writeKeyOf(obj), &ownWrites{})
	w := v.(*ownWrites)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rvs[w.next] = obj.GetResourceVersion()
	w.next = (w.next + 1) % keptWrites
	w.last = nil
	if o, ok := obj.(Object); ok {
		w.last = o.DeepCopyObject().(Object)
		w.last.SetManagedFields(nil)
	}
}

// lastWritten is a copy of what the manager's last write of the object
// key answered with, nil when none is kept. seen says the cache shows it
// now: it is no longer kept.
func (r *Reconciler) lastWritten(obj Object, seen bool) Object {
	var last Object
	r.wroteAs(obj, func(w *ownWrites) bool {
		last = w.last
		if seen {
			w.last = nil
		}
		return true
	})
	if last == nil || seen {
		return nil
	}
	return last.DeepCopyObject().(Object)
}

// forget drops what was recorded of obj's writes, after a write of it
// failed: one that failed on its way back may have landed, and until a
// write is recorded again the object is read from the API server.
func (r *Reconciler) forget(obj client.Object) {
	r.written.Delete(writeKeyOf(obj))
}

// caughtUp reports whether obj is at least as new as what the manager's
// last write of it answered with, and as its last read of it from the API
// server, so that it holds that write. The
// resourceVersions of one resource's objects compare as integers (the API
// server's comparable resource versions); one that does not parse is not
// taken as caught up.
func (r *Reconciler) caughtUp(obj client.Object) bool {
	return r.wroteAs(obj, func(w *ownWrites) bool {
		// As new as the last write and the last read, of those recorded.
		floors := slices.DeleteFunc([]string{w.rvs[(w.next+keptWrites-1)%keptWrites], w.read}, func(rv string) bool { return rv == "" })
		for _, rv := range floors {
			if c, err := resourceversion.CompareResourceVersion(obj.GetResourceVersion(), rv); err != nil || c < 0 {
				return false
			}
		}
		return len(floors) > 0
	})
}

// readFromAPI records the resourceVersion of a read of obj from the API
// server (ownWrites.read).
func (r *Reconciler) readFromAPI(obj client.Object) {
	v, _ := r.written.LoadOrStore(writeKeyOf(obj), &ownWrites{})
	w := v.(*ownWrites)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.read = obj.GetResourceVersion()
}

// ownWrite reports whether obj is what one of the manager's last writes
// of it answered with.
func (r *Reconciler) ownWrite(obj client.Object) bool {
	return r.wroteAs(obj, func(w *ownWrites) bool { return slices.Contains(w.rvs[:], obj.GetResourceVersion()) })
}

// wroteAs asks is of what was recorded of obj's writes; false when none
// was.
func (r *Reconciler) wroteAs(obj client.Object, is func(*ownWrites) bool) bool {
	v, ok := r.written.Load(writeKeyOf(obj))
	if !ok {
		return false
	}
	w := v.(*ownWrites)
	w.mu.Lock()
	defer w.mu.Unlock()
	return is(w)
}

// readObject reads the object a reconcile starts from: from the cache
// when the cache has caught up with the manager's last write of it (it
// shows that write, or a later one of someone else's), so that nothing
// the manager wrote is missing from it. While the cache is behind that
// write, the object is what the write answered with: the object as the
// API server held it then, which the cache will show next (a Job that
// ends within moments of its start brings a reconcile before the echo of
// the status written at the start). A write of someone else's that the
// cache does not show yet brings its own event, and with it a reconcile
// that reads it. Nothing is recorded of an object after the manager
// started, or after a write of it failed: it is read from the API server
// once, and the cache's copy is taken from then on once it is at least as
// new as that read (which holds every write made before it).
func (r *Reconciler) readObject(ctx context.Context, key types.NamespacedName) (Object, error) {
	obj := r.kind().New()
	if err := r.Client.Get(ctx, key, obj); err == nil {
		caught := r.caughtUp(obj)
		if last := r.lastWritten(obj, caught); last != nil {
			return last, nil
		}
		if caught {
			return obj, nil
		}
	}
	obj = r.kind().New()
	if err := r.Reader.Get(ctx, key, obj); err != nil {
		return obj, err
	}
	r.readFromAPI(obj)
	return obj, nil
}

// echoes lets through every event but an update that is the echo of the
// manager's own write: the new object is what that write answered with,
// and it differs from the old one only in status, in what the API server
// keeps (resourceVersion, managedFields) and in what the manager alone
// writes outside status (own: the block-move annotation of an object, the
// phase label of a plan). An update that also carries a change of someone
// else's — a relist of the watch may fold several writes into one event —
// differs in more and goes through. The create of a plan the manager made
// is its echo too. What was recorded of an object goes with it.
func (r *Reconciler) echoes() predicate.Funcs {
	return predicate.Funcs{
		DeleteFunc: func(e event.DeleteEvent) bool {
			r.written.Delete(writeKeyOf(e.Object))
			return true
		},
		CreateFunc: func(e event.CreateEvent) bool {
			_, plan := e.Object.(*infrav1.TerraformPlan)
			return !plan || !r.ownWrite(e.Object)
		},
		UpdateFunc: func(e event.UpdateEvent) bool {
			if !r.ownWrite(e.ObjectNew) {
				return true
			}
			return !equality.Semantic.DeepEqual(r.withoutOwn(e.ObjectOld), r.withoutOwn(e.ObjectNew))
		},
	}
}

// withoutOwn is a copy of obj without what echoes leaves out of the
// comparison.
func (r *Reconciler) withoutOwn(obj client.Object) client.Object {
	c := obj.DeepCopyObject().(client.Object)
	c.SetResourceVersion("")
	c.SetManagedFields(nil)
	switch c := c.(type) {
	case *infrav1.TerraformPlan:
		c.Status = infrav1.TerraformPlanStatus{}
		delete(c.Labels, infrav1.LabelPlanPhase)
	case Object:
		r.kind().CopyStatus(c, r.kind().New())
		delete(c.GetAnnotations(), AnnotationBlockMove)
	}
	return c
}

func nowTime() metav1.Time { return metav1.Now() }
