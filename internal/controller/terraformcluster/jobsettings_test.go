package terraformcluster

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/testnode"
)

// The runner Job's settings (spec.jobs), the credentials of
// spec.identityRef and spec.deletionPolicy, against the real API server
// with the test node running the Jobs.

// lastJob is tc's newest Job.
func (h *harness) lastJob(tc *infrav1.TerraformCluster) batchv1.Job {
	h.t.Helper()
	jobs := h.jobs(tc)
	if len(jobs) == 0 {
		h.t.Fatal("no Job")
	}
	slices.SortFunc(jobs, func(a, b batchv1.Job) int {
		return strings.Compare(a.Annotations[engine.AnnotationCreatedAt], b.Annotations[engine.AnnotationCreatedAt])
	})
	return jobs[len(jobs)-1]
}

// given is the environment the test node gave the runner container of job.
func (h *harness) given(job *batchv1.Job) map[string]string {
	env := map[string]string{}
	for _, kv := range h.node.Given(testnode.PodFor(job).Name, infrav1.RunnerContainer) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return env
}

// TestJobSettings: spec.jobs reaches every runner Job — service account,
// pull secrets, placement, environment (valueFrom included), the user it
// runs as — and every Job runs non-root with a read-only root filesystem,
// no privilege escalation, no capabilities, default resources, and /tmp
// (HOME and TMPDIR) on an emptyDir; the apply succeeds that way.
func TestJobSettings(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "runner", Namespace: "default"}}
	if err := h.c.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	tc := h.create("settings", infrav1.ApplyAutomatic, "small", func(tc *infrav1.TerraformCluster) {
		tc.Spec.Jobs = infrav1.JobSettings{
			ServiceAccountName: "runner",
			ImagePullSecrets:   []corev1.LocalObjectReference{{Name: "regcred"}},
			NodeSelector:       map[string]string{"pool": "runners"},
			Tolerations:        []corev1.Toleration{{Key: "runners", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			Env: []corev1.EnvVar{
				{Name: "HTTPS_PROXY", Value: "http://proxy.example.test:3128"},
				{Name: "FROM_SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "token"}, Key: "token"}}},
				// Neither a spec nor the manager moves HOME off /tmp.
				{Name: "HOME", Value: "/root"},
			},
			SecurityContext: &infrav1.JobSecurityContext{RunAsUser: ptr.To(int64(1000))},
		}
	})
	h.wait(tc, "apply", ready)
	job := h.lastJob(tc)
	pod := job.Spec.Template.Spec
	if pod.ServiceAccountName != "runner" || len(pod.ImagePullSecrets) != 1 || pod.ImagePullSecrets[0].Name != "regcred" ||
		pod.NodeSelector["pool"] != "runners" || len(pod.Tolerations) != 1 || pod.Tolerations[0].Key != "runners" {
		t.Errorf("pod spec lacks spec.jobs: %+v", pod)
	}
	psc := pod.SecurityContext
	if psc == nil || !ptr.Deref(psc.RunAsNonRoot, false) || ptr.Deref(psc.RunAsUser, 0) != 1000 || ptr.Deref(psc.RunAsGroup, 0) != engine.NonRoot ||
		ptr.Deref(psc.FSGroup, 0) != engine.NonRoot || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context %+v", psc)
	}
	for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
		sc := c.SecurityContext
		if sc == nil || !ptr.Deref(sc.ReadOnlyRootFilesystem, false) || ptr.Deref(sc.AllowPrivilegeEscalation, true) ||
			sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
			t.Errorf("container %s security context %+v", c.Name, sc)
		}
	}
	// The runner image is scratch: its binary installs itself, no cp.
	if len(pod.InitContainers) != 1 || !slices.Equal(pod.InitContainers[0].Command, []string{engine.RunnerImagePath, "install", engine.RunnerPath}) {
		t.Errorf("init containers %+v, want one running %s install %s", pod.InitContainers, engine.RunnerImagePath, engine.RunnerPath)
	}
	runner := pod.Containers[0]
	if got := runner.Resources.Requests[corev1.ResourceMemory]; got.Cmp(resource.MustParse("512Mi")) != 0 {
		t.Errorf("default memory request %v", got.String())
	}
	if got := runner.Resources.Limits[corev1.ResourceMemory]; got.Cmp(resource.MustParse("2Gi")) != 0 {
		t.Errorf("default memory limit %v", got.String())
	}
	tmp := false
	for _, m := range runner.VolumeMounts {
		for _, v := range pod.Volumes {
			tmp = tmp || m.Name == v.Name && m.MountPath == "/tmp" && v.EmptyDir != nil
		}
	}
	if !tmp {
		t.Error("no emptyDir at /tmp")
	}
	env := h.given(&job)
	if env["HTTPS_PROXY"] != "http://proxy.example.test:3128" || env["FROM_SECRET"] != canary || env["HOME"] != "/tmp" || env["TMPDIR"] != "/tmp" {
		t.Errorf("the runner was given %v", env)
	}
	// Weaker settings are refused when the object is written.
	for name, mutate := range map[string]func(*infrav1.TerraformCluster){
		"TF_ variable": func(tc *infrav1.TerraformCluster) {
			tc.Spec.Jobs.Env = []corev1.EnvVar{{Name: "TF_LOG", Value: "TRACE"}}
		},
		"KUBE_ variable": func(tc *infrav1.TerraformCluster) {
			tc.Spec.Jobs.Env = []corev1.EnvVar{{Name: "KUBE_CONFIG_PATH", Value: "/x"}}
		},
		"root": func(tc *infrav1.TerraformCluster) {
			tc.Spec.Jobs.SecurityContext = &infrav1.JobSecurityContext{RunAsUser: ptr.To(int64(0))}
		},
	} {
		bad := &infrav1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Name: "weaker", Namespace: "default"},
			Spec: infrav1.TerraformClusterSpec{RunnerSpec: infrav1.RunnerSpec{Image: moduleImage}}}
		mutate(bad)
		if err := h.c.Create(ctx, bad); !apierrors.IsInvalid(err) {
			t.Errorf("%s: create gave %v, want it refused", name, err)
		}
	}
}

// TestIdentity: the credentials of spec.identityRef reach the runner Job
// as environment variables and as files of mode 0440, through a per-run
// copy deleted with the run; a TerraformClusterIdentity serves only the
// namespaces it allows (none when it says nothing); no credential reaches
// status, events or TerraformPlans.
func TestIdentity(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	const cred = "CANARY-CREDENTIAL-5a1f"
	if err := h.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cloud", Namespace: "default"},
		Data: map[string][]byte{"CLOUD_SECRET_KEY": []byte(cred), "config.json": []byte(`{"k":"` + cred + `"}`)}}); err != nil {
		t.Fatal(err)
	}
	tc := h.create("withsecret", infrav1.ApplyManual, "small", func(tc *infrav1.TerraformCluster) {
		tc.Spec.IdentityRef = &infrav1.IdentityReference{Kind: infrav1.IdentityKindSecret, Name: "cloud"}
	})
	h.wait(tc, "first apply", ready)
	job := h.lastJob(tc)
	if env := h.given(&job); env["CLOUD_SECRET_KEY"] != cred {
		t.Errorf("the runner was not given the credentials: %v", env)
	}
	h.credentialsMounted(&job)
	// A plan of the next change runs with them too; its TerraformPlan and
	// everything recorded stay free of them.
	h.setSize(tc, "large")
	h.waitingPlan(tc, infrav1.ReasonPlanAwaitingApproval)
	planJob := h.lastJob(tc)
	if env := h.given(&planJob); env["CLOUD_SECRET_KEY"] != cred {
		t.Errorf("the plan Job was not given the credentials")
	}
	h.noCredential(tc, cred)

	// A TerraformClusterIdentity in another namespace that allows none.
	if err := h.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "platform"}}); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: "platform"},
		Data: map[string][]byte{"SHARED_KEY": []byte(cred)}}); err != nil {
		t.Fatal(err)
	}
	id := &infrav1.TerraformClusterIdentity{ObjectMeta: metav1.ObjectMeta{Name: "shared"},
		Spec: infrav1.TerraformClusterIdentitySpec{SecretRef: infrav1.SecretReference{Name: "shared", Namespace: "platform"}}}
	if err := h.c.Create(ctx, id); err != nil {
		t.Fatal(err)
	}
	shared := h.create("withidentity", infrav1.ApplyAutomatic, "small", func(tc *infrav1.TerraformCluster) {
		tc.Spec.IdentityRef = &infrav1.IdentityReference{Kind: infrav1.IdentityKindTerraformClusterIdentity, Name: "shared"}
	})
	h.wait(shared, "IdentityNotAllowed", func(tc *infrav1.TerraformCluster) bool {
		c := condition(tc, infrav1.ConditionApplyJobSucceeded)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == engine.ReasonIdentityNotAllowed
	})
	time.Sleep(2 * time.Second)
	if jobs := h.jobs(shared); len(jobs) != 0 {
		t.Fatalf("%d Jobs under an identity that does not allow the namespace", len(jobs))
	}
	// Allowed by a label of the namespace: the next reconcile (here the
	// object's own change) runs the apply with the identity's Secret.
	var ns corev1.Namespace
	if err := h.c.Get(ctx, client.ObjectKey{Name: "default"}, &ns); err != nil {
		t.Fatal(err)
	}
	ns.Labels = map[string]string{"team": "infra"}
	if err := h.c.Update(ctx, &ns); err != nil {
		t.Fatal(err)
	}
	id.Spec.AllowedNamespaces = &infrav1.AllowedNamespaces{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "infra"}}}
	if err := h.c.Update(ctx, id); err != nil {
		t.Fatal(err)
	}
	h.setSize(shared, "medium")
	h.wait(shared, "apply under the shared identity", ready)
	sharedJob := h.lastJob(shared)
	if env := h.given(&sharedJob); env["SHARED_KEY"] != cred {
		t.Errorf("the runner was not given the shared identity's credentials")
	}
	h.noCredential(shared, cred)
}

// credentialsMounted fails unless job, which ran, mounted its per-run
// credentials read-only with mode 0440 at engine.CredentialsPath, and the
// copy went with the run.
func (h *harness) credentialsMounted(job *batchv1.Job) {
	h.t.Helper()
	credsVolume := false
	for _, v := range job.Spec.Template.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == engine.CredentialsName(job.Name) {
			for _, m := range job.Spec.Template.Spec.Containers[0].VolumeMounts {
				credsVolume = credsVolume || m.Name == v.Name && m.MountPath == engine.CredentialsPath && m.ReadOnly && ptr.Deref(v.Secret.DefaultMode, 0) == 0o440
			}
		}
	}
	if !credsVolume {
		h.t.Errorf("Job %s: no read-only credentials volume of mode 0440 at %s: %+v", job.Name, engine.CredentialsPath, job.Spec.Template.Spec.Volumes)
	}
	if err := h.c.Get(context.Background(), client.ObjectKey{Namespace: job.Namespace, Name: engine.CredentialsName(job.Name)}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		h.t.Errorf("Job %s: the per-run credentials outlived the run: %v", job.Name, err)
	}
}

// noCredential fails when cred is in obj's status, its events or its
// TerraformPlans.
func (h *harness) noCredential(obj engine.Object, cred string) {
	h.t.Helper()
	u, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	b, _ := json.Marshal(u["status"])
	if strings.Contains(string(b), cred) {
		h.t.Error("a credential is in status")
	}
	for _, e := range h.events(obj) {
		if strings.Contains(e.Note, cred) {
			h.t.Errorf("a credential is in event %s", e.Reason)
		}
	}
	for _, p := range h.plans(obj) {
		b, _ := json.Marshal(p)
		if strings.Contains(string(b), cred) {
			h.t.Errorf("a credential is in TerraformPlan %s", p.Name)
		}
	}
	logs, err := h.node.Logs()
	if err != nil {
		h.t.Fatal(err)
	}
	if len(logs) == 0 {
		h.t.Error("the node ran no container: the check of their logs proves nothing")
	}
	for key, b := range logs {
		if strings.Contains(string(b), cred) {
			h.t.Errorf("a credential is in the log of %s", key)
		}
	}
}

// TestDeletionRetain: under deletionPolicy Retain deleting the object runs
// no destroy Job, keeps the terraform state Secret, removes the object's
// other Secrets and says so in an event.
func TestDeletionRetain(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	tc := h.create("kept", infrav1.ApplyAutomatic, "small", func(tc *infrav1.TerraformCluster) {
		tc.Spec.DeletionPolicy = infrav1.DeletionRetain
	})
	h.wait(tc, "first apply", ready)
	// The object owns its state Secret (clusterctl move follows owner
	// references), also after terraform wrote the state again.
	owned := func() bool {
		var s corev1.Secret
		if err := h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: engine.StateSecretName("tfc", "kept")}, &s); err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(s.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == tc.UID && o.Kind == "TerraformCluster" })
	}
	if !owned() {
		t.Error("the object does not own its state Secret after the first apply")
	}
	before := h.stateHash(tc)
	h.setSize(tc, "large")
	h.wait(tc, "the second apply", func(tc *infrav1.TerraformCluster) bool {
		run := tc.Status.LastRun
		return ready(tc) && tc.Status.ActiveJob == nil && run != nil && run.Succeeded && h.stateHash(tc) != before
	})
	if !owned() {
		t.Error("the object does not own its state Secret after the second apply")
	}
	if err := h.c.Delete(ctx, tc); err != nil {
		t.Fatal(err)
	}
	h.gone(tc, "deleted under Retain")
	for _, j := range h.jobs(tc) {
		if j.Labels[engine.LabelOperation] == string(infrav1.OperationDestroy) {
			t.Errorf("a destroy Job ran under Retain: %s", j.Name)
		}
	}
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: engine.StateSecretName("tfc", "kept")}, &corev1.Secret{}); err != nil {
		t.Errorf("the state Secret is gone under Retain: %v", err)
	}
	// No garbage collector runs here: that it would keep the state shows
	// as the owner reference gone.
	if owned() {
		t.Error("the released object still owns its state Secret: garbage collection would delete the state")
	}
	for _, name := range []string{engine.PlanKeyName("tfc", "kept"), engine.InputsName("tfc", "kept")} {
		if err := h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
			t.Errorf("Secret %s survived: %v", name, err)
		}
	}
	retained := false
	for _, e := range h.events(tc) {
		retained = retained || e.Reason == engine.EventRetained
	}
	if !retained {
		t.Error("no Retained event")
	}
}
