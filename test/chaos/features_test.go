package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/tfstate"
)

// The flows of the features that came after the approval flows (issue
// 23, section 6): the destructive-plan guard, drift remediation, state
// backups, restore, a stale state lock, and a delete under Retain. Each
// has, besides the invariants every flow keeps, one of its own.
const (
	invGuardBlocked = "one-DestructivePlanBlocked-per-blocked-apply"
	invDriftUndone  = "drift-undone-once"
	invBackup       = "backup-of-the-new-serial"
	invRestore      = "restore-once-exact"
	invStaleLock    = "stale-lock-released-once"
	invRetain       = "retain-keeps-state"
)

func init() {
	invariants = append(invariants, invGuardBlocked, invDriftUndone, invBackup, invRestore, invStaleLock, invRetain)
	flows = append(flows, featureFlows...)
}

// automaticApplied creates the object under Automatic and waits for its
// first apply and the backup of its serial.
func automaticApplied(r *run, mutate ...func(*infrav1.TerraformCluster)) error {
	if err := r.create(infrav1.ApplyAutomatic, mutate...); err != nil {
		return err
	}
	tc, err := r.wait("first apply backed up", func(tc *infrav1.TerraformCluster) bool { return ready(tc) && backedUpSerial(tc) >= 0 })
	if err == nil {
		r.serials = append(r.serials, backedUpSerial(tc))
	}
	return err
}

// grown changes size to large and waits until that is applied and a
// serial newer than the run's last one is backed up.
func (r *run) grown(what string) (*infrav1.TerraformCluster, error) {
	if err := r.setVars(map[string]string{"size": `"large"`}); err != nil {
		return nil, err
	}
	return r.wait(what, func(tc *infrav1.TerraformCluster) bool {
		return applied(tc) && backedUpSerial(tc) > r.serials[len(r.serials)-1]
	})
}

var featureFlows = []*flow{
	{
		// Under Automatic a replace is stopped by the guard, waits as a
		// TerraformPlan, and applies once approved.
		name: "guard-destructive",
		setup: func(r *run) error {
			return automaticApplied(r, func(tc *infrav1.TerraformCluster) {
				// Every Job is kept: the check reads the blocked one's exit.
				tc.Spec.Jobs.SuccessfulJobsHistoryLimit = ptr.To(int32(100))
				tc.Spec.Jobs.FailedJobsHistoryLimit = ptr.To(int32(100))
			})
		},
		act: func(r *run) error {
			if err := r.setVars(map[string]string{"mode": `"0600"`}); err != nil {
				return err
			}
			r.planned()
			tc, err := r.wait("the destructive plan awaits approval", waiting(infrav1.ReasonPlanAwaitingApproval, ""))
			if err != nil {
				return err
			}
			if tc.Status.Plan.Reason != infrav1.ReasonDestructive {
				return fmt.Errorf("the plan that waits has reason %q, not %s", tc.Status.Plan.Reason, infrav1.ReasonDestructive)
			}
			if err := r.approveWith(infrav1.AnnotationApproveDestructivePlan, tc.Status.Plan.PlanHash); err != nil {
				return err
			}
			_, err = r.wait("the approved replace applied", applied)
			return err
		},
		phases:  map[infrav1.PlanPhase]int{infrav1.PlanApplied: 1},
		webhook: true,
		drift:   true,
		check: func(r *run) []violation {
			var out []violation
			jobs, _, _ := r.obs.snapshot()
			blocked := 0
			for _, j := range jobs {
				if j.operation == string(infrav1.OperationApply) && j.guard && j.finished != 0 && r.exitCode(j.name) == exitPlanChanged {
					blocked++
				}
			}
			if blocked == 0 {
				out = append(out, violation{invGuardBlocked, "no guarded apply was stopped: the replace went another way"})
			}
			if n := r.events(infrav1.EventDestructivePlanBlocked); n != blocked {
				out = append(out, violation{invGuardBlocked, fmt.Sprintf("%d DestructivePlanBlocked events for %d blocked apply Job(s)", n, blocked)})
			}
			if m := r.fileMode("b.txt"); m != 0o600 {
				out = append(out, violation{invGuardBlocked, fmt.Sprintf("b.txt has mode %o after the approved replace, want 600", m)})
			}
			return out
		},
	},
	{
		// Drift found under Remediate and Automatic is undone by a guarded
		// apply. Checks are an hour apart but while the edit is looked
		// for: one check finds it, the next would come 10 s after it.
		name: "drift-remediate",
		setup: func(r *run) error {
			return automaticApplied(r, func(tc *infrav1.TerraformCluster) {
				tc.Spec.Drift = infrav1.DriftSpec{IntervalSeconds: ptr.To(int32(3600)), Action: infrav1.DriftActionRemediate}
			})
		},
		act: func(r *run) error {
			if err := os.WriteFile(r.file("a.txt"), []byte("edited"), 0o644); err != nil {
				return err
			}
			if _, err := r.patch(`{"spec":{"drift":{"intervalSeconds":10}}}`); err != nil {
				return err
			}
			_, err := r.wait("the drift undone", func(tc *infrav1.TerraformCluster) bool {
				c := condition(tc, infrav1.ConditionDriftDetected)
				return applied(tc) && c != nil && c.Reason == infrav1.ReasonNoDrift && strings.HasPrefix(c.Message, "Apply ")
			})
			if err != nil {
				return err
			}
			_, err = r.patch(`{"spec":{"drift":{"intervalSeconds":3600}}}`)
			return err
		},
		phases: map[infrav1.PlanPhase]int{},
		drift:  true,
		check: func(r *run) []violation {
			var out []violation
			if b, err := os.ReadFile(r.file("a.txt")); err != nil || string(b) != "one" {
				out = append(out, violation{invDriftUndone, fmt.Sprintf("a.txt was not brought back (%v)", err)})
			}
			if n := r.events(infrav1.EventDriftDetected); n != 1 {
				out = append(out, violation{invDriftUndone, fmt.Sprintf("%d DriftDetected events for one edit", n)})
			}
			return out
		},
	},
	{
		// An apply makes a new serial, which is backed up chunk for chunk.
		name:  "backup-serial",
		setup: func(r *run) error { return automaticApplied(r) },
		act: func(r *run) error {
			_, err := r.grown("the new serial backed up")
			return err
		},
		phases: map[infrav1.PlanPhase]int{},
		check:  func(r *run) []violation { return r.checkBackups(nil) },
	},
	{
		// The first serial is pushed back over the second; the object's
		// inputs then differ from the restored state's, so an apply follows.
		name: "restore",
		setup: func(r *run) error {
			if err := automaticApplied(r); err != nil {
				return err
			}
			tc, err := r.grown("the second serial backed up")
			if err == nil {
				r.serials = append(r.serials, backedUpSerial(tc))
			}
			return err
		},
		act: func(r *run) error {
			serial := strconv.FormatInt(r.serials[0], 10)
			if _, err := r.patch(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, infrav1.AnnotationRestoreState, serial)); err != nil {
				return err
			}
			_, err := r.wait("restored, and the inputs applied on it", func(tc *infrav1.TerraformCluster) bool {
				c := condition(tc, infrav1.ConditionStateRestored)
				_, annotated := tc.Annotations[infrav1.AnnotationRestoreState]
				return c != nil && c.Reason == infrav1.ReasonRestored && !annotated && applied(tc) &&
					tc.Status.LastRun.Operation == infrav1.OperationApply
			})
			return err
		},
		phases: map[infrav1.PlanPhase]int{},
		check: func(r *run) []violation {
			return r.checkBackups(r.checkRestore())
		},
	},
	{
		// A lock that a runner pod of the object, long gone, left behind
		// fails the next apply; the manager releases it and applies.
		name: "stale-lock",
		setup: func(r *run) error {
			if err := automaticApplied(r); err != nil {
				return err
			}
			return r.lockState("@" + objectName + "-apply-0a1b2-x7k9q")
		},
		act: func(r *run) error {
			_, err := r.grown("the lock released and the change applied")
			return err
		},
		phases: map[infrav1.PlanPhase]int{},
		check: func(r *run) []violation {
			var out []violation
			var l coordinationv1.Lease
			if err := r.f.env.Client.Get(r.ctx, client.ObjectKey{Namespace: r.ns, Name: tfstate.LeaseName(r.stateSuffix())}, &l); err != nil {
				out = append(out, violation{invStaleLock, fmt.Sprintf("read the lock: %v", err)})
			} else if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
				out = append(out, violation{invStaleLock, "the state is still locked"})
			}
			if n := r.events(infrav1.EventStateUnlocked); n != 1 {
				out = append(out, violation{invStaleLock, fmt.Sprintf("%d StateUnlocked events for one stale lock", n)})
			}
			if n := r.events(infrav1.EventStateLocked); n != 0 {
				out = append(out, violation{invStaleLock, fmt.Sprintf("%d StateLocked events: the object's own stale lock was taken for someone else's", n)})
			}
			return out
		},
	},
	{
		// Deleted under deletionPolicy Retain: nothing is destroyed, the
		// state stays and is no longer the object's.
		name: "delete-retain",
		setup: func(r *run) error {
			return automaticApplied(r, func(tc *infrav1.TerraformCluster) { tc.Spec.DeletionPolicy = infrav1.DeletionRetain })
		},
		act:    deleted,
		phases: map[infrav1.PlanPhase]int{},
		check:  func(r *run) []violation { return r.checkRetained() },
	},
}

func backedUpSerial(tc *infrav1.TerraformCluster) int64 {
	if tc == nil || tc.Status.StateSerial == nil {
		return -1
	}
	if c := condition(tc, infrav1.ConditionStateBackedUp); c == nil || c.Reason != infrav1.ReasonBackedUp {
		return -1
	}
	return *tc.Status.StateSerial
}

// file is a file of the run's drift module object.
func (r *run) file(name string) string { return filepath.Join(r.f.files, r.ns, name) }

func (r *run) fileMode(name string) os.FileMode {
	info, err := os.Stat(r.file(name))
	if err != nil {
		return 0
	}
	return info.Mode().Perm()
}

// stateSecrets are the Secrets that hold the run's terraform state.
func (r *run) stateSecrets() ([]corev1.Secret, error) {
	var list corev1.SecretList
	err := r.f.env.Client.List(r.ctx, &list, client.InNamespace(r.ns), client.MatchingLabels{tfstate.LabelState: "true"})
	return list.Items, err
}

// stateSuffix is the state's secret_suffix, as its Secrets are labelled.
func (r *run) stateSuffix() string {
	secrets, _ := r.stateSecrets()
	for _, s := range secrets {
		if v := s.Labels[tfstate.LabelSuffix]; v != "" {
			return v
		}
	}
	return ""
}

// storedChunks is the state as the backend stores it.
func (r *run) storedChunks() ([][]byte, error) {
	secrets, err := r.stateSecrets()
	if err != nil {
		return nil, err
	}
	var in []tfstate.Secret
	for _, s := range secrets {
		in = append(in, tfstate.Secret{Name: s.Name, Labels: s.Labels, Annotations: s.Annotations, Data: s.Data})
	}
	return tfstate.Chunks(r.stateSuffix(), in)
}

// backupChunks is the backup of serial, chunk by chunk (nil if none).
func (r *run) backupChunks(serial int64) ([][]byte, error) {
	var list corev1.SecretList
	if err := r.f.env.Client.List(r.ctx, &list, client.InNamespace(r.ns), client.MatchingLabels{infrav1.LabelStateBackup: strconv.FormatInt(serial, 10)}); err != nil {
		return nil, err
	}
	chunks := make([][]byte, len(list.Items))
	for _, s := range list.Items {
		for k, v := range s.Data {
			var n int
			if _, err := fmt.Sscanf(k, "chunk-%d", &n); err != nil || n >= len(chunks) || chunks[n] != nil {
				return nil, fmt.Errorf("backup %s holds key %s among %d Secrets", s.Name, k, len(list.Items))
			}
			chunks[n] = v
		}
	}
	return chunks, nil
}

// checkBackups: the state's serial is backed up chunk for chunk, status
// names it first, and every serial status lists has its backup.
func (r *run) checkBackups(out []violation) []violation {
	add := func(format string, args ...any) {
		out = append(out, violation{invBackup, fmt.Sprintf(format, args...)})
	}
	tc, err := r.get()
	if err != nil || tc == nil {
		add("read the object: %v", err)
		return out
	}
	stored, err := r.storedChunks()
	if err != nil {
		add("read the state: %v", err)
		return out
	}
	meta, err := tfstate.Check(stored)
	if err != nil {
		add("the state: %v", err)
		return out
	}
	if got := backedUpSerial(tc); got != meta.Serial {
		add("the state's serial is %d, status says %d is backed up", meta.Serial, got)
	}
	if b := tc.Status.StateBackups; len(b) == 0 || b[0].Serial != meta.Serial {
		add("status.stateBackups does not start with serial %d: %+v", meta.Serial, b)
	}
	for _, b := range tc.Status.StateBackups {
		chunks, err := r.backupChunks(b.Serial)
		switch {
		case err != nil:
			add("backup of serial %d: %v", b.Serial, err)
		case len(chunks) == 0:
			add("status lists serial %d, which has no backup", b.Serial)
		case b.Serial == meta.Serial && !equalChunks(chunks, stored):
			add("the backup of serial %d differs from the state", b.Serial)
		}
	}
	return out
}

// checkRestore: one restore Job ran, one StateRestored event, and what it
// pushed is the first serial's backup but for the serial, which terraform
// numbers one past it. A restore Job whose start was cut short before its
// per-run inputs were written is dropped unrun and a new one starts: such
// a Job may come and go, but the state must not change while it exists.
func (r *run) checkRestore() []violation {
	var out []violation
	add := func(format string, args ...any) {
		out = append(out, violation{invRestore, fmt.Sprintf(format, args...)})
	}
	jobs, _, states := r.obs.snapshot()
	var ran []jobRecord
	for _, j := range jobs {
		if j.operation != string(infrav1.OperationRestore) {
			continue
		}
		if !j.dropped {
			ran = append(ran, j)
			continue
		}
		for _, w := range states {
			if w.rv > j.created && w.rv <= j.finished {
				add("the state changed while restore Job %s, dropped unfinished, existed", j.name)
			}
		}
	}
	if len(ran) != 1 {
		add("%d restore Jobs ran for one annotation", len(ran))
	}
	if n := r.events(infrav1.EventStateRestored); n != 1 {
		add("%d StateRestored events", n)
	}
	if len(ran) == 0 {
		return out
	}
	job := ran[0]
	var pushed []byte
	for _, w := range states {
		if w.rv > job.created && (job.finished == 0 || w.rv <= job.finished) && w.chunk != nil && !strings.Contains(w.name, "-part-") {
			pushed = w.chunk
			break
		}
	}
	backup, err := r.backupChunks(r.serials[0])
	if err != nil || len(backup) != 1 || pushed == nil {
		add("no single-chunk state written while the restore ran, or no backup of serial %d (%v)", r.serials[0], err)
		return out
	}
	want, err1 := stateJSON(backup)
	got, err2 := stateJSON([][]byte{pushed})
	if err1 != nil || err2 != nil {
		add("decompress: %v, %v", err1, err2)
		return out
	}
	if m, err := tfstate.ReadMeta(bytes.NewReader(got)); err != nil || m.Serial != r.serials[0]+1 {
		add("the pushed state has serial %d (%v), want %d", m.Serial, err, r.serials[0]+1)
	}
	if !bytes.Equal(withSerial(got, r.serials[0]), withSerial(want, r.serials[0])) {
		add("the pushed state differs from the backup of serial %d beyond its serial", r.serials[0])
	}
	return out
}

// stateJSON decompresses a state's chunks.
func stateJSON(chunks [][]byte) ([]byte, error) {
	rd, err := tfstate.Open(chunks)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(rd)
}

// withSerial is a state's JSON, re-encoded with serial (nil if it is no
// JSON object).
func withSerial(state []byte, serial int64) []byte {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(state, &m); err != nil {
		return nil
	}
	m["serial"] = json.RawMessage(strconv.FormatInt(serial, 10))
	b, _ := json.Marshal(m)
	return b
}

func equalChunks(a, b [][]byte) bool { return slices.EqualFunc(a, b, bytes.Equal) }

// lockState locks the state as terraform's kubernetes backend does, held
// by who.
func (r *run) lockState(who string) error {
	c := r.f.env.Client
	suffix := r.stateSuffix()
	id := "6a826c08-0000-4000-8000-00000000c4a0"
	info, err := json.Marshal(map[string]string{"ID": id, "Operation": "OperationTypeApply", "Info": "", "Who": who,
		"Version": "1.11.4", "Created": time.Now().UTC().Format(time.RFC3339Nano), "Path": ""})
	if err != nil {
		return err
	}
	var l coordinationv1.Lease
	err = c.Get(r.ctx, client.ObjectKey{Namespace: r.ns, Name: tfstate.LeaseName(suffix)}, &l)
	if apierrors.IsNotFound(err) {
		l = coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: tfstate.LeaseName(suffix), Namespace: r.ns,
			Labels: map[string]string{tfstate.LabelState: "true", tfstate.LabelSuffix: suffix, tfstate.LabelWorkspace: "default", "app.kubernetes.io/managed-by": "terraform"}}}
	} else if err != nil {
		return err
	}
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[tfstate.AnnotationLockInfo] = string(info)
	l.Spec.HolderIdentity = &id
	if l.ResourceVersion == "" {
		return c.Create(r.ctx, &l)
	}
	return c.Update(r.ctx, &l)
}

// checkRetained: no destroy Job ran, the state stays and no longer has the
// object as an owner (garbage collection would delete it), the object's
// other Secrets but its backups are gone, one Retained event.
func (r *run) checkRetained() []violation {
	var out []violation
	add := func(format string, args ...any) {
		out = append(out, violation{invRetain, fmt.Sprintf(format, args...)})
	}
	jobs, _, _ := r.obs.snapshot()
	for _, j := range jobs {
		if j.operation == string(infrav1.OperationDestroy) {
			add("destroy Job %s ran under Retain", j.name)
		}
	}
	secrets, err := r.stateSecrets()
	if err != nil || len(secrets) == 0 {
		add("the state is gone under Retain (%v)", err)
	}
	for _, s := range secrets {
		for _, o := range s.OwnerReferences {
			if o.Kind == "TerraformCluster" {
				add("the released object still owns state Secret %s", s.Name)
			}
		}
	}
	var managed corev1.SecretList
	if err := r.f.env.Client.List(r.ctx, &managed, client.InNamespace(r.ns), client.MatchingLabels{infrav1.LabelManaged: "true"}); err != nil {
		add("list Secrets: %v", err)
	}
	for _, s := range managed.Items {
		if _, backup := s.Labels[infrav1.LabelStateBackup]; !backup {
			add("Secret %s of the released object stays", s.Name)
		}
	}
	if n := r.events(engine.EventRetained); n != 1 {
		add("%d Retained events", n)
	}
	return out
}
