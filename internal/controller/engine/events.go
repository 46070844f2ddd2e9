package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/captf/api/v1alpha1"
)

// Step is one consequence of an outcome, carried out by the reconcile.
// Each is idempotent: done twice, it changes nothing the second time. A
// kind adds its own (Kind.Applied) to publish what the contract wants
// outside the status.
type Step interface {
	Apply(ctx context.Context, r *Reconciler, x *StepContext) error
}

// StepContext is what a step acts on: the object and the finished Job.
type StepContext struct {
	Obj Object
	Job *batchv1.Job
	// Paused: the object is paused (reconcilePaused).
	Paused bool
}

// announce emits an event once: its name derives from Key, so emitting it
// again finds it there.
type announce struct {
	Key, Type, Reason, Action, Note string
	// Related names the Job the event is about, if any.
	Related string
}

func (s announce) Apply(ctx context.Context, r *Reconciler, x *StepContext) error {
	return r.announce(ctx, x.Obj, s)
}

// eventSource is the reporting controller of the manager's events.
const eventSource = "captf-manager"

// maxNote is the longest note the API server takes in an event.
const maxNote = 1024

// announce emits an event about obj exactly once: the event's name derives
// from the object, the reason and the key, so a reconcile that runs again
// after a failed step finds it there instead of emitting it twice.
func (r *Reconciler) announce(ctx context.Context, obj Object, a announce) error {
	sum := sha256.Sum256([]byte(a.Reason + "\n" + a.Key))
	instance, _ := os.Hostname()
	if instance == "" || len(instance) > 128 {
		instance = eventSource
	}
	note := a.Note
	if len(note) > maxNote {
		note = note[:maxNote-3] + "..."
	}
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: shorten(obj.GetName(), MaxName-17) + "." + hex.EncodeToString(sum[:8]), Namespace: obj.GetNamespace()},
		EventTime:           metav1.NewMicroTime(time.Now()),
		ReportingController: eventSource, ReportingInstance: instance,
		Action: a.Action, Reason: a.Reason, Type: a.Type, Note: note,
		Regarding: corev1.ObjectReference{
			APIVersion: infrav1.GroupVersion.String(), Kind: r.kind().Name(),
			Namespace: obj.GetNamespace(), Name: obj.GetName(), UID: obj.GetUID(),
		},
	}
	if a.Related != "" {
		ev.Related = &corev1.ObjectReference{APIVersion: "batch/v1", Kind: "Job", Namespace: obj.GetNamespace(), Name: a.Related}
	}
	if err := r.Client.Create(ctx, ev); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}
