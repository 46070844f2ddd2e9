package engine

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/render"
	"github.com/captf/captf/internal/runner"
)

// Restore. captf.io/restore-state=<serial> on the object asks for the
// backup of that serial to be pushed back into its terraform state. A
// restore Job runs it (never gated: a restore changes no infrastructure)
// with a backend-only root module and the backup's chunks, once per serial:
// status.lastRestoredSerial records the serial as the Job starts, so a
// restore that failed is not retried until the annotation is removed (which
// clears the record) and set again. After a successful restore the manager
// removes the annotation; what the restored state records then decides what
// is due, as after any apply.

// restoreRequest is the serial captf.io/restore-state asks for; ok is false
// when there is none to run (no annotation, or that serial ran already).
// A value that is not a serial is reported in StateRestored.
func restoreRequest(obj Object) (serial int64, ok bool) {
	v, set := obj.GetAnnotations()[infrav1.AnnotationRestoreState]
	if !set {
		if obj.GetRunnerStatus().LastRestoredSerial != nil {
			if c := condition(obj, infrav1.ConditionStateRestored); c != nil && c.Status == metav1.ConditionFalse {
				// Removed after a failure: the same serial may run again.
				obj.GetRunnerStatus().LastRestoredSerial = nil
			}
		}
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		setCondition(obj, infrav1.ConditionStateRestored, false, infrav1.ReasonBackupNotFound,
			fmt.Sprintf("%s=%q is not a state serial; status.stateBackups lists the serials kept.", infrav1.AnnotationRestoreState, v))
		return 0, false
	}
	if last := obj.GetRunnerStatus().LastRestoredSerial; last != nil && *last == n {
		return 0, false
	}
	return n, true
}

// startRestore starts the restore Job of serial and reports true, or says
// in StateRestored and an event that no backup of it exists.
func (r *Reconciler) startRestore(ctx context.Context, obj Object, serial int64) (bool, error) {
	list, _, err := r.backups(ctx, r.Reader, obj)
	if err != nil {
		return false, err
	}
	at := slices.IndexFunc(list, func(b backup) bool { return b.serial() == serial })
	if at < 0 || len(list[at].parts) != list[at].chunks()-1 {
		msg := fmt.Sprintf("No backup of state serial %d: Secret %s does not exist or lacks a part. status.stateBackups lists the serials kept.", serial, BackupName(r.kind().Short(), obj.GetName(), serial))
		setCondition(obj, infrav1.ConditionStateRestored, false, infrav1.ReasonBackupNotFound, msg)
		return false, r.announce(ctx, obj, announce{Key: "no-backup-" + strconv.FormatInt(serial, 10), Type: corev1.EventTypeWarning, Reason: infrav1.EventBackupNotFound, Action: "Restore", Note: msg})
	}
	mainTF, err := render.BackendRoot(obj.GetNamespace(), StateSuffix(r.kind().Short(), obj.GetName()))
	if err != nil {
		return false, err
	}
	root := &render.Root{MainTF: mainTF, Vars: []byte("{}")}
	if err := r.startJob(ctx, obj, root, jobRequest{op: infrav1.OperationRestore, backup: &list[at]}); err != nil {
		return false, err
	}
	obj.GetRunnerStatus().LastRestoredSerial = ptr.To(serial)
	return true, nil
}

// restoreDone removes captf.io/restore-state after a successful restore,
// if it still names the serial restored.
type restoreDone struct{ Serial int64 }

func (s restoreDone) Apply(ctx context.Context, r *Reconciler, x *StepContext) error {
	if x.Obj.GetAnnotations()[infrav1.AnnotationRestoreState] != strconv.FormatInt(s.Serial, 10) {
		return nil
	}
	return r.removeAnnotation(ctx, x.Obj, infrav1.AnnotationRestoreState)
}

// decideRestore is what a finished restore Job implies. Like a drift check
// it is not a failed apply: no backoff, and nothing becomes due.
func decideRestore(obj Object, o outcome, now metav1.Time) (Object, []Step) {
	view, run := finishRun(obj, o, now)
	st := view.GetRunnerStatus()
	st.LastRestoredSerial = ptr.To(o.RestoreSerial)
	msg := o.Msg
	run.Error = runError(o, runner.OutcomeRestored, func(m *runner.Message) bool { return m.Restored != nil })
	key := o.Job
	if run.Error != nil {
		run.Succeeded = false
		note := fmt.Sprintf("Restore %s of state serial %d failed (%s): %s. The state may be unchanged or partly written; the same serial is not tried again until %s is removed and set again.",
			o.Job, o.RestoreSerial, run.Error.Kind, run.Error.Message, infrav1.AnnotationRestoreState)
		setCondition(view, infrav1.ConditionStateRestored, false, infrav1.ReasonRestoreFailed, note)
		return view, []Step{announce{Key: key, Type: corev1.EventTypeWarning, Reason: infrav1.EventStateRestoreFailed, Action: "Restore", Related: o.Job, Note: note}}
	}
	run.Succeeded = true
	note := fmt.Sprintf("State serial %d restored by %s: the state now holds %d resources.", o.RestoreSerial, o.Job, msg.Restored.Resources)
	setCondition(view, infrav1.ConditionStateRestored, true, infrav1.ReasonRestored, note)
	// The state holds other content now, under a serial the backups may
	// already know: the next read backs it up again if it differs.
	st.StateSerial = nil
	return view, []Step{
		announce{Key: key, Type: corev1.EventTypeNormal, Reason: infrav1.EventStateRestored, Action: "Restore", Related: o.Job, Note: note},
		restoreDone{Serial: o.RestoreSerial},
		// The push wrote the state Secrets anew, without the object's
		// owner reference.
		ownState{},
	}
}

// withBackup adds the chunks of a state backup to a restore Job's inputs,
// as backup/chunk-<n> beside the per-run files, and records its serial.
func withBackup(job *batchv1.Job, b *backup) {
	var chunks []corev1.VolumeProjection
	for n, s := range b.secrets() {
		key := ChunkKey(n)
		chunks = append(chunks, corev1.VolumeProjection{Secret: &corev1.SecretProjection{
			LocalObjectReference: corev1.LocalObjectReference{Name: s.Name},
			Items:                []corev1.KeyToPath{{Key: key, Path: path.Join(runner.BackupDir, key)}},
		}})
	}
	projectInputs(job, chunks...)
	job.Annotations[annotationRestoreSerial] = strconv.FormatInt(b.serial(), 10)
	if d := b.first.Annotations[annotationStateSum]; d != "" {
		// The runner checks each chunk against its digest before it
		// pushes anything, and names a chunk that differs.
		c := &job.Spec.Template.Spec.Containers[0]
		c.Command = append(c.Command, "--backup-digests="+d)
	}
}
