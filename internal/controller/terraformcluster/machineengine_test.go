package terraformcluster

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/controller/terraformmachine"
)

// What the run engine does for every kind, on a TerraformMachine as on a
// TerraformCluster: pause, identity, Job settings, state backups, the
// state lock and deletionPolicy Retain. (Move: TestMoveMachines.)

// machineCondition is the condition typ of tm's status, nil when it has
// none.
func machineCondition(tm *infrav1.TerraformMachine, typ string) *metav1.Condition {
	return meta.FindStatusCondition(tm.Status.Conditions, typ)
}

// machinePaused waits for the Paused condition to say status for tm's
// generation, with a message that contains why.
func machinePaused(status metav1.ConditionStatus, why string) func(*infrav1.TerraformMachine) bool {
	return func(tm *infrav1.TerraformMachine) bool {
		c := machineCondition(tm, engine.ConditionPaused)
		return c != nil && c.Status == status && c.ObservedGeneration == tm.Generation && strings.Contains(c.Message, why)
	}
}

// machineProvisioned: Ready, the provider ID published, no Job running.
func machineProvisioned(tm *infrav1.TerraformMachine) bool {
	c := machineCondition(tm, infrav1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue && tm.Spec.ProviderID != "" && tm.Status.ActiveJob == nil
}

// patchMachine applies change to tm in a merge patch.
func (h *driftHarness) patchMachine(tm *infrav1.TerraformMachine, change func(*infrav1.TerraformMachine)) {
	h.t.Helper()
	before := tm.DeepCopy()
	change(tm)
	if err := h.c.Patch(context.Background(), tm, client.MergeFrom(before)); err != nil {
		h.t.Fatal(err)
	}
}

// job is the Job named name.
func (h *driftHarness) job(name string) *batchv1.Job {
	h.t.Helper()
	var j batchv1.Job
	if err := h.c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: name}, &j); err != nil {
		h.t.Fatal(err)
	}
	return &j
}

// TestMachineEngine: a TerraformMachine, owned by its Machine alone as
// Cluster API leaves it, is paused by its Cluster's spec.paused (the
// Cluster its cluster-name label names) and by the annotation, starting
// no Job, and goes on once either is lifted; its Jobs run with the
// credentials of a TerraformClusterIdentity and with spec.jobs; its
// applied state is backed up; deleted (its Machine deleted) under
// deletionPolicy Retain it destroys nothing and keeps its state. A second
// machine, whose state someone else locked, starts no Job until the lock
// is released, and a lock a pod of its own left behind is released.
func TestMachineEngine(t *testing.T) {
	h := startMachines(t)
	ctx := context.Background()
	u := h.cluster("eng", false)
	tc := h.create("eng", infrav1.ApplyAutomatic, "small", func(tc *infrav1.TerraformCluster) {
		tc.OwnerReferences = []metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Name: u.GetName(), UID: u.GetUID()}}
	})
	h.wait(tc, "the cluster's first apply", ready)

	// A shared identity in another namespace, allowed here.
	const cred = "CANARY-MACHINE-CREDENTIAL-93b7"
	if err := h.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "platform"}}); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "machines", Namespace: "platform"},
		Data: map[string][]byte{"MACHINE_CLOUD_KEY": []byte(cred)}}); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Create(ctx, &infrav1.TerraformClusterIdentity{ObjectMeta: metav1.ObjectMeta{Name: "machines"},
		Spec: infrav1.TerraformClusterIdentitySpec{SecretRef: infrav1.SecretReference{Name: "machines", Namespace: "platform"},
			AllowedNamespaces: &infrav1.AllowedNamespaces{List: []string{"default"}}}}); err != nil {
		t.Fatal(err)
	}
	settings := infrav1.JobSettings{
		ServiceAccountName: "machine-runner",
		ImagePullSecrets:   []corev1.LocalObjectReference{{Name: "machine-regcred"}},
		NodeSelector:       map[string]string{"pool": "machine-runners"},
		Tolerations:        []corev1.Toleration{{Key: "machine-runners", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
		Env: []corev1.EnvVar{
			{Name: "NO_PROXY", Value: "machines.example.test"},
			{Name: "MACHINE_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "token"}, Key: "token"}}},
		},
		SecurityContext: &infrav1.JobSecurityContext{RunAsUser: ptr.To(int64(1234))},
		// Every Job is kept, so the test can look at them.
		SuccessfulJobsHistoryLimit: ptr.To(int32(100)),
	}
	m := h.capiMachine("eng-0", "eng", "eng-bootstrap", false)
	tm := h.terraformMachine("eng-0", "eng", func(tm *infrav1.TerraformMachine) {
		tm.Spec.IdentityRef = &infrav1.IdentityReference{Kind: infrav1.IdentityKindTerraformClusterIdentity, Name: "machines"}
		tm.Spec.Jobs = settings
		tm.Spec.DeletionPolicy = infrav1.DeletionRetain
	})
	// Cluster API's Machine controller took the machine up: it waits for
	// its bootstrap data only.
	readyReason(h, tm, infrav1.ReasonWaitingForBootstrapData)
	if slices.ContainsFunc(tm.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "Cluster" }) {
		t.Fatalf("the machine has a Cluster among its owners %v: the test would not show the label's Cluster pausing it", tm.OwnerReferences)
	}

	// Pause by the Cluster, as clusterctl move pauses it. The bootstrap
	// data arrives, and a change of the spec is seen, while paused: no Job.
	setPaused := func(paused bool) {
		patch := []byte(`{"spec":{"paused":false}}`)
		if paused {
			patch = []byte(`{"spec":{"paused":true}}`)
		}
		if err := h.c.Patch(ctx, u, client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatal(err)
		}
	}
	setPaused(true)
	byCluster := "its Cluster eng has spec.paused"
	waitFor(h.harness, tm, "paused by its Cluster", machinePaused(metav1.ConditionTrue, byCluster))
	if err := h.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "eng-bootstrap", Namespace: "default"},
		Data: map[string][]byte{"value": []byte(bootstrapCanary)}}); err != nil {
		t.Fatal(err)
	}
	h.patchMachine(tm, func(tm *infrav1.TerraformMachine) { tm.Spec.Drift.IntervalSeconds = ptr.To(int32(3)) })
	waitFor(h.harness, tm, "the change seen while paused", machinePaused(metav1.ConditionTrue, byCluster))
	time.Sleep(3 * time.Second)
	if jobs := h.jobs(tm); len(jobs) != 0 {
		t.Fatalf("%d Jobs while the Cluster is paused", len(jobs))
	}
	setPaused(false)
	waitFor(h.harness, tm, "the first apply once the Cluster is unpaused", func(tm *infrav1.TerraformMachine) bool {
		return machineProvisioned(tm) && machinePaused(metav1.ConditionFalse, "Not paused")(tm)
	})

	// Identity and Job settings: the apply Job runs with both.
	applies := h.jobNames(tm, infrav1.OperationApply)
	if len(applies) != 1 {
		t.Fatalf("apply Jobs %v, want one", applies)
	}
	apply := h.job(applies[0])
	pod := apply.Spec.Template.Spec
	placed := infrav1.JobSettings{ServiceAccountName: pod.ServiceAccountName, ImagePullSecrets: pod.ImagePullSecrets, NodeSelector: pod.NodeSelector, Tolerations: pod.Tolerations}
	want := infrav1.JobSettings{ServiceAccountName: settings.ServiceAccountName, ImagePullSecrets: settings.ImagePullSecrets, NodeSelector: settings.NodeSelector, Tolerations: settings.Tolerations}
	if diff := cmp.Diff(want, placed); diff != "" {
		t.Errorf("the apply Job's pod lacks spec.jobs (-want +got):\n%s", diff)
	}
	if psc := pod.SecurityContext; psc == nil || ptr.Deref(psc.RunAsUser, 0) != 1234 {
		t.Errorf("the apply Job's pod security context %+v, want runAsUser 1234", psc)
	}
	env := h.given(apply)
	if env["NO_PROXY"] != "machines.example.test" || env["MACHINE_TOKEN"] != canary || env["MACHINE_CLOUD_KEY"] != cred {
		t.Errorf("the machine's apply runner was given %v", env)
	}
	h.credentialsMounted(apply)

	// Backups: the applied state is backed up chunk for chunk, in Secrets
	// that move with the machine. Read while the machine is paused by the
	// annotation: no drift check writes the state meanwhile.
	waitFor(h.harness, tm, "the applied state backed up", func(tm *infrav1.TerraformMachine) bool {
		c := machineCondition(tm, infrav1.ConditionStateBackedUp)
		return c != nil && c.Reason == infrav1.ReasonBackedUp && tm.Status.StateSerial != nil
	})
	byAnnotation := "the object has the annotation " + engine.AnnotationPaused
	h.patchMachine(tm, func(tm *infrav1.TerraformMachine) { tm.Annotations = map[string]string{engine.AnnotationPaused: ""} })
	waitFor(h.harness, tm, "paused by the annotation, no Job running", func(tm *infrav1.TerraformMachine) bool {
		return machinePaused(metav1.ConditionTrue, byAnnotation)(tm) && tm.Status.ActiveJob == nil
	})
	serial := *tm.Status.StateSerial
	if b := tm.Status.StateBackups; len(b) == 0 || b[0].Serial != serial || b[0].Bytes <= 0 {
		t.Errorf("status.stateBackups %+v, want serial %d first", b, serial)
	}
	stored := h.storedChunksOf(terraformmachine.Kind, tm)
	if got := h.backupChunksOf(terraformmachine.Kind, tm, serial); len(stored) == 0 || !equalChunks(got, stored) {
		t.Errorf("the backup of serial %d (%d chunks) differs from the state (%d chunks)", serial, len(got), len(stored))
	}

	// Paused by the annotation: no drift check starts; without it, one
	// does, with the identity and the settings too.
	before := h.jobNames(tm, infrav1.OperationDrift)
	time.Sleep(5 * time.Second)
	if now := h.jobNames(tm, infrav1.OperationDrift); len(now) != len(before) {
		t.Fatalf("drift Jobs %v while paused by the annotation, were %v", now, before)
	}
	h.patchMachine(tm, func(tm *infrav1.TerraformMachine) { delete(tm.Annotations, engine.AnnotationPaused) })
	var drift *batchv1.Job
	waitFor(h.harness, tm, "a drift check once the annotation is gone", func(tm *infrav1.TerraformMachine) bool {
		for _, name := range h.jobNames(tm, infrav1.OperationDrift) {
			if !slices.Contains(before, name) {
				if j := h.job(name); engine.Processed(j) {
					drift = j
				}
			}
		}
		return drift != nil && machinePaused(metav1.ConditionFalse, "Not paused")(tm)
	})
	if env := h.given(drift); env["MACHINE_CLOUD_KEY"] != cred || env["MACHINE_TOKEN"] != canary {
		t.Errorf("the machine's drift runner was given %v", env)
	}
	h.credentialsMounted(drift)
	h.noCredential(tm, cred)

	// Deletion under Retain: Cluster API deletes the machine with its
	// Machine; nothing is destroyed and the state stays, released.
	file := filepath.Join(h.files, "eng", "eng-0.txt")
	if _, err := os.Stat(file); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	h.gone(tm, "the machine deleted under Retain")
	h.gone(m, "the Machine deleted")
	if destroys := h.jobNames(tm, infrav1.OperationDestroy); len(destroys) != 0 {
		t.Errorf("destroy Jobs %v under Retain", destroys)
	}
	if _, err := os.Stat(file); err != nil {
		t.Errorf("the machine's file after its deletion under Retain: %v", err)
	}
	var state corev1.Secret
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: engine.StateSecretName("tfm", tm.Name)}, &state); err != nil {
		t.Errorf("the state Secret is gone under Retain: %v", err)
	} else if slices.ContainsFunc(state.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == tm.UID }) {
		t.Error("the released machine still owns its state Secret: garbage collection would delete the state")
	}
	for _, name := range []string{engine.PlanKeyName("tfm", tm.Name), engine.InputsName("tfm", tm.Name)} {
		if err := h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("Secret %s survived: %v", name, err)
		}
	}
	if n := count(h.events(tm), engine.EventRetained); n != 1 {
		t.Errorf("%d Retained events", n)
	}

	// The lock: someone else's stops every Job of a second machine; one
	// that a pod of its own left behind is released, and it applies.
	h.lockState("tfm", "eng-lock", "alice@laptop")
	h.capiMachine("eng-lock", "eng", "eng-bootstrap", false)
	locked := h.terraformMachine("eng-lock", "eng")
	waitFor(h.harness, locked, "StateLocked", func(tm *infrav1.TerraformMachine) bool {
		c := machineCondition(tm, infrav1.ConditionApplyJobSucceeded)
		return c != nil && c.Reason == infrav1.ReasonStateLocked && count(h.events(tm), infrav1.EventStateLocked) == 1
	})
	jobs := len(h.jobs(locked))
	time.Sleep(3 * time.Second)
	if n := len(h.jobs(locked)); n != jobs {
		t.Fatalf("%d Jobs started while someone else held the lock", n-jobs)
	}
	h.lockState("tfm", "eng-lock", "@eng-lock-apply-0a1b2-x7k9q")
	// A Lease is not watched: a change of the machine brings it back.
	h.patchMachine(locked, func(tm *infrav1.TerraformMachine) { tm.Annotations = map[string]string{"captf.test/poke": "1"} })
	waitFor(h.harness, locked, "the stale lock released and the machine applied", func(tm *infrav1.TerraformMachine) bool {
		return machineProvisioned(tm) && count(h.events(tm), infrav1.EventStateUnlocked) == 1
	})
}
