package terraformcluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/render"
	"github.com/captf/captf/internal/runner"
)

// Paths inside a runner Job's pod.
const (
	binDir     = "/captf/bin"
	runnerPath = binDir + "/captf-runner"
	workDir    = "/captf/work"
	// RunnerImagePath is where the runner image holds captf-runner.
	RunnerImagePath = "/captf-runner/captf-runner"
	// labelOperation says what a Job does.
	labelOperation = "captf.io/operation"
	// containerName is the runner container whose termination message is
	// the report.
	containerName = "terraform"
	// annotationInputsHash on a Job is the h2: hash of the inputs it ran
	// with, so a plan is recorded for the inputs it was made for even when
	// they changed while it ran.
	annotationInputsHash = "captf.io/inputs-hash"
	// jobNameLabel is the label the Job controller puts on a Job's pods.
	jobNameLabel = "batch.kubernetes.io/job-name"
)

// startJob creates a runner Job for op and its per-run inputs Secret, and
// records it as the active Job. expect is the approved hash of a gated
// apply; a plan Job and a gated apply mount the plan key.
func (r *Reconciler) startJob(ctx context.Context, tc *infrav1.TerraformCluster, root *render.Root, op infrav1.Operation, expect string, approved bool) error {
	gated := op == infrav1.OperationPlan || expect != ""
	if op == infrav1.OperationApply {
		if err := r.writeDurableInputs(ctx, tc, root); err != nil {
			return err
		}
	}
	image, err := r.jobImage(ctx, tc, op)
	if err != nil {
		return err
	}
	job := r.buildJob(tc, image, op, expect, gated, approved)
	job.Annotations[annotationInputsHash] = root.InputsHash
	if err := r.Client.Create(ctx, job); err != nil {
		return fmt.Errorf("create %s Job: %w", op, err)
	}
	run := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: runName(job.Name), Namespace: tc.Namespace, Labels: map[string]string{infrav1.LabelManaged: "true"}},
		Data:       map[string][]byte{"main.tf.json": root.MainTF, "terraform.tfvars.json": root.Vars},
	}
	if err := controllerutil.SetOwnerReference(job, run, r.Client.Scheme()); err != nil {
		return err
	}
	if err := r.Client.Create(ctx, run); err != nil {
		return fmt.Errorf("create per-run inputs: %w", err)
	}
	tc.Status.ActiveJob = &infrav1.ActiveJob{Name: job.Name, Operation: op}
	return nil
}

func (r *Reconciler) buildJob(tc *infrav1.TerraformCluster, image string, op infrav1.Operation, expect string, gated, approved bool) *batchv1.Job {
	labels := ownerLabels(tc)
	labels[labelOperation] = string(op)
	annotations := map[string]string{}
	if approved {
		annotations[infrav1.AnnotationApprovedPlan] = expect
	}
	args := []string{
		"--operation=" + string(op),
		"--inputs=" + infrav1.PathInputs, "--module=" + infrav1.PathModule, "--runtime=" + infrav1.PathRuntime,
		"--workdir=" + workDir, "--termination-message-path=" + corev1.TerminationMessagePathDefault,
	}
	volumes := []corev1.Volume{
		{Name: "inputs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{}}},
		{Name: "bin", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	mounts := []corev1.VolumeMount{
		{Name: "inputs", MountPath: infrav1.PathInputs, ReadOnly: true},
		{Name: "bin", MountPath: binDir, ReadOnly: true},
		{Name: "work", MountPath: workDir},
	}
	if gated {
		mode := int32(0o440)
		args = append(args, "--plan-key-file="+infrav1.PathPlanKey)
		volumes = append(volumes, corev1.Volume{Name: "plan-key", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: planKeyName(tc.Name), DefaultMode: &mode,
			Items: []corev1.KeyToPath{{Key: "key", Path: path.Base(infrav1.PathPlanKey)}},
		}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "plan-key", MountPath: path.Dir(infrav1.PathPlanKey), ReadOnly: true})
	}
	if expect != "" {
		args = append(args, "--expect-plan="+expect)
	}
	backoff := int32(0)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:      shorten(tc.Name, 40) + "-" + string(op) + "-" + randomSuffix(),
			Namespace: tc.Namespace, Labels: labels, Annotations: annotations,
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:          &backoff,
			ActiveDeadlineSeconds: tc.Spec.Job.ActiveDeadlineSeconds,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy:      corev1.RestartPolicyNever,
					ServiceAccountName: tc.Spec.Job.ServiceAccountName,
					Volumes:            volumes,
					InitContainers: []corev1.Container{{
						Name: "runner", Image: r.RunnerImage,
						Command:      []string{"cp", RunnerImagePath, runnerPath},
						VolumeMounts: []corev1.VolumeMount{{Name: "bin", MountPath: binDir}},
					}},
					Containers: []corev1.Container{{
						Name: containerName, Image: image,
						Command:                  append([]string{runnerPath}, args...),
						Env:                      r.JobEnv,
						Resources:                tc.Spec.Job.Resources,
						VolumeMounts:             mounts,
						TerminationMessagePath:   corev1.TerminationMessagePathDefault,
						TerminationMessagePolicy: corev1.TerminationMessageReadFile,
					}},
				},
			},
		},
	}
	// The inputs volume is the per-run Secret named after the Job.
	job.Spec.Template.Spec.Volumes[0].Secret.SecretName = runName(job.Name)
	_ = controllerutil.SetControllerReference(tc, job, r.Client.Scheme())
	return job
}

// randomSuffix is 5 random hex digits for a Job name.
func randomSuffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:5]
}

// jobFinished reports whether a Job finished and whether it succeeded.
func jobFinished(job *batchv1.Job) (finished, succeeded bool) {
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			return true, true
		case batchv1.JobFailed:
			return true, false
		}
	}
	return false, false
}

// pods lists the pods of a Job, from the API server itself.
func (r *Reconciler) pods(ctx context.Context, job *batchv1.Job) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := r.Reader.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels{jobNameLabel: job.Name}); err != nil {
		return nil, fmt.Errorf("pods of Job %s: %w", job.Name, err)
	}
	return pods.Items, nil
}

// report reads the runner's report from the termination message of the
// Job's pod.
func report(job *batchv1.Job, pods []corev1.Pod) (*runner.Message, error) {
	for _, p := range pods {
		for _, st := range p.Status.ContainerStatuses {
			if st.Name != containerName || st.State.Terminated == nil || st.State.Terminated.Message == "" {
				continue
			}
			var m runner.Message
			if err := json.Unmarshal([]byte(st.State.Terminated.Message), &m); err != nil {
				return nil, fmt.Errorf("report of Job %s: %w", job.Name, err)
			}
			return &m, nil
		}
	}
	return nil, nil
}

// deleteRun removes the per-run Secret of a finished Job.
func (r *Reconciler) deleteRun(ctx context.Context, job *batchv1.Job) error {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: runName(job.Name), Namespace: job.Namespace}}
	if err := r.Client.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete per-run inputs: %w", err)
	}
	return nil
}
