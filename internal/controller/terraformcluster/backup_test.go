package terraformcluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/tfstate"
	"github.com/captf/captf/internal/tftest"
)

// stateSecrets lists the Secrets that hold tc's terraform state.
func (h *harness) stateSecrets(tc *infrav1.TerraformCluster) []corev1.Secret {
	return h.stateSecretsOf(Kind, tc)
}

// stateSecretsOf lists the Secrets that hold the terraform state of obj,
// of kind k.
func (h *harness) stateSecretsOf(k engine.Kind, obj engine.Object) []corev1.Secret {
	h.t.Helper()
	var list corev1.SecretList
	if err := h.c.List(context.Background(), &list, client.InNamespace(obj.GetNamespace()), client.MatchingLabels{tfstate.LabelSuffix: engine.StateSuffix(k.Short(), obj.GetName())}); err != nil {
		h.t.Fatal(err)
	}
	return list.Items
}

// storedChunks is tc's state as the backend stores it, chunk by chunk.
func (h *harness) storedChunks(tc *infrav1.TerraformCluster) [][]byte {
	return h.storedChunksOf(Kind, tc)
}

// storedChunksOf is the state of obj, of kind k, as the backend stores
// it, chunk by chunk.
func (h *harness) storedChunksOf(k engine.Kind, obj engine.Object) [][]byte {
	h.t.Helper()
	var secrets []tfstate.Secret
	for _, s := range h.stateSecretsOf(k, obj) {
		secrets = append(secrets, tfstate.Secret{Name: s.Name, Labels: s.Labels, Annotations: s.Annotations, Data: s.Data})
	}
	chunks, err := tfstate.Chunks(engine.StateSuffix(k.Short(), obj.GetName()), secrets)
	if err != nil {
		h.t.Fatal(err)
	}
	return chunks
}

// backupChunks is the backup of serial, chunk by chunk, as the restore
// Job would mount it.
func (h *harness) backupChunks(tc *infrav1.TerraformCluster, serial int64) [][]byte {
	return h.backupChunksOf(Kind, tc, serial)
}

// backupChunksOf is the backup of serial of obj, of kind k, chunk by
// chunk; it fails the test when a backup Secret would not move with obj.
func (h *harness) backupChunksOf(k engine.Kind, obj engine.Object, serial int64) [][]byte {
	h.t.Helper()
	var list corev1.SecretList
	sel := engine.OwnerLabels(k, obj)
	sel[infrav1.LabelStateBackup] = strconv.FormatInt(serial, 10)
	if err := h.c.List(context.Background(), &list, client.InNamespace(obj.GetNamespace()), client.MatchingLabels(sel)); err != nil {
		h.t.Fatal(err)
	}
	chunks := make([][]byte, len(list.Items))
	for _, s := range list.Items {
		if _, ok := s.Labels[infrav1.LabelMove]; !ok {
			h.t.Errorf("backup %s has no move label", s.Name)
		}
		if ref := s.OwnerReferences; len(ref) != 1 || ref[0].UID != obj.GetUID() {
			h.t.Errorf("backup %s is not owned by the object: %v", s.Name, ref)
		}
		for k, v := range s.Data {
			var n int
			if _, err := fmt.Sscanf(k, "chunk-%d", &n); err != nil || n >= len(chunks) || chunks[n] != nil {
				h.t.Fatalf("backup %s holds key %s among %d Secrets", s.Name, k, len(list.Items))
			}
			chunks[n] = v
		}
	}
	return chunks
}

func backedUpSerial(tc *infrav1.TerraformCluster) int64 {
	if c := condition(tc, infrav1.ConditionStateBackedUp); c == nil || c.Reason != infrav1.ReasonBackedUp || tc.Status.StateSerial == nil {
		return -1
	}
	return *tc.Status.StateSerial
}

func (h *harness) annotate(tc *infrav1.TerraformCluster, key, value string) {
	h.t.Helper()
	before := tc.DeepCopy()
	if tc.Annotations == nil {
		tc.Annotations = map[string]string{}
	}
	tc.Annotations[key] = value
	if err := h.c.Patch(context.Background(), tc, client.MergeFrom(before)); err != nil {
		h.t.Fatal(err)
	}
}

// TestStateBackupAndRestore: every new state serial is backed up chunk for
// chunk; a lost state is guarded and named with the newest backup; the
// annotation restores it (terraform numbers the pushed state one past the
// backup, and changes nothing else) and removes itself, and the object goes
// on against the restored state: the change that waited plans as an update
// of one resource, not as everything created again. A restore of a serial
// without backup, and of a corrupt backup, says so and is not retried. With
// terraform and tofu.
func TestStateBackupAndRestore(t *testing.T) {
	h := startDrift(t)
	ctx := context.Background()
	for _, image := range []string{driftImage, driftImageTofu} {
		t.Run(image, func(t *testing.T) {
			h := &driftHarness{harness: &harness{t: t, env: h.env, c: h.c, node: h.node}, files: h.files}
			name := "backup-tf"
			if image == driftImageTofu {
				name = "backup-tofu"
			}
			tc := h.createDrift(name, image, infrav1.ApplyManual, infrav1.DriftActionReport, 0)
			h.wait(tc, "first apply backed up", func(tc *infrav1.TerraformCluster) bool { return ready(tc) && backedUpSerial(tc) >= 0 })
			first := backedUpSerial(tc)
			if got := h.backupChunks(tc, first); !equalChunks(got, h.storedChunks(tc)) {
				t.Fatalf("backup of serial %d differs from the state", first)
			}
			h.setVar(tc, "content", `"`+driftCanary+`-2"`)
			h.approve(tc, h.waitingPlan(tc, infrav1.ReasonPlanAwaitingApproval).PlanHash)
			h.wait(tc, "second apply backed up", func(tc *infrav1.TerraformCluster) bool { return backedUpSerial(tc) > first })
			newest := backedUpSerial(tc)
			if got := tc.Status.StateBackups; len(got) != 2 || got[0].Serial != newest || got[1].Serial != first || got[0].Bytes <= 0 {
				t.Fatalf("status.stateBackups = %+v; want serials %d and %d", got, newest, first)
			}
			backup := tftest.StateJSON(t, h.backupChunks(tc, newest))

			// The state is lost: nothing runs, and the message names the
			// newest backup.
			for _, s := range h.stateSecrets(tc) {
				if err := h.c.Delete(ctx, &s); err != nil {
					t.Fatal(err)
				}
			}
			h.setVar(tc, "content", `"`+driftCanary+`-3"`)
			h.wait(tc, "the lost state guarded", stateLostWith)
			if msg := condition(tc, infrav1.ConditionApplyJobSucceeded).Message; !strings.Contains(msg, infrav1.AnnotationRestoreState+"="+strconv.FormatInt(newest, 10)) {
				t.Fatalf("the StateLost message names no backup: %s", msg)
			}

			// A serial with no backup.
			h.annotate(tc, infrav1.AnnotationRestoreState, "999")
			h.wait(tc, "BackupNotFound", func(tc *infrav1.TerraformCluster) bool {
				c := condition(tc, infrav1.ConditionStateRestored)
				return c != nil && c.Reason == infrav1.ReasonBackupNotFound
			})

			// The newest backup.
			h.annotate(tc, infrav1.AnnotationRestoreState, strconv.FormatInt(newest, 10))
			plan := h.waitingPlan(tc, infrav1.ReasonPlanAwaitingApproval)
			c := condition(tc, infrav1.ConditionStateRestored)
			if c == nil || c.Reason != infrav1.ReasonRestored {
				t.Fatalf("StateRestored = %+v", c)
			}
			if _, ok := tc.Annotations[infrav1.AnnotationRestoreState]; ok {
				t.Fatal("the annotation stayed after the restore")
			}
			if got := tc.Status.LastRestoredSerial; got == nil || *got != newest {
				t.Fatalf("lastRestoredSerial = %v; want %d", got, newest)
			}
			if plan.Add != 0 || plan.Change != 1 || plan.Destroy != 0 {
				t.Fatalf("after the restore the change plans %d to add, %d to change, %d to destroy; want only a.txt changed", plan.Add, plan.Change, plan.Destroy)
			}
			after := tftest.StateJSON(t, h.storedChunks(tc))
			if !bytes.Equal(tftest.WithSerial(t, after, newest), backup) {
				t.Fatalf("the restored state differs from the backup beyond its serial")
			}
			if m, err := tfstate.ReadMeta(bytes.NewReader(after)); err != nil || m.Serial != newest+1 {
				t.Fatalf("the restored state's serial is %d (%v); terraform numbers a pushed state one past the backup's (%d)", m.Serial, err, newest+1)
			}
			if n := count(h.events(tc), infrav1.EventStateRestored); n != 1 {
				t.Fatalf("%d StateRestored events", n)
			}
			h.approve(tc, plan.PlanHash)
			h.wait(tc, "the change applied on the restored state", func(tc *infrav1.TerraformCluster) bool {
				return tc.Status.Plan == nil && tc.Status.ActiveJob == nil && tc.Status.LastRun.Operation == infrav1.OperationApply && tc.Status.LastRun.Succeeded
			})
			if got := h.content(tc, "a.txt"); got != driftCanary+"-3" {
				t.Fatalf("a.txt holds %q", got)
			}

			// A corrupt backup: the restore fails, pushes nothing, and is
			// not tried again.
			oldest := tc.Status.StateBackups[len(tc.Status.StateBackups)-1].Serial
			var s corev1.Secret
			if err := h.c.Get(ctx, client.ObjectKey{Namespace: tc.Namespace, Name: engine.BackupName("tfc", tc.Name, oldest)}, &s); err != nil {
				t.Fatal(err)
			}
			s.Data[engine.ChunkKey(0)][len(s.Data[engine.ChunkKey(0)])/2] ^= 0xff
			if err := h.c.Update(ctx, &s); err != nil {
				t.Fatal(err)
			}
			before := h.storedChunks(tc)
			h.annotate(tc, infrav1.AnnotationRestoreState, strconv.FormatInt(oldest, 10))
			h.wait(tc, "RestoreFailed", func(tc *infrav1.TerraformCluster) bool {
				c := condition(tc, infrav1.ConditionStateRestored)
				return c != nil && c.Reason == infrav1.ReasonRestoreFailed
			})
			time.Sleep(3 * time.Second)
			if n := h.opJobs(tc, infrav1.OperationRestore); n != 2 {
				t.Fatalf("%d restore Jobs after a failed restore; want 2 (no retry)", n)
			}
			if !equalChunks(before, h.storedChunks(tc)) {
				t.Fatal("a failed restore changed the state")
			}
			if n := count(h.events(tc), infrav1.EventStateRestoreFailed); n != 1 {
				t.Fatalf("%d StateRestoreFailed events", n)
			}
			h.noValues(tc)
		})
	}
}

func equalChunks(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// TestChunkedStateBackup: a state that terraform splits over several
// Secrets (here: a file of incompressible content, read into the state by
// a drift check's refresh) is backed up over as many Secrets, chunk for
// chunk, and restored byte for byte but for the serial.
func TestChunkedStateBackup(t *testing.T) {
	h := startDrift(t)
	ctx := context.Background()
	tc := h.createDrift("chunked", driftImage, infrav1.ApplyAutomatic, infrav1.DriftActionReport, 0)
	h.wait(tc, "first apply backed up", func(tc *infrav1.TerraformCluster) bool { return ready(tc) && backedUpSerial(tc) >= 0 })
	big := make([]byte, 1200<<10)
	if _, err := rand.Read(big); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.path(tc, "a.txt"), []byte(base64.StdEncoding.EncodeToString(big)), 0o644); err != nil {
		t.Fatal(err)
	}
	before := tc.DeepCopy()
	tc.Spec.Drift.IntervalSeconds = ptr.To(int32(2))
	if err := h.c.Patch(ctx, tc, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	h.wait(tc, "a chunked state backed up", func(tc *infrav1.TerraformCluster) bool {
		return backedUpSerial(tc) >= 0 && len(tc.Status.StateBackups) > 0 && tc.Status.StateBackups[0].Bytes > 1<<20
	})
	before = tc.DeepCopy()
	tc.Spec.Drift.IntervalSeconds = ptr.To(int32(0))
	if err := h.c.Patch(ctx, tc, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	h.wait(tc, "no Job", func(tc *infrav1.TerraformCluster) bool { return tc.Status.ActiveJob == nil })
	serial := backedUpSerial(tc)
	stored := h.storedChunks(tc)
	if len(stored) < 2 {
		t.Fatalf("the state is in %d Secrets; the test needs terraform to split it", len(stored))
	}
	if got := h.backupChunks(tc, serial); !equalChunks(got, stored) {
		t.Fatalf("the backup of serial %d differs from the state (%d chunks, %d stored)", serial, len(got), len(stored))
	}
	backup := tftest.StateJSON(t, stored)
	for _, s := range h.stateSecrets(tc) {
		if err := h.c.Delete(ctx, &s); err != nil {
			t.Fatal(err)
		}
	}
	h.annotate(tc, infrav1.AnnotationRestoreState, strconv.FormatInt(serial, 10))
	h.wait(tc, "restored", func(tc *infrav1.TerraformCluster) bool {
		c := condition(tc, infrav1.ConditionStateRestored)
		return c != nil && c.Reason == infrav1.ReasonRestored
	})
	after := tftest.StateJSON(t, h.storedChunks(tc))
	if !bytes.Equal(tftest.WithSerial(t, after, serial), backup) {
		t.Fatalf("the restored state differs from the backup beyond its serial (%d bytes, %d backed up)", len(after), len(backup))
	}
	if m, err := tfstate.ReadMeta(bytes.NewReader(after)); err != nil || m.Serial != serial+1 {
		t.Fatalf("the restored state's serial is %d (%v); terraform numbers a pushed state one past it (%d)", m.Serial, err, serial+1)
	}

	// A state past the size a backup holds is not backed up, and says so.
	huge := make([]byte, engine.MaxBackupBytes+(1<<20))
	if _, err := rand.Read(huge); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.path(tc, "a.txt"), []byte(base64.StdEncoding.EncodeToString(huge)), 0o644); err != nil {
		t.Fatal(err)
	}
	before = tc.DeepCopy()
	tc.Spec.Drift.IntervalSeconds = ptr.To(int32(2))
	if err := h.c.Patch(ctx, tc, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	h.wait(tc, "StateTooLarge", func(tc *infrav1.TerraformCluster) bool {
		c := condition(tc, infrav1.ConditionStateBackedUp)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == infrav1.ReasonStateTooLarge
	})
	if n := count(h.events(tc), infrav1.EventStateTooLarge); n != 1 {
		t.Fatalf("%d StateTooLarge events", n)
	}
	large := *tc.Status.StateSerial
	var list corev1.SecretList
	if err := h.c.List(ctx, &list, client.InNamespace(tc.Namespace), client.MatchingLabels{infrav1.LabelStateBackup: strconv.FormatInt(large, 10)}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 || tc.Status.StateBackups[0].Serial == large {
		t.Fatalf("serial %d of %d chunks was backed up", large, len(h.storedChunks(tc)))
	}
}

// lockState locks the state of the object named name, of the kind whose
// short name is short, as terraform's kubernetes backend does for who
// (user@hostname; in a pod, the pod's name), creating the Lease when
// terraform has not yet.
func (h *harness) lockState(short, name, who string) {
	h.t.Helper()
	ctx := context.Background()
	id := fmt.Sprintf("6a826c08-0000-4000-8000-%012x", len(who))
	info, _ := json.Marshal(map[string]string{"ID": id, "Operation": "OperationTypeApply",
		"Info": "", "Who": who, "Version": "1.11.4", "Created": time.Now().UTC().Format(time.RFC3339Nano), "Path": ""})
	var l coordinationv1.Lease
	err := h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: engine.LockName(short, name)}, &l)
	if err != nil {
		l = coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: engine.LockName(short, name), Namespace: "default",
			Labels: map[string]string{"tfstate": "true", tfstate.LabelSuffix: engine.StateSuffix(short, name), "tfstateWorkspace": "default", "app.kubernetes.io/managed-by": "terraform"}}}
	}
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[tfstate.AnnotationLockInfo] = string(info)
	l.Spec.HolderIdentity = &id
	if l.ResourceVersion == "" {
		err = h.c.Create(ctx, &l)
	} else {
		err = h.c.Update(ctx, &l)
	}
	if err != nil {
		h.t.Fatal(err)
	}
}

// TestStaleStateLock: a state lock that a runner pod of the object left
// behind (terraform's own Lease, as a killed pod leaves it) fails the next
// run; the manager then finds the pod gone, releases the lock with an
// event, and the apply goes on. A lock held by anyone else stops every Job
// with StateLocked until it is released.
func TestStaleStateLock(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	tc := h.create("locked", infrav1.ApplyAutomatic, "small")
	h.wait(tc, "first apply", ready)
	applied := h.stateHash(tc)
	lock := func(who string) { h.lockState("tfc", tc.Name, who) }
	// A pod of an apply Job of the object, long gone.
	lock("@" + tc.Name + "-apply-0a1b2-x7k9q")
	h.setSize(tc, "large")
	h.wait(tc, "the stale lock released and the apply done", func(tc *infrav1.TerraformCluster) bool {
		return tc.Status.ActiveJob == nil && tc.Status.LastRun != nil && tc.Status.LastRun.Succeeded && h.stateHash(tc) != applied && count(h.events(tc), infrav1.EventStateUnlocked) == 1
	})
	if tc.Status.Failures != 0 {
		t.Fatalf("failures = %d", tc.Status.Failures)
	}

	// Someone else's lock.
	lock("alice@laptop")
	h.setSize(tc, "medium")
	h.wait(tc, "StateLocked", func(tc *infrav1.TerraformCluster) bool {
		c := condition(tc, infrav1.ConditionApplyJobSucceeded)
		return c != nil && c.Reason == infrav1.ReasonStateLocked && count(h.events(tc), infrav1.EventStateLocked) == 1
	})
	jobs := len(h.jobs(tc))
	time.Sleep(5 * time.Second)
	if n := len(h.jobs(tc)); n != jobs {
		t.Fatalf("%d Jobs started while someone else held the lock", n-jobs)
	}
	var l coordinationv1.Lease
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: engine.LockName("tfc", tc.Name)}, &l); err != nil {
		t.Fatal(err)
	}
	if l.Spec.HolderIdentity == nil {
		t.Fatal("the manager released someone else's lock")
	}
	l.Spec.HolderIdentity = nil
	delete(l.Annotations, tfstate.AnnotationLockInfo)
	if err := h.c.Update(ctx, &l); err != nil {
		t.Fatal(err)
	}
	h.wait(tc, "the apply after the lock was released", func(tc *infrav1.TerraformCluster) bool {
		return ready(tc) && tc.Status.LastRun != nil && tc.Status.LastRun.Succeeded && tc.Status.ActiveJob == nil && condition(tc, infrav1.ConditionApplyJobSucceeded).Reason != infrav1.ReasonStateLocked
	})
}
