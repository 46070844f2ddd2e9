// Package realnode runs the manager with its runner Jobs as real pods: a
// real one-node cluster (internal/realnode: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kubelet, containerd, runc)
// pulls the images the release's own image code builds from a registry
// served by the test. Each check here is what the test node
// (internal/testnode), which runs Jobs as local processes, cannot show:
// the user, root filesystem, capabilities and mounted key mode a runner
// container really has; the image digest a kubelet pulls; the termination
// message and the log a kubelet writes; the Job controller's handling of a
// pod deleted while it runs.
//
// The module images carry a probe (./probe) as their terraform: it writes
// what the container sees of itself to the pod's log and then runs the
// real terraform of the image.
package realnode

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/image"
	"github.com/captf/captf/internal/kubectlcaptf"
	"github.com/captf/captf/internal/managertest"
	"github.com/captf/captf/internal/realnode"
	"github.com/captf/captf/internal/runner"
	"github.com/captf/captf/internal/testenv"
	"github.com/captf/captf/internal/tftest"
)

const (
	ns = "default"
	// token is the example's Secret value: it must reach no log.
	token = "not-a-real-token-4f1c"
	// probeUser is what every runner container must report of itself:
	// the non-root user and group, no capabilities, no privilege gain.
	probeUser = "uid=65532 gid=65532"
)

// moduleOpts say what a module image holds besides its module.
type moduleOpts struct {
	marker string // /captf/marker, which the probe reports
	slow   int    // seconds an apply sleeps (/captf/slow-apply)
}

// moduleImage is a module image (realnode.ModuleImage) whose terraform
// is the probe, in front of the real one at /captf/runtime/real/terraform.
func moduleImage(t *testing.T, module, probe string, o moduleOpts) v1.ImageIndex {
	t.Helper()
	extra := []image.File{
		{Path: infrav1.PathRuntime + "/real/terraform", Mode: 0o755, Source: tftest.Terraform(t).Path},
		{Path: "/captf/marker", Mode: 0o644, Data: []byte(o.marker)},
	}
	if o.slow > 0 {
		extra = append(extra, image.File{Path: "/captf/slow-apply", Mode: 0o644, Data: []byte(fmt.Sprint(o.slow))})
	}
	idx, err := realnode.ModuleImage(module, probe, extra...)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// cluster is what every check shares: the node, the images in its
// registry and the manager.
type cluster struct {
	node    *realnode.Node
	probe   string
	modules map[string]string // module name → pushed reference
	manager *managertest.Manager
}

func TestRunnerJobsOnARealNode(t *testing.T) {
	ctx := context.Background()
	ctrllog.SetLogger(logr.Discard())
	node := realnode.Start(t, realnode.Options{Root: "../..", CRDs: []string{testenv.ClusterAPICRDs(t)}})
	c := &cluster{node: node, modules: map[string]string{}}

	// The manager and runner images, as make images builds them.
	const ver = "v0.0.0-realnode"
	opts := image.Options{Module: "../..", Version: ver, Platforms: []v1.Platform{realnode.HostPlatform}, Created: time.Unix(0, 0).UTC()}
	refs := map[string]string{}
	for what, p := range map[string]image.Program{"captf-manager": image.Manager, "captf-runner": image.Runner} {
		opts.Work = t.TempDir()
		idx, err := p.Index(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		if refs[what], _, err = node.Push(ctx, "captf/"+what+":"+ver, idx); err != nil {
			t.Fatal(err)
		}
	}
	c.probe = filepath.Join(t.TempDir(), "terraform")
	if err := image.Compile(ctx, "../..", "./test/realnode/probe", realnode.HostPlatform, ver, c.probe); err != nil {
		t.Fatal(err)
	}
	failing := filepath.Join(t.TempDir(), "failing")
	if err := os.MkdirAll(failing, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(failing, "main.tf"), []byte(failingModule), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct {
		name, dir string
		o         moduleOpts
	}{
		{"demo", "../../examples/kubernetes/module", moduleOpts{marker: "image-A"}},
		{"machine", "../../examples/kubernetes/machine", moduleOpts{marker: "machine"}},
		{"failing", failing, moduleOpts{marker: "failing"}},
		{"slow", "../../examples/kubernetes/module", moduleOpts{marker: "slow", slow: 45}},
	} {
		dir, err := filepath.Abs(m.dir)
		if err != nil {
			t.Fatal(err)
		}
		if c.modules[m.name], _, err = node.Push(ctx, "modules/"+m.name+":1", moduleImage(t, dir, c.probe, m.o)); err != nil {
			t.Fatal(err)
		}
	}

	// terraform's kubernetes backend in the runner pods acts as the
	// namespace's default ServiceAccount: the state Secrets and the lock
	// Lease.
	if err := node.GrantState(ctx, ns); err != nil {
		t.Fatal(err)
	}

	// The manager from its image, as its Deployment runs it (a process
	// here: it reaches the API server through a kubeconfig).
	managerDir := t.TempDir()
	ref, err := name.ParseReference(refs["captf-manager"])
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(ref, remote.WithPlatform(realnode.HostPlatform))
	if err != nil {
		t.Fatal(err)
	}
	if err := image.Unpack(img, managerDir); err != nil {
		t.Fatal(err)
	}
	c.manager = managertest.Start(t, filepath.Join(managerDir, image.Manager.Path), node.Kubeconfig,
		"--runner-image="+refs["captf-runner"], "--metrics-bind-address=0", "--retry-base=2s")

	// Cluster API's own controllers, for the Cluster and its Machines.
	(&testenv.Env{Config: node.Config, Client: node.Client}).RunClusterAPI(t)

	t.Run("manual", c.testManual)
	t.Run("failing module", c.testFailing)
	t.Run("pod deleted mid-apply", c.testPodDeleted)
	t.Run("machine", c.testMachine)
}

const failingModule = `
variable "healthy" {
  type    = bool
  default = false
}

resource "terraform_data" "broken" {
  lifecycle {
    precondition {
      condition     = var.healthy
      error_message = "captf-realnode: this module always fails."
    }
  }
}
`

// testManual walks a TerraformCluster under Manual (examples/kubernetes/
// cluster.yaml): the first apply, a change, its plan Job, the
// TerraformPlan, the approval and the approved apply, all real pods.
func (c *cluster) testManual(t *testing.T) {
	ctx := context.Background()
	cl := c.node.Client
	for _, u := range testenv.Objects(t, "../../examples/kubernetes/cluster.yaml") {
		if u.GetKind() == "TerraformCluster" {
			if err := unstructured.SetNestedField(u.Object, c.modules["demo"], "spec", "image"); err != nil {
				t.Fatal(err)
			}
		}
		if err := cl.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	tc := &infrav1.TerraformCluster{}
	key := client.ObjectKey{Namespace: ns, Name: "demo"}
	c.wait(t, "the first apply", 4*time.Minute, func() bool {
		return cl.Get(ctx, key, tc) == nil && tc.Status.Initialization != nil &&
			tc.Status.Initialization.Provisioned != nil && *tc.Status.Initialization.Provisioned
	})
	if tc.Spec.ControlPlaneEndpoint != (infrav1.APIEndpoint{Host: "api.demo.example.com", Port: 6443}) {
		t.Errorf("controlPlaneEndpoint after the first apply: %+v", tc.Spec.ControlPlaneEndpoint)
	}
	first := c.podOf(t, tc.Status.LastRun.Job)
	log := c.podLog(t, first)
	// The first apply is ungated: no plan key is mounted.
	c.probed(t, "the first apply", log, "apply", "plan-key=absent", "marker=image-A")

	// A change waits for approval.
	patch := []byte(`[{"op":"replace","path":"/spec/variables/1/value","value":3}]`)
	if err := cl.Patch(ctx, tc, client.RawPatch("application/json-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
	var plan infrav1.TerraformPlan
	c.wait(t, "a plan that waits for approval", 3*time.Minute, func() bool {
		var plans infrav1.TerraformPlanList
		if cl.List(ctx, &plans, client.InNamespace(ns), client.MatchingLabels{infrav1.LabelPlanPhase: string(infrav1.PlanPending)}) != nil || len(plans.Items) != 1 {
			return false
		}
		plan = plans.Items[0]
		// The TerraformPlan is created before status.plan is written.
		return cl.Get(ctx, key, tc) == nil && tc.Status.Plan != nil && tc.Status.Plan.PlanHash == plan.Spec.PlanHash
	})
	if tc.Status.Plan.ImageDigest == "" {
		t.Fatalf("the waiting plan records no image digest: %+v", tc.Status.Plan)
	}
	planDigest := tc.Status.Plan.ImageDigest
	planPod := c.podOf(t, tc.Status.Plan.Job)
	if got := imageDigest(t, planPod); got != planDigest {
		t.Errorf("the plan's digest %s, the plan pod's imageID %s", planDigest, got)
	}
	if pushed := c.registryDigest(t, c.modules["demo"]); pushed != planDigest {
		t.Errorf("the plan ran %s, the registry's tag is %s", planDigest, pushed)
	}

	// kubectl captf logs prints the plan pod's log, as the kubelet serves it.
	planLog := c.plugin(t, "logs", plan.Name)
	for _, want := range []string{"terraform_data.worker[2] will be created", "Plan: 1 to add, 0 to change, 0 to destroy."} {
		if !strings.Contains(planLog, want) {
			t.Errorf("kubectl captf logs lacks %q:\n%s", want, planLog)
		}
	}
	if strings.Contains(planLog, token) {
		t.Error("the plan's log shows the sensitive token")
	}
	// From inside the plan pod: the non-root user, a read-only root
	// filesystem, no capabilities, and the plan key mounted 0440 and
	// readable by that user.
	c.probed(t, "the plan Job", planLog, "plan", "plan-key=0440/read 32 bytes", "marker=image-A")

	// The tag moves between plan and apply; the approved apply still runs
	// what the plan ran.
	dir, err := filepath.Abs("../../examples/kubernetes/module")
	if err != nil {
		t.Fatal(err)
	}
	if _, moved, err := c.node.Push(ctx, "modules/demo:1", moduleImage(t, dir, c.probe, moduleOpts{marker: "image-B"})); err != nil {
		t.Fatal(err)
	} else if moved.String() == planDigest {
		t.Fatal("the moved tag has the plan's digest: the check below proves nothing")
	}
	// As on a node that never ran the tag: one that names it pulls it anew
	// (the kubelet pulls a tag it has only when told Always).
	if err := c.node.ForgetImage(ctx, c.modules["demo"]); err != nil {
		t.Fatal(err)
	}

	c.plugin(t, "approve", plan.Name, "--plan-hash", plan.Spec.PlanHash)
	planJob := tc.Status.Plan.Job
	c.wait(t, "the approved plan applied", 3*time.Minute, func() bool {
		return cl.Get(ctx, client.ObjectKeyFromObject(&plan), &plan) == nil && plan.Status.Phase == infrav1.PlanApplied &&
			cl.Get(ctx, key, tc) == nil && tc.Status.LastRun != nil && tc.Status.LastRun.Operation == infrav1.OperationApply && tc.Status.LastRun.Job != planJob
	})
	if cond := meta.FindStatusCondition(tc.Status.Conditions, "Ready"); cond == nil || cond.Status != metav1.ConditionTrue {
		t.Errorf("Ready after the approved apply: %+v", cond)
	}
	applyPod := c.podOf(t, tc.Status.LastRun.Job)
	if img := runnerContainer(t, applyPod).Image; !strings.HasSuffix(img, "@"+planDigest) {
		t.Errorf("the approved apply's image %s, want it pinned to %s", img, planDigest)
	}
	if got := imageDigest(t, applyPod); got != planDigest {
		t.Errorf("the approved apply ran %s, the plan %s", got, planDigest)
	}
	c.probed(t, "the approved apply", c.podLog(t, applyPod), "apply", "plan-key=0440/read 32 bytes", "marker=image-A")
}

// testFailing: a module that fails shows the termination message the
// kubelet read from the runner container in the object's status and
// conditions, and terraform's error in the pod's log.
func (c *cluster) testFailing(t *testing.T) {
	ctx := context.Background()
	cl := c.node.Client
	tc := &infrav1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "broken", Namespace: ns},
		Spec:       infrav1.TerraformClusterSpec{RunnerSpec: infrav1.RunnerSpec{Image: c.modules["failing"], ApplyPolicy: infrav1.ApplyManual}},
	}
	if err := cl.Create(ctx, tc); err != nil {
		t.Fatal(err)
	}
	c.wait(t, "a failed run", 3*time.Minute, func() bool {
		return cl.Get(ctx, client.ObjectKeyFromObject(tc), tc) == nil && tc.Status.LastRun != nil && tc.Status.LastRun.Error != nil
	})
	pod := c.podOf(t, tc.Status.LastRun.Job)
	var terminated *corev1.ContainerStateTerminated
	for _, st := range pod.Status.ContainerStatuses {
		if st.Name == infrav1.RunnerContainer {
			terminated = st.State.Terminated
		}
	}
	if terminated == nil || terminated.ExitCode == 0 || terminated.Message == "" {
		t.Fatalf("the kubelet reports the runner container as %+v, want it terminated with an exit code and a message", terminated)
	}
	var report runner.Message
	if err := json.Unmarshal([]byte(terminated.Message), &report); err != nil {
		t.Fatalf("the termination message the kubelet read is no report: %v\n%s", err, terminated.Message)
	}
	if report.Error == "" {
		t.Fatalf("the report names no error: %s", terminated.Message)
	}
	if got := *tc.Status.LastRun.Error; got.Kind != report.Outcome || got.Message != report.Error {
		t.Errorf("status.lastRun.error %+v, the pod's report %+v", got, report)
	}
	shown := false
	for _, cond := range tc.Status.Conditions {
		if cond.Status == metav1.ConditionFalse && strings.Contains(cond.Message, report.Error) {
			shown = true
		}
	}
	if !shown {
		t.Errorf("no condition shows the report's error %q: %+v", report.Error, tc.Status.Conditions)
	}
	if log := c.podLog(t, pod); !strings.Contains(log, "captf-realnode: this module always fails.") {
		t.Errorf("the failed pod's log lacks terraform's error:\n%s", log)
	}
}

// testPodDeleted: the pod of an apply Job is deleted while terraform
// runs (and, ignoring SIGTERM, runs on through the grace period). The Job
// controller fails the Job only once the pod is gone; no second apply
// starts before, and the manager records the Job's failure once.
func (c *cluster) testPodDeleted(t *testing.T) {
	ctx := context.Background()
	cl := c.node.Client
	tc := &infrav1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "slow", Namespace: ns},
		Spec: infrav1.TerraformClusterSpec{RunnerSpec: infrav1.RunnerSpec{Image: c.modules["slow"], ApplyPolicy: infrav1.ApplyAutomatic,
			Variables: []infrav1.Variable{
				{Name: "environment", Value: &apiextensionsv1.JSON{Raw: []byte(`"slow"`)}},
				{Name: "replicas", Value: &apiextensionsv1.JSON{Raw: []byte(`1`)}},
				{Name: "api_token", Value: &apiextensionsv1.JSON{Raw: []byte(`"x"`)}},
			}}},
	}
	if err := cl.Create(ctx, tc); err != nil {
		t.Fatal(err)
	}
	var job string
	var pod *corev1.Pod
	c.wait(t, "the apply running", 3*time.Minute, func() bool {
		if cl.Get(ctx, client.ObjectKeyFromObject(tc), tc) != nil || tc.Status.ActiveJob == nil {
			return false
		}
		var pods corev1.PodList
		if cl.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"batch.kubernetes.io/job-name": tc.Status.ActiveJob.Name}) != nil || len(pods.Items) != 1 {
			return false
		}
		job, pod = tc.Status.ActiveJob.Name, &pods.Items[0]
		b, err := c.node.Clientset.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: infrav1.RunnerContainer}).DoRaw(ctx)
		return err == nil && strings.Contains(string(b), "captf-probe: apply sleeps")
	})
	if err := cl.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	// While the deleted pod's container may still run: one apply Job.
	for {
		var p corev1.Pod
		err := cl.Get(ctx, client.ObjectKeyFromObject(pod), &p)
		gone := apierrors.IsNotFound(err)
		if jobs := c.applyJobs(t, tc.Name); len(jobs) != 1 || jobs[0] != job {
			if !gone {
				t.Fatalf("apply Jobs %v while the pod of %s still exists (deleted %s ago)", jobs, job, time.Since(deleted).Round(time.Second))
			}
		}
		if gone {
			break
		}
		if time.Since(deleted) > 2*time.Minute {
			t.Fatalf("the deleted pod %s is still there after 2 minutes", pod.Name)
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Logf("the deleted pod was gone %s after its deletion", time.Since(deleted).Round(time.Second))
	c.wait(t, "the Job's failure recorded", 2*time.Minute, func() bool {
		return cl.Get(ctx, client.ObjectKeyFromObject(tc), tc) == nil && tc.Status.LastRun != nil && tc.Status.LastRun.Job == job
	})
	if tc.Status.LastRun.Succeeded || tc.Status.Failures != 1 {
		t.Errorf("after the Job of the deleted pod: lastRun %+v, failures in a row %d, want a failure recorded once", tc.Status.LastRun, tc.Status.Failures)
	}
	// Recorded once: the record stays as it is while the retry runs.
	finished := tc.Status.LastRun.FinishedAt
	time.Sleep(5 * time.Second)
	if err := cl.Get(ctx, client.ObjectKeyFromObject(tc), tc); err != nil {
		t.Fatal(err)
	}
	if tc.Status.LastRun.Job == job && (!tc.Status.LastRun.FinishedAt.Equal(finished) || tc.Status.Failures != 1) {
		t.Errorf("the failure of %s recorded again: lastRun %+v, failures %d", job, tc.Status.LastRun, tc.Status.Failures)
	}
}

// applyJobs are the names of the apply Jobs of TerraformCluster name.
func (c *cluster) applyJobs(t *testing.T, name string) []string {
	t.Helper()
	var jobs batchv1.JobList
	if err := c.node.Client.List(context.Background(), &jobs, client.InNamespace(ns), client.MatchingLabels{infrav1.LabelOwnerName: name, "captf.io/operation": "apply"}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, j := range jobs.Items {
		names = append(names, j.Name)
	}
	return names
}

// testMachine: a TerraformMachine of the cluster of testManual
// (examples/kubernetes/machine.yaml), owned by Cluster API's Machine
// controller and provisioned by a real pod.
func (c *cluster) testMachine(t *testing.T) {
	ctx := context.Background()
	cl := c.node.Client
	for _, u := range testenv.Objects(t, "../../examples/kubernetes/machine.yaml") {
		if u.GetKind() == "TerraformMachine" {
			if err := unstructured.SetNestedField(u.Object, c.modules["machine"], "spec", "image"); err != nil {
				t.Fatal(err)
			}
		}
		if err := cl.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	var m clusterv1.Machine
	c.wait(t, "the Machine's infrastructure provisioned", 4*time.Minute, func() bool {
		return cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-node-0"}, &m) == nil &&
			ptr.Deref(m.Status.Initialization.InfrastructureProvisioned, false) && m.Spec.ProviderID != ""
	})
	if !strings.HasPrefix(m.Spec.ProviderID, "example:///demo-node-0/") {
		t.Errorf("the Machine's providerID %q", m.Spec.ProviderID)
	}
	var tm infrav1.TerraformMachine
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-node-0"}, &tm); err != nil {
		t.Fatal(err)
	}
	if tm.Status.LastRun == nil {
		t.Fatal("the TerraformMachine records no run")
	}
	c.probed(t, "the machine's apply", c.podLog(t, c.podOf(t, tm.Status.LastRun.Job)), "apply", "marker=machine")
}

// probed fails the test unless log holds the probe's line of terraform
// command op with what every runner container must report and each of
// want.
func (c *cluster) probed(t *testing.T, what, log, op string, want ...string) {
	t.Helper()
	var line string
	for _, l := range strings.Split(log, "\n") {
		if strings.HasPrefix(l, "captf-probe: op="+op+" ") {
			line = l
			break
		}
	}
	if line == "" {
		t.Errorf("%s: no probe line of terraform %s in the pod's log:\n%s", what, op, log)
		return
	}
	for _, w := range append([]string{probeUser, "rootfs=read-only", "CapEff=0000000000000000", "NoNewPrivs=1"}, want...) {
		if !strings.Contains(line, w) {
			t.Errorf("%s: the container reports %q, want %q in it", what, line, w)
		}
	}
}

// podOf is the pod of Job job.
func (c *cluster) podOf(t *testing.T, job string) *corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := c.node.Client.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{"batch.kubernetes.io/job-name": job}); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 {
		t.Fatalf("Job %s has %d pods, want 1", job, len(pods.Items))
	}
	return &pods.Items[0]
}

// podLog is the runner container's log, read through the API server from
// the kubelet.
func (c *cluster) podLog(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	b, err := c.node.Clientset.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: infrav1.RunnerContainer}).DoRaw(context.Background())
	if err != nil {
		t.Fatalf("log of pod %s: %v", pod.Name, err)
	}
	return string(b)
}

func runnerContainer(t *testing.T, pod *corev1.Pod) corev1.Container {
	t.Helper()
	for _, ct := range pod.Spec.Containers {
		if ct.Name == infrav1.RunnerContainer {
			return ct
		}
	}
	t.Fatalf("pod %s has no container %s", pod.Name, infrav1.RunnerContainer)
	return corev1.Container{}
}

// imageDigest is the digest the kubelet reports the runner container ran.
func imageDigest(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	for _, st := range pod.Status.ContainerStatuses {
		if st.Name == infrav1.RunnerContainer {
			_, d, _ := strings.Cut(st.ImageID, "@")
			return d
		}
	}
	t.Fatalf("pod %s reports no status of container %s", pod.Name, infrav1.RunnerContainer)
	return ""
}

// registryDigest is the digest ref's tag names in the node's registry now.
func (c *cluster) registryDigest(t *testing.T, ref string) string {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	d, err := remote.Head(r)
	if err != nil {
		t.Fatal(err)
	}
	return d.Digest.String()
}

// plugin runs kubectl captf with args as the administrator.
func (c *cluster) plugin(t *testing.T, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	cmd := kubectlcaptf.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	cmd.SetArgs(append(args, "--kubeconfig", c.node.Kubeconfig))
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("kubectl captf %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// wait polls ok until timeout, then fails with the manager's log and what
// the node's Jobs and pods are doing.
func (c *cluster) wait(t *testing.T, what string, timeout time.Duration, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !ok(); time.Sleep(250 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s\n%s\nmanager log: %s", what, c.describe(), c.manager.LogPath)
		}
	}
}

// describe lists the Jobs and pods of ns with their states, for a failure.
func (c *cluster) describe() string {
	ctx := context.Background()
	var b strings.Builder
	var jobs batchv1.JobList
	_ = c.node.Client.List(ctx, &jobs, client.InNamespace(ns))
	for _, j := range jobs.Items {
		fmt.Fprintf(&b, "job %s: active %d succeeded %d failed %d %v\n", j.Name, j.Status.Active, j.Status.Succeeded, j.Status.Failed, j.Status.Conditions)
	}
	var pods corev1.PodList
	_ = c.node.Client.List(ctx, &pods, client.InNamespace(ns))
	for _, p := range pods.Items {
		st, _ := json.Marshal(p.Status.ContainerStatuses)
		fmt.Fprintf(&b, "pod %s: %s %s\n", p.Name, p.Status.Phase, st)
	}
	return b.String()
}
