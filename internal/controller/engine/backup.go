package engine

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/tfstate"
)

// State backups. When the manager reads a state serial it has not backed
// up (status.stateSerial says which it did last), it copies the state,
// chunk for chunk exactly as terraform's kubernetes backend stores it,
// into the Secret captf-state-backup-<suffix>-<serial> (chunk-0), and a
// state that terraform split into several Secrets also into
// captf-state-backup-<suffix>-<serial>-part-<n> (chunk-<n>, at most 1 MiB
// each, as terraform splits them). Every backup Secret is owned by the
// object and carries clusterctl's move label, so clusterctl move carries
// it. The newest Reconciler.StateBackups serials that applies wrote are
// kept, and of those that refresh Jobs wrote (a pool's members changing
// outside any apply) only the newest, while it is newer than them: an
// autoscaled pool's refreshes never push an applied state out of reach
// of a restore. status.stateBackups lists those kept.
//
// A serial whose content differs from its backup (a restore pushed an
// older state and terraform numbered it one past it, a serial an older
// history already had) is backed up again under the same name: the
// backups follow the state's current history.
//
// Backups are not in the manager's cache (CacheOptions): they would hold
// every state several times over in its memory. They are read from the
// API server, and only when a serial is new to the manager.

// DefaultStateBackups is how many state backups each object keeps unless
// the manager's --state-backups says otherwise.
const DefaultStateBackups = 5

// MaxBackupBytes is the largest state (as the backend stores it,
// compressed) that is backed up: 8 Secrets of terraform's 1 MiB chunks.
// A larger one is reported in StateBackedUp (StateTooLarge) instead.
const MaxBackupBytes = 8 << 20

// Annotations on the first backup Secret of a serial: the SHA-256 of the
// stored chunks (a hash of compressed, lineage-bearing state: it reveals
// no value), the number of chunks, their bytes, and when the backup was
// written (a backup replaced keeps its creation time).
const (
	annotationStateSum    = tfstate.AnnotationDigests
	AnnotationStateChunks = "captf.io/state-chunks"
	annotationStateBytes  = "captf.io/state-bytes"
	annotationBackedUpAt  = "captf.io/backed-up-at"
	// annotationRefreshSerial marks the backup of a serial that a refresh
	// Job wrote (a pool's members changed), not an apply.
	annotationRefreshSerial = "captf.io/refresh-serial"
)

// labelBackupPart on a backup Secret is the index of the first chunk it
// holds; the first Secret of a serial has none.
const labelBackupPart = "captf.io/state-backup-part"

// BackupName is the first backup Secret of a state serial, and
// BackupPartName the one that holds its chunk n (n ≥ 1).
func BackupName(short, name string, serial int64) string {
	return "captf-state-backup-" + StateSuffix(short, name) + "-" + strconv.FormatInt(serial, 10)
}

func BackupPartName(short, name string, serial int64, n int) string {
	return BackupName(short, name, serial) + "-part-" + strconv.Itoa(n)
}

// ChunkKey is the data key of chunk n in a backup Secret, and its path
// under the restore Job's backup folder.
func ChunkKey(n int) string { return tfstate.ChunkKey(n) }

// backupLabels mark the backups of obj: the owner labels, the serial, and
// clusterctl's move label.
func backupLabels(k Kind, obj Object, serial int64) map[string]string {
	l := OwnerLabels(k, obj)
	l[infrav1.LabelStateBackup] = strconv.FormatInt(serial, 10)
	l[infrav1.LabelMove] = ""
	return l
}

// backup is one serial's backup: its first Secret and its parts.
type backup struct {
	first *corev1.Secret
	parts []*corev1.Secret
}

func (b backup) serial() int64 { return labelSerial(b.first) }

// chunks is how many chunks b holds.
func (b backup) chunks() int {
	n, err := strconv.Atoi(b.first.Annotations[AnnotationStateChunks])
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// partIndex is the chunk a part Secret holds, 0 when it says none.
func partIndex(s *corev1.Secret) int {
	n, _ := strconv.Atoi(s.Labels[labelBackupPart])
	return n
}

// secrets are the Secrets of b, first first.
func (b backup) secrets() []*corev1.Secret { return append([]*corev1.Secret{b.first}, b.parts...) }

// labelSerial is the serial a backup Secret's label names, -1 when it is
// not a number.
func labelSerial(s *corev1.Secret) int64 {
	n, err := strconv.ParseInt(s.Labels[infrav1.LabelStateBackup], 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// backups lists obj's state backups through reader, newest serial first.
// A part whose first Secret is gone belongs to no backup. Only their
// metadata is read: the cache (metadataReader) holds it alone.
func (r *Reconciler) backups(ctx context.Context, reader client.Reader, obj Object) ([]backup, []*corev1.Secret, error) {
	var list corev1.SecretList
	if err := reader.List(ctx, &list, client.InNamespace(obj.GetNamespace()), client.MatchingLabels(OwnerLabels(r.kind(), obj)), client.HasLabels{infrav1.LabelStateBackup}); err != nil {
		return nil, nil, fmt.Errorf("state backups: %w", err)
	}
	bySerial := map[int64]*backup{}
	var parts, stray []*corev1.Secret
	for i := range list.Items {
		s := &list.Items[i]
		n := labelSerial(s)
		switch {
		case n < 0 || !s.DeletionTimestamp.IsZero():
		case s.Labels[labelBackupPart] == "" && s.Name == BackupName(r.kind().Short(), obj.GetName(), n):
			bySerial[n] = &backup{first: s}
		default:
			parts = append(parts, s)
		}
	}
	for _, p := range parts {
		if b := bySerial[labelSerial(p)]; b != nil && partIndex(p) >= 1 && partIndex(p) < b.chunks() && p.Name == BackupPartName(r.kind().Short(), obj.GetName(), b.serial(), partIndex(p)) {
			b.parts = append(b.parts, p)
		} else {
			// Its backup is gone, or was replaced by one of fewer chunks.
			stray = append(stray, p)
		}
	}
	out := make([]backup, 0, len(bySerial))
	for _, b := range bySerial {
		slices.SortFunc(b.parts, func(x, y *corev1.Secret) int {
			return cmp.Compare(x.Labels[labelBackupPart], y.Labels[labelBackupPart])
		})
		out = append(out, *b)
	}
	slices.SortFunc(out, func(x, y backup) int { return cmp.Compare(y.serial(), x.serial()) })
	return out, stray, nil
}

// backupStatus is status.stateBackups for the listed backups.
func backupStatus(list []backup) []infrav1.StateBackup {
	var out []infrav1.StateBackup
	for _, b := range list {
		size, _ := strconv.ParseInt(b.first.Annotations[annotationStateBytes], 10, 64)
		at := b.first.CreationTimestamp
		if t, err := time.Parse(time.RFC3339, b.first.Annotations[annotationBackedUpAt]); err == nil {
			at = metav1.NewTime(t)
		}
		out = append(out, infrav1.StateBackup{Serial: b.serial(), Time: at, Bytes: size})
	}
	return out
}

// publishState runs what the kind publishes from the state st, which has
// its chunks; nothing when it is gone.
func (r *Reconciler) publishState(ctx context.Context, obj Object, st *stateRead) error {
	if st == nil {
		return nil
	}
	x := &StepContext{Obj: obj}
	for _, step := range r.kind().FromState(obj, st.output) {
		if err := step.Apply(ctx, r, x); err != nil {
			return err
		}
	}
	return nil
}

// settleState publishes what the kind reads from st, obj's state, when
// its serial is new (status.stateSerial is another), and backs it up
// (syncBackups), which records the serial as seen: a publishing step that
// failed is tried again. It returns st, with its chunks when they were
// needed.
func (r *Reconciler) settleState(ctx context.Context, obj Object, st *stateRead) (*stateRead, error) {
	if last := obj.GetRunnerStatus().StateSerial; st != nil && (last == nil || *last != st.Serial) {
		var err error
		if st, err = r.withChunks(ctx, obj, st); err != nil {
			return nil, err
		}
		if err := r.publishState(ctx, obj, st); err != nil {
			return nil, err
		}
	}
	return st, r.syncBackups(ctx, obj, st)
}

// syncBackups backs up the state st (read through the cache) when the
// manager has not backed up its serial yet, prunes the backups past the
// limit, and records them in status.stateBackups, status.stateSerial and
// the condition StateBackedUp.
func (r *Reconciler) syncBackups(ctx context.Context, obj Object, st *stateRead) error {
	if r.StateBackups < 0 {
		setCondition(obj, infrav1.ConditionStateBackedUp, unknown, infrav1.ReasonBackupsOff, "The manager keeps no state backups (--state-backups=0).")
		if st != nil {
			// Read: what the kind publishes from it is not read again
			// until the next serial.
			obj.GetRunnerStatus().StateSerial = ptr.To(st.Serial)
		}
		return nil
	}
	if st == nil {
		return nil
	}
	if last := obj.GetRunnerStatus().StateSerial; last != nil && *last == st.Serial {
		return nil
	}
	if tfstate.Size(st.chunks) > MaxBackupBytes {
		msg := fmt.Sprintf("State serial %d has no backup: it takes %d bytes, more than the %d a backup holds. A restore needs an older backup, or a copy of the state taken by hand.", st.Serial, tfstate.Size(st.chunks), MaxBackupBytes)
		setCondition(obj, infrav1.ConditionStateBackedUp, false, infrav1.ReasonStateTooLarge, msg)
		obj.GetRunnerStatus().StateSerial = ptr.To(st.Serial)
		return r.announce(ctx, obj, announce{Key: "too-large-" + strconv.FormatInt(st.Serial, 10), Type: corev1.EventTypeWarning, Reason: infrav1.EventStateTooLarge, Action: "Backup", Note: msg})
	}
	fresh := st
	if len(st.chunks) > 1 {
		// Read again from the API server, so that every chunk is of one
		// write; one Secret is one write whatever the cache's age.
		var err error
		if fresh, err = r.readState(ctx, r.Reader, obj); err != nil || fresh == nil {
			// Gone or unreadable since the cache saw it: the next read
			// decides.
			return err
		}
	}
	// The cache's list: one that lags behind a backup written a moment
	// ago finds it when the create says it exists (writeBackup), keeps a
	// backup past the limit until the next serial prunes it, or deletes
	// one already gone.
	list, stray, err := r.backups(ctx, r.metadataReader(), obj)
	if err != nil {
		return err
	}
	refreshed, err := r.refreshedSinceRun(ctx, obj)
	if err != nil {
		return err
	}
	if list, stray, err = r.writeBackup(ctx, obj, fresh, refreshed, list, stray); err != nil {
		backupsFailedTotal.WithLabelValues(r.kind().Name()).Inc()
		setCondition(obj, infrav1.ConditionStateBackedUp, false, infrav1.ReasonBackupFailed, fmt.Sprintf("The backup of state serial %d could not be written: %v", fresh.Serial, err))
		return err
	}
	keep := r.StateBackups
	if keep == 0 {
		keep = DefaultStateBackups
	}
	kept, dropped := keptBackups(list, keep)
	var drop []*corev1.Secret
	for _, b := range dropped {
		drop = append(drop, b.secrets()...)
	}
	for _, s := range append(drop, stray...) {
		if err := r.Client.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("prune state backup %s: %w", s.Name, err)
		}
	}
	obj.GetRunnerStatus().StateBackups = backupStatus(kept)
	obj.GetRunnerStatus().StateSerial = ptr.To(fresh.Serial)
	setCondition(obj, infrav1.ConditionStateBackedUp, true, infrav1.ReasonBackedUp, fmt.Sprintf("State serial %d is backed up in Secret %s.", fresh.Serial, BackupName(r.kind().Short(), obj.GetName(), fresh.Serial)))
	return nil
}

// keptBackups splits list (newest first) into the backups kept and those
// dropped: the newest keep of those applies wrote, and the newest of
// those refresh Jobs wrote while it is newer than every one of them.
func keptBackups(list []backup, keep int) (kept, dropped []backup) {
	applied := 0
	for i, b := range list {
		switch {
		case !b.refresh() && applied < keep:
			applied++
			kept = append(kept, b)
		case b.refresh() && i == 0:
			kept = append(kept, b)
		default:
			dropped = append(dropped, b)
		}
	}
	return kept, dropped
}

// refresh says whether b is the backup of a serial a refresh Job wrote.
func (b backup) refresh() bool { return b.first.Annotations[annotationRefreshSerial] == "true" }

// refreshedSinceRun says whether obj's last Job to finish was a refresh
// Job: a new serial read now is one a refresh wrote.
func (r *Reconciler) refreshedSinceRun(ctx context.Context, obj Object) (bool, error) {
	s, err := r.kind().Refresh(ctx, r.Client, obj)
	if err != nil || s.Interval <= 0 || s.Last == nil {
		return false, err
	}
	run := obj.GetRunnerStatus().LastRun
	return run == nil || run.FinishedAt == nil || run.FinishedAt.Before(s.Last), nil
}

// writeBackup writes the backup of st unless list holds one of its serial
// with the same content: the parts first, the first Secret (which names
// the content) last, so a backup whose first Secret is there is whole. It
// returns list and stray as they are then, newest first: a backup of the
// same serial replaced, and its parts past the new count stray.
func (r *Reconciler) writeBackup(ctx context.Context, obj Object, st *stateRead, refreshed bool, list []backup, stray []*corev1.Secret) ([]backup, []*corev1.Secret, error) {
	chunks := st.chunks
	sum := tfstate.Digests(chunks)
	at := slices.IndexFunc(list, func(b backup) bool { return b.serial() == st.Serial })
	if at >= 0 {
		if b := list[at]; b.first.Annotations[annotationStateSum] == sum && len(b.parts) == len(chunks)-1 {
			return list, stray, nil
		}
		for _, p := range list[at].parts {
			if partIndex(p) >= len(chunks) {
				stray = append(stray, p)
			}
		}
		list = slices.Delete(list, at, at+1)
	}
	written := make([]*corev1.Secret, len(chunks))
	for n := len(chunks) - 1; n >= 0; n-- {
		name := BackupName(r.kind().Short(), obj.GetName(), st.Serial)
		labels := backupLabels(r.kind(), obj, st.Serial)
		annotations := map[string]string{}
		if n > 0 {
			name = BackupPartName(r.kind().Short(), obj.GetName(), st.Serial, n)
			labels[labelBackupPart] = fmt.Sprintf("%06d", n)
		} else {
			annotations[annotationStateSum] = sum
			annotations[AnnotationStateChunks] = strconv.Itoa(len(chunks))
			annotations[annotationStateBytes] = strconv.FormatInt(tfstate.Size(st.chunks), 10)
			annotations[annotationBackedUpAt] = time.Now().UTC().Format(time.RFC3339)
			if refreshed {
				annotations[annotationRefreshSerial] = "true"
			}
		}
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: obj.GetNamespace(), Labels: labels, Annotations: annotations},
			Data: map[string][]byte{ChunkKey(n): chunks[n]}}
		if err := controllerutil.SetOwnerReference(obj, s, r.Client.Scheme()); err != nil {
			return nil, nil, err
		}
		err := r.Client.Create(ctx, s)
		if apierrors.IsAlreadyExists(err) {
			// Another history's serial of the same number: replaced.
			var old corev1.Secret
			if err = r.Reader.Get(ctx, client.ObjectKeyFromObject(s), &old); err == nil {
				s.ResourceVersion = old.ResourceVersion
				err = r.Client.Update(ctx, s)
			}
		}
		if err != nil {
			return nil, nil, fmt.Errorf("state backup %s: %w", name, err)
		}
		written[n] = s
	}
	list = append(list, backup{first: written[0], parts: written[1:]})
	slices.SortFunc(list, func(x, y backup) int { return cmp.Compare(y.serial(), x.serial()) })
	return list, stray, nil
}
