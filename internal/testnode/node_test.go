package testnode

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/render"
	"github.com/captf/captf/internal/runner"
	"github.com/captf/captf/internal/testenv"
	"github.com/captf/captf/internal/tftest"
)

const image = "example.test/module:1"

// fixture is a real API server, the test node, the real captf-runner and
// the real terraform, and the module of internal/runner/testdata as the
// image's module.
type fixture struct {
	t    *testing.T
	env  *testenv.Env
	bin  string
	node *Node
}

func newFixture(t *testing.T) *fixture {
	env := testenv.Start(t, "../..")
	tf := tftest.Terraform(t)
	bin := filepath.Join(t.TempDir(), "captf-runner")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/captf-runner").CombinedOutput(); err != nil {
		t.Fatalf("build captf-runner: %v\n%s", err, out)
	}
	runtimeDir := t.TempDir()
	if err := os.Symlink(tf.Path, filepath.Join(runtimeDir, "terraform")); err != nil {
		t.Fatal(err)
	}
	module, _ := filepath.Abs("../runner/testdata/module")
	n := &Node{Client: env.Client, Namespace: "default",
		Images: map[string][]Image{image: {{Path: infrav1.PathModule, Dir: module}, {Path: infrav1.PathRuntime, Dir: runtimeDir}}},
		Env:    []string{"KUBE_CONFIG_PATH=" + env.Kubeconfig(t)},
	}
	n.Start(t)
	return &fixture{t: t, env: env, bin: bin, node: n}
}

func (f *fixture) secret(name string, data map[string][]byte) {
	f.t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Data: data}
	if err := f.env.Client.Create(context.Background(), s); err != nil {
		f.t.Fatal(err)
	}
}

// job runs a runner Job the way the manager builds one and returns the
// Job, its container status and its report.
func (f *fixture) job(name, op, inputs string, extra ...string) (*batchv1.Job, *corev1.ContainerStateTerminated, runner.Message) {
	f.t.Helper()
	ctx := context.Background()
	mode := int32(0o440)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Volumes: []corev1.Volume{
				{Name: "inputs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: inputs}}},
				{Name: "plan-key", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "plankey", DefaultMode: &mode}}},
				{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
			Containers: []corev1.Container{{
				Name: "runner", Image: image,
				Command: append([]string{f.bin, "--operation=" + op,
					"--inputs=" + infrav1.PathInputs, "--module=" + infrav1.PathModule, "--runtime=" + infrav1.PathRuntime,
					"--plan-key-file=" + infrav1.PathPlanKey, "--workdir=/captf/work", "--termination-message-path=/dev/termination-log"}, extra...),
				VolumeMounts: []corev1.VolumeMount{
					{Name: "inputs", MountPath: infrav1.PathInputs, ReadOnly: true},
					{Name: "plan-key", MountPath: filepath.Dir(infrav1.PathPlanKey), ReadOnly: true},
					{Name: "work", MountPath: "/captf/work"},
				},
			}},
		}}},
	}
	if err := f.env.Client.Create(ctx, job); err != nil {
		f.t.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second)
	for job.Status.Succeeded == 0 && job.Status.Failed == 0 {
		if time.Now().After(deadline) {
			f.t.Fatalf("Job %s did not finish within 90s", name)
		}
		time.Sleep(100 * time.Millisecond)
		if err := f.env.Client.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			f.t.Fatal(err)
		}
	}
	var pods corev1.PodList
	if err := f.env.Client.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"batch.kubernetes.io/job-name": name}); err != nil || len(pods.Items) != 1 {
		f.t.Fatalf("pods of Job %s: %v %v", name, pods.Items, err)
	}
	st := pods.Items[0].Status.ContainerStatuses
	if len(st) != 1 || st[0].State.Terminated == nil {
		f.t.Fatalf("container statuses %+v", st)
	}
	term := st[0].State.Terminated
	if strings.Contains(term.Message, "CANARY") {
		f.t.Fatalf("the report holds a value: %s", term.Message)
	}
	var m runner.Message
	if err := json.Unmarshal([]byte(term.Message), &m); err != nil {
		f.t.Fatalf("termination message %q: %v", term.Message, err)
	}
	return job, term, m
}

// TestRunnerJobsOnTheNode runs Jobs the way the manager will build them
// (inputs and plan key from Secrets, the module image, the runner binary),
// with the root module rendered by internal/render keeping its state in the
// real API server through terraform's kubernetes backend.
func TestRunnerJobsOnTheNode(t *testing.T) {
	f := newFixture(t)
	key := bytes.Repeat([]byte{7}, 32)
	f.secret("plankey", map[string][]byte{"key": key})
	rendered := func(size string) map[string][]byte {
		root, err := render.Render(key, render.Request{
			StateSuffix: "captf-tfc-demo", Namespace: "default", Image: image,
			Variables: map[string]render.Variable{
				"size":  {Value: json.RawMessage(`"` + size + `"`)},
				"token": {Value: json.RawMessage(`"CANARY-NODE-SECRET"`), Sensitive: true},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		return map[string][]byte{"main.tf.json": root.MainTF, "terraform.tfvars.json": root.Vars, "hash": []byte(root.InputsHash)}
	}

	// The first apply, ungated, keeps its state in a Secret and records the
	// inputs hash there.
	first := rendered("small")
	f.secret("run-1", first)
	job, term, m := f.job("apply-1", "apply", "run-1")
	if job.Status.Succeeded != 1 || term.ExitCode != 0 || m.Outcome != runner.OutcomeApplied {
		t.Fatalf("apply: job %+v exit %d report %+v", job.Status, term.ExitCode, m)
	}
	if got := stateHash(t, f.env.Client, "tfstate-default-captf-tfc-demo"); got != string(first["hash"]) {
		t.Errorf("state records inputs hash %q, want %q", got, first["hash"])
	}

	// Nothing changed: a plan Job reports the empty plan.
	f.secret("run-2", first)
	if _, _, m := f.job("plan-2", "plan", "run-2"); m.Outcome != runner.OutcomePlanned || !m.Plan.Empty() {
		t.Fatalf("plan of unchanged inputs: %+v", m)
	}

	// New inputs: a plan Job (the update; the new inputs hash output is
	// captf's, not counted), then the approved apply.
	second := rendered("large")
	f.secret("run-3", second)
	_, _, plan := f.job("plan-3", "plan", "run-3")
	if plan.Outcome != runner.OutcomePlanned || plan.Plan.Change != 1 || plan.Plan.OutputChanges != 0 {
		t.Fatalf("plan of new inputs: %+v", plan.Plan)
	}
	f.secret("run-4", second)
	if job, _, m := f.job("apply-4", "apply", "run-4", "--expect-plan="+plan.Plan.PlanHash); job.Status.Succeeded != 1 || m.Outcome != runner.OutcomeApplied {
		t.Fatalf("approved apply: %+v %+v", job.Status, m)
	}
	if got := stateHash(t, f.env.Client, "tfstate-default-captf-tfc-demo"); got != string(second["hash"]) {
		t.Errorf("state records inputs hash %q, want %q", got, second["hash"])
	}

	// A Job that fails is a failed Job with its report.
	f.secret("run-5", map[string][]byte{"main.tf.json": []byte(`{}`)})
	job, term, m = f.job("apply-5", "apply", "run-5", "--expect-plan="+plan.Plan.PlanHash)
	if job.Status.Failed != 1 || term.ExitCode != runner.ExitBadInput || m.Outcome != runner.OutcomeBadInput {
		t.Fatalf("bad inputs: job %+v exit %d report %+v", job.Status, term.ExitCode, m)
	}
}

// stateHash reads the inputs hash recorded in the terraform state the
// kubernetes backend keeps in a Secret.
func stateHash(t *testing.T, c client.Client, secret string) string {
	t.Helper()
	var s corev1.Secret
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: secret}, &s); err != nil {
		t.Fatalf("state Secret: %v", err)
	}
	h, err := render.StateInputsHash(s.Data["tfstate"])
	if err != nil {
		t.Fatal(err)
	}
	return h
}
