package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/tfstate"
)

// The state lock. Terraform's kubernetes backend locks a state with the
// Lease lock-tfstate-default-<suffix>: spec.holderIdentity is the lock's
// ID, and the annotation app.terraform.io/lock-info its LockInfo, whose
// Who is user@hostname — in a pod, the pod's name. A runner killed while
// it held the lock (a deleted Job, a deadline, an evicted pod) leaves it
// behind, and every later run fails on it.
//
// So before a Job starts after a run that did not succeed, the manager
// looks at the lock. One held by a pod of the object's own Jobs that is
// gone or has ended is stale: the manager releases it as terraform's
// force-unlock does (an update of the Lease that keeps no holder, which
// fails if someone took the lock meanwhile) and says so in the event
// StateUnlocked. Any other holder — a person running terraform against the
// state, another tool — keeps it: no Job starts, ApplyJobSucceeded says
// StateLocked with the holder, and the manager looks again every
// lockRecheck. After a successful run nothing is looked at: a run that
// succeeded released its lock.

// lockRecheck is how often a locked state is looked at again (a Lease is
// not watched).
const lockRecheck = 30 * time.Second

// errLocked says the state is locked by a holder the manager leaves alone.
type errLocked struct{ id, msg string }

func (e *errLocked) Error() string { return e.msg }

// lockFailure says in ApplyJobSucceeded, and once per lock in a Warning
// event, that a lock keeps every Job from starting, if err is an
// *errLocked; it reports whether it was.
func (r *Reconciler) lockFailure(ctx context.Context, obj Object, err error) (bool, error) {
	var e *errLocked
	if !errors.As(err, &e) {
		return false, nil
	}
	setCondition(obj, infrav1.ConditionApplyJobSucceeded, false, infrav1.ReasonStateLocked, e.msg)
	return true, r.announce(ctx, obj, announce{Key: "locked-" + e.id, Type: corev1.EventTypeWarning, Reason: infrav1.EventStateLocked, Action: "Lock", Note: e.msg})
}

// LockName is the Lease that locks the state of the object named name.
func LockName(short, name string) string { return tfstate.LeaseName(StateSuffix(short, name)) }

// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update;delete

// checkLock looks at the state's lock before a Job starts, when the last
// run did not succeed or an apply was interrupted: it releases a stale lock of the object's own and
// returns an *errLocked for any other holder.
func (r *Reconciler) checkLock(ctx context.Context, obj Object) error {
	if run := obj.GetRunnerStatus().LastRun; !Interrupted(obj) && (run == nil || run.Succeeded) {
		// No run of the object failed since its status began: nothing of
		// its own can hold the lock, and another holder fails the Job,
		// whose failure has the next start look.
		return nil
	}
	var lease coordinationv1.Lease
	err := r.Reader.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: LockName(r.kind().Short(), obj.GetName())}, &lease)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("state lock: %w", err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		return nil
	}
	// A lock without readable info has an unknown holder: left alone.
	info, _ := tfstate.ParseLockInfo(lease.Annotations[tfstate.AnnotationLockInfo])
	holder := info.Who
	if holder == "" {
		holder = "an unknown holder"
	}
	pod, own := ownPod(obj, info.Who)
	if own {
		gone, err := r.podGone(ctx, obj.GetNamespace(), pod)
		if err != nil {
			return err
		}
		own = gone
	}
	if !own {
		return &errLocked{id: *lease.Spec.HolderIdentity, msg: fmt.Sprintf("The terraform state is locked by %s (lock %s, %s since %s), which is not a finished Job of this object; no Job starts until the lock is released (terraform force-unlock %s, or delete the Lease %s).",
			holder, *lease.Spec.HolderIdentity, info.Operation, info.Created.Format(time.RFC3339), *lease.Spec.HolderIdentity, lease.Name)}
	}
	id := *lease.Spec.HolderIdentity
	// Said before the release: once released, the Lease no longer names
	// the lock, and a retry after a release whose answer was lost (or a
	// manager killed right after it) would have nothing left to say.
	if err := r.announce(ctx, obj, announce{Key: "unlock-" + id, Type: corev1.EventTypeNormal, Reason: infrav1.EventStateUnlocked, Action: "Unlock",
		Note: fmt.Sprintf("Releasing the state lock %s (%s) that pod %s left behind; the pod has ended.", id, info.Operation, pod)}); err != nil {
		return err
	}
	lease.Spec.HolderIdentity = nil
	delete(lease.Annotations, tfstate.AnnotationLockInfo)
	// An update, not a patch: it fails if the lock changed hands since.
	if err := r.Client.Update(ctx, &lease); err != nil {
		return fmt.Errorf("release the stale state lock %s: %w", id, err)
	}
	return nil
}

// ownPod reports whether who (terraform's user@hostname) names a pod of a
// runner Job of obj, and which: <job>-<5 characters>, where a Job of obj is
// named <name>-<operation>-<5 hex digits> (buildJob).
func ownPod(obj Object, who string) (string, bool) {
	pod := who[strings.LastIndexByte(who, '@')+1:]
	rest, ok := strings.CutPrefix(pod, shorten(obj.GetName(), 40)+"-")
	if !ok {
		return pod, false
	}
	parts := strings.Split(rest, "-")
	if len(parts) != 3 || len(parts[1]) != 5 || len(parts[2]) != 5 || strings.Trim(parts[1], "0123456789abcdef") != "" {
		return pod, false
	}
	switch infrav1.Operation(parts[0]) {
	case infrav1.OperationPlan, infrav1.OperationApply, infrav1.OperationDestroy, infrav1.OperationDrift, infrav1.OperationRefresh, infrav1.OperationRestore:
		return pod, true
	}
	return pod, false
}

// podGone reports whether the pod named name is gone or has ended.
func (r *Reconciler) podGone(ctx context.Context, namespace, name string) (bool, error) {
	var pod corev1.Pod
	err := r.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &pod)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("pod %s: %w", name, err)
	}
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed, nil
}
