package testnode

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/runner"
	"github.com/captf/captf/internal/testenv"
	"github.com/captf/captf/internal/tftest"
)

// TestNodeRunsARunnerJob runs a plan Job the way the manager will build
// one (inputs and plan key from Secrets, the module image, the runner
// binary) on a real API server, with the real captf-runner and terraform.
func TestNodeRunsARunnerJob(t *testing.T) {
	env := testenv.Start(t, "../..")
	ctx := context.Background()
	tf := tftest.Terraform(t)
	for _, kv := range tftest.Env(t) {
		k, v, _ := bytes.Cut([]byte(kv), []byte("="))
		t.Setenv(string(k), string(v))
	}

	bin := filepath.Join(t.TempDir(), "captf-runner")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/captf-runner").CombinedOutput(); err != nil {
		t.Fatalf("build captf-runner: %v\n%s", err, out)
	}
	runtimeDir := t.TempDir()
	if err := os.Symlink(tf.Path, filepath.Join(runtimeDir, "terraform")); err != nil {
		t.Fatal(err)
	}
	module, _ := filepath.Abs("../runner/testdata/module")

	n := &Node{Client: env.Client, Namespace: "default", Images: map[string][]Image{
		"example.test/module:1": {{Path: infrav1.PathModule, Dir: module}, {Path: infrav1.PathRuntime, Dir: runtimeDir}},
	}}
	n.Start(t)

	secrets := []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "inputs", Namespace: "default"}, Data: map[string][]byte{
			"main.tf.json":          []byte(`{"variable":{"size":{},"token":{"sensitive":true}},"module":{"m":{"source":"./module","size":"${var.size}","token":"${var.token}"}}}`),
			"terraform.tfvars.json": []byte(`{"size":"small","token":"CANARY-NODE-SECRET"}`),
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: "plankey", Namespace: "default"}, Data: map[string][]byte{"key": bytes.Repeat([]byte{7}, 32)}},
	}
	for _, s := range secrets {
		if err := env.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	mode := int32(0o440)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "plan-1", Namespace: "default"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Volumes: []corev1.Volume{
				{Name: "inputs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "inputs"}}},
				{Name: "plan-key", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "plankey", DefaultMode: &mode}}},
				{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
			Containers: []corev1.Container{{
				Name: "runner", Image: "example.test/module:1",
				Command: []string{bin, "--operation=plan",
					"--inputs=" + infrav1.PathInputs, "--module=" + infrav1.PathModule, "--runtime=" + infrav1.PathRuntime,
					"--plan-key-file=" + infrav1.PathPlanKey, "--workdir=/captf/work", "--termination-message-path=/dev/termination-log"},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "inputs", MountPath: infrav1.PathInputs, ReadOnly: true},
					{Name: "plan-key", MountPath: filepath.Dir(infrav1.PathPlanKey), ReadOnly: true},
					{Name: "work", MountPath: "/captf/work"},
				},
			}},
		}}},
	}
	if err := env.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}

	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			t.Fatal(err)
		}
		if job.Status.Succeeded > 0 || job.Status.Failed > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the Job did not finish within 60s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	var pods corev1.PodList
	if err := env.Client.List(ctx, &pods, client.InNamespace("default"), client.MatchingLabels{"batch.kubernetes.io/job-name": "plan-1"}); err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods of the Job: %v %v", pods.Items, err)
	}
	st := pods.Items[0].Status.ContainerStatuses
	if job.Status.Succeeded != 1 || len(st) != 1 || st[0].State.Terminated == nil {
		t.Fatalf("job %+v, container statuses %+v", job.Status, st)
	}
	var m runner.Message
	if err := json.Unmarshal([]byte(st[0].State.Terminated.Message), &m); err != nil {
		t.Fatalf("termination message %q: %v", st[0].State.Terminated.Message, err)
	}
	if m.Outcome != runner.OutcomePlanned || m.Plan == nil || m.Plan.Add != 1 {
		t.Errorf("report %+v", m)
	}
	if bytes.Contains([]byte(st[0].State.Terminated.Message), []byte("CANARY")) {
		t.Error("the report holds a value")
	}
}
