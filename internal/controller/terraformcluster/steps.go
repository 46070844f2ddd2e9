package terraformcluster

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

// stepContext is what a step acts on: the object and the finished Job.
type stepContext struct {
	ctx context.Context
	obj Object
	job *batchv1.Job
	// paused: the object is paused (reconcilePaused).
	paused bool
}

func (approvalStarted) apply(r *Reconciler, x *stepContext) error {
	return r.approvalStarted(x.ctx, x.obj, x.job)
}
func (markApplied) apply(r *Reconciler, x *stepContext) error { return r.markApplied(x.ctx, x.obj) }
func (s publishEndpoint) apply(r *Reconciler, x *stepContext) error {
	return r.setEndpoint(x.ctx, x.obj, infrav1.APIEndpoint{Host: s.Host, Port: s.Port})
}
func (s pinDigest) apply(r *Reconciler, x *stepContext) error {
	return r.pinDigest(x.ctx, x.obj, x.job, s.Digest)
}
func (s consumeApproval) apply(r *Reconciler, x *stepContext) error {
	return r.consumeApproval(x.ctx, x.obj, s.Hash)
}
func (s openPlan) apply(r *Reconciler, x *stepContext) error   { return r.openPlan(x.ctx, x.obj, s) }
func (s finishPlan) apply(r *Reconciler, x *stepContext) error { return r.finishPlan(x.ctx, x.obj, s) }
func (s annotateJob) apply(r *Reconciler, x *stepContext) error {
	return r.annotateJob(x.ctx, x.job, s.Key, s.Value)
}
func (s announce) apply(r *Reconciler, x *stepContext) error { return r.announce(x.ctx, x.obj, s) }
func (markInterrupted) apply(r *Reconciler, x *stepContext) error {
	return r.markInterrupted(x.ctx, x.obj)
}
func (clearInterrupted) apply(r *Reconciler, x *stepContext) error {
	return r.clearInterrupted(x.ctx, x.obj)
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
		ObjectMeta:          metav1.ObjectMeta{Name: shorten(obj.GetName(), maxName-17) + "." + hex.EncodeToString(sum[:8]), Namespace: obj.GetNamespace()},
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
