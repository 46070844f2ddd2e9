package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/render"
	"github.com/captf/captf/internal/runner"
)

// Paths inside a runner Job's pod.
const (
	binDir     = "/captf/bin"
	RunnerPath = binDir + "/captf-runner"
	workDir    = "/captf/work"
	// RunnerImagePath is where the runner image holds captf-runner. The
	// init container runs it as "install RunnerPath": the image is
	// scratch, with no cp (internal/image builds it).
	RunnerImagePath = "/captf-runner/captf-runner"
	// LabelOperation says what a Job does.
	LabelOperation = "captf.io/operation"
	// containerName is the runner container whose termination message is
	// the report.
	containerName = infrav1.RunnerContainer
	// annotationInputsHash on a Job is the h2: hash of the inputs it ran
	// with, so a plan is recorded for the inputs it was made for even when
	// they changed while it ran.
	annotationInputsHash = "captf.io/inputs-hash"
	// annotationExportsChange on a plan Job is the approval hash of inputs
	// whose held variable (Kind.Held: a pool's exports) differs from what
	// the last apply ran: a plan of them that deletes or replaces waits as
	// an ExportsChange plan binding that hash.
	annotationExportsChange = "captf.io/exports-change"
	// JobNameLabel is the label the Job controller puts on a Job's pods.
	JobNameLabel = "batch.kubernetes.io/job-name"
	// AnnotationCreatedAt on a Job is when the manager created it, to the
	// nanosecond (createdAtLayout): creation timestamps have a resolution
	// of a second, and a runner Job can take less, so this orders the
	// Jobs of one object created within the same second.
	AnnotationCreatedAt = "captf.io/created-at"
	// annotationApplyPolicy on an apply Job is the applyPolicy it was
	// created under: a Job that has not started is dropped when the
	// object's policy is no longer that (stillAllowed).
	annotationApplyPolicy = "captf.io/apply-policy"
	// createdAtLayout is fixed-width UTC, so its values compare as strings.
	createdAtLayout = "2006-01-02T15:04:05.000000000Z"
)

// createRun writes the per-run Secrets of job, owned by the Job: the copy
// of its credentials (creds, read for the Job's identity) first, then its
// inputs, so that inputs found mean credentials written.
func (r *Reconciler) createRun(ctx context.Context, obj Object, job *batchv1.Job, root *render.Root, creds map[string][]byte) error {
	if jobIdentity(obj, job) != nil {
		if err := r.createCredentials(ctx, job, creds); err != nil {
			return err
		}
	}
	run := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: RunName(job.Name), Namespace: job.Namespace, Labels: map[string]string{infrav1.LabelManaged: "true"}},
		Data:       map[string][]byte{"main.tf.json": root.MainTF, "terraform.tfvars.json": root.Vars},
	}
	if err := controllerutil.SetOwnerReference(job, run, r.Client.Scheme()); err != nil {
		return err
	}
	if err := r.Client.Create(ctx, run); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// jobIdentity is the identity job was built for: its annotation, or for a
// Job made before the annotation existed, spec.identityRef.
func jobIdentity(obj Object, job *batchv1.Job) *infrav1.IdentityReference {
	v, ok := job.Annotations[infrav1.AnnotationIdentity]
	if !ok {
		return obj.GetRunnerSpec().IdentityRef
	}
	return parseIdentity(v)
}

// dropJob deletes a Job that never ran and forgets it.
func (r *Reconciler) dropJob(ctx context.Context, obj Object, job *batchv1.Job) error {
	if err := r.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Job %s: %w", job.Name, err)
	}
	if err := r.deleteRun(ctx, job); err != nil {
		return err
	}
	if a := obj.GetRunnerStatus().ActiveJob; a != nil && a.Name == job.Name {
		obj.GetRunnerStatus().ActiveJob = nil
	}
	return nil
}

// jobsOf lists the runner Jobs obj controls, through reader: the cache, or
// the API server itself before a Job is created.
func (r *Reconciler) jobsOf(ctx context.Context, reader client.Reader, obj Object) ([]batchv1.Job, error) {
	var list batchv1.JobList
	if err := reader.List(ctx, &list, client.InNamespace(obj.GetNamespace()), client.MatchingLabels(OwnerLabels(r.kind(), obj))); err != nil {
		return nil, fmt.Errorf("list Jobs: %w", err)
	}
	jobs := list.Items[:0]
	for _, job := range list.Items {
		if controlledBy(&job, obj) {
			jobs = append(jobs, job)
		}
	}
	sort.Slice(jobs, func(i, j int) bool {
		a, b := jobs[i].CreationTimestamp, jobs[j].CreationTimestamp
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		// Within one second: the manager's own record (a Job made before
		// it wrote one is the older). The random name suffix says nothing.
		if x, y := jobs[i].Annotations[AnnotationCreatedAt], jobs[j].Annotations[AnnotationCreatedAt]; x != y {
			return x < y
		}
		return jobs[i].Name < jobs[j].Name
	})
	return jobs, nil
}

// policy is obj's applyPolicy, Automatic when unset.
func policy(obj Object) infrav1.ApplyPolicy {
	if obj.GetRunnerSpec().ApplyPolicy == "" {
		return infrav1.ApplyAutomatic
	}
	return obj.GetRunnerSpec().ApplyPolicy
}

// controlledBy reports whether obj is job's controller.
func controlledBy(job *batchv1.Job, obj Object) bool {
	ref := metav1.GetControllerOf(job)
	return ref != nil && ref.UID == obj.GetUID()
}

// Processed reports whether a Job's outcome is fully recorded.
func Processed(job *batchv1.Job) bool { return job.Annotations[infrav1.AnnotationProcessed] == "true" }

func (r *Reconciler) buildJob(obj Object, image string, identity *infrav1.IdentityReference, op infrav1.Operation, expect string, gated bool) *batchv1.Job {
	labels := OwnerLabels(r.kind(), obj)
	labels[LabelOperation] = string(op)
	labels[infrav1.LabelCluster] = NameLabel(ClusterName(obj))
	annotations := map[string]string{AnnotationCreatedAt: time.Now().UTC().Format(createdAtLayout)}
	// The identity the Job runs with, "" for none; a Job from before this
	// annotation runs with spec.identityRef (jobIdentity).
	annotations[infrav1.AnnotationIdentity] = ""
	if identity != nil {
		annotations[infrav1.AnnotationIdentity] = identity.Kind + "/" + identity.Name
	}
	args := []string{
		"--operation=" + string(op),
		"--inputs=" + infrav1.PathInputs, "--module=" + infrav1.PathModule, "--runtime=" + infrav1.PathRuntime,
		"--workdir=" + workDir, "--termination-message-path=" + corev1.TerminationMessagePathDefault,
	}
	name := shorten(obj.GetName(), 40) + "-" + string(op) + "-" + randomSuffix()
	volumes := []corev1.Volume{
		// The per-run Secrets are named after the Job.
		{Name: "inputs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: RunName(name)}}},
		{Name: "bin", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		// The root filesystem is read-only: terraform's home and the
		// runner's temporary files (the binary plan file) go here.
		{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	mounts := []corev1.VolumeMount{
		{Name: "inputs", MountPath: infrav1.PathInputs, ReadOnly: true},
		{Name: "bin", MountPath: binDir, ReadOnly: true},
		{Name: "work", MountPath: workDir},
		{Name: "tmp", MountPath: tmpDir},
	}
	var envFrom []corev1.EnvFromSource
	if identity != nil {
		mode := int32(0o440)
		creds := CredentialsName(name)
		volumes = append(volumes, corev1.Volume{Name: "credentials", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: creds, DefaultMode: &mode}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "credentials", MountPath: CredentialsPath, ReadOnly: true})
		envFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: creds}}}}
	}
	if gated {
		mode := int32(0o440)
		args = append(args, "--plan-key-file="+infrav1.PathPlanKey)
		volumes = append(volumes, corev1.Volume{Name: "plan-key", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: PlanKeyName(r.kind().Short(), obj.GetName()), DefaultMode: &mode,
			Items: []corev1.KeyToPath{{Key: "key", Path: path.Base(infrav1.PathPlanKey)}},
		}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "plan-key", MountPath: path.Dir(infrav1.PathPlanKey), ReadOnly: true})
	}
	if expect != "" {
		args = append(args, "--expect-plan="+expect)
	}
	backoff := int32(0)
	js := obj.GetRunnerSpec().Jobs
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: obj.GetNamespace(), Labels: labels, Annotations: annotations,
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:          &backoff,
			ActiveDeadlineSeconds: js.ActiveDeadlineSeconds,
			Template: corev1.PodTemplateSpec{
				// The pod's annotation names its object whole (the label
				// may be shortened), for the pods' watch.
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{infrav1.LabelOwnerName: obj.GetName()}},
				Spec: corev1.PodSpec{
					RestartPolicy:      corev1.RestartPolicyNever,
					ServiceAccountName: js.ServiceAccountName,
					ImagePullSecrets:   js.ImagePullSecrets,
					NodeSelector:       js.NodeSelector,
					Tolerations:        js.Tolerations,
					SecurityContext:    podSecurity(js.SecurityContext),
					Volumes:            volumes,
					InitContainers: []corev1.Container{{
						Name: "runner", Image: r.RunnerImage,
						Command:         []string{RunnerImagePath, "install", RunnerPath},
						VolumeMounts:    []corev1.VolumeMount{{Name: "bin", MountPath: binDir}},
						SecurityContext: containerSecurity(),
						Resources:       corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}},
					}},
					Containers: []corev1.Container{{
						Name: containerName, Image: image,
						Command:                  append([]string{RunnerPath}, args...),
						Env:                      r.jobEnv(js.Env),
						EnvFrom:                  envFrom,
						Resources:                jobResources(js.Resources),
						VolumeMounts:             mounts,
						SecurityContext:          containerSecurity(),
						TerminationMessagePath:   corev1.TerminationMessagePathDefault,
						TerminationMessagePolicy: corev1.TerminationMessageReadFile,
					}},
				},
			},
		},
	}
	_ = controllerutil.SetControllerReference(obj, job, r.Client.Scheme())
	return job
}

// hasCredentials reports whether job mounts a per-run copy of
// credentials; a Job without one costs no request to delete it.
func hasCredentials(job *batchv1.Job) bool {
	for _, v := range job.Spec.Template.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == CredentialsName(job.Name) {
			return true
		}
	}
	return false
}

// tmpDir is the runner container's writable /tmp (and HOME).
const tmpDir = "/tmp"

// NonRoot is the user and group a runner Job runs as unless
// spec.jobs.securityContext says otherwise.
const NonRoot = int64(65532)

// podSecurity: never root, the runtime's default seccomp profile, and the
// mounted Secrets (plan key, credentials) readable through fsGroup.
func podSecurity(sc *infrav1.JobSecurityContext) *corev1.PodSecurityContext {
	user, group, fs := NonRoot, NonRoot, NonRoot
	if sc != nil {
		user = ptr.Deref(sc.RunAsUser, user)
		group = ptr.Deref(sc.RunAsGroup, group)
		fs = ptr.Deref(sc.FSGroup, fs)
	}
	return &corev1.PodSecurityContext{
		RunAsNonRoot: ptr.To(true), RunAsUser: &user, RunAsGroup: &group, FSGroup: &fs,
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// containerSecurity is every runner container's: a read-only root
// filesystem, no privilege escalation, no capabilities.
func containerSecurity() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		ReadOnlyRootFilesystem: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false), RunAsNonRoot: ptr.To(true),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

// jobResources are spec.jobs.resources, or requests of 250m CPU and 512Mi
// with a 2Gi memory limit: terraform with a large provider needs about 1Gi.
func jobResources(set *corev1.ResourceRequirements) corev1.ResourceRequirements {
	if set != nil {
		return *set
	}
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
	}
}

// jobEnv is the runner container's environment: spec.jobs.env, then the
// manager's own (how terraform's backend reaches the API server), then
// HOME and TMPDIR on the writable /tmp. Later entries win, so neither a
// spec nor the manager can move those two.
func (r *Reconciler) jobEnv(spec []corev1.EnvVar) []corev1.EnvVar {
	env := append(append([]corev1.EnvVar(nil), spec...), r.JobEnv...)
	return append(env, corev1.EnvVar{Name: "HOME", Value: tmpDir}, corev1.EnvVar{Name: "TMPDIR", Value: tmpDir})
}

// randomSuffix is 5 random hex digits for a Job name.
func randomSuffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)[:5]
}

// JobFinished reports whether a Job finished and whether it succeeded.
func JobFinished(job *batchv1.Job) (finished, succeeded bool) {
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
	if err := r.Reader.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels{JobNameLabel: job.Name}); err != nil {
		return nil, fmt.Errorf("pods of Job %s: %w", job.Name, err)
	}
	return pods.Items, nil
}

// report reads the runner's report from the termination message of the
// Job's pod: nil when there is none, unreadable when it is not a report.
func report(pods []corev1.Pod) (msg *runner.Message, unreadable bool) {
	for _, p := range pods {
		for _, st := range p.Status.ContainerStatuses {
			if st.Name != containerName || st.State.Terminated == nil || st.State.Terminated.Message == "" {
				continue
			}
			var m runner.Message
			if err := json.Unmarshal([]byte(st.State.Terminated.Message), &m); err != nil || m.Outcome == "" {
				return nil, true
			}
			return &m, false
		}
	}
	return nil, false
}

// deleteRun removes the per-run Secrets of a finished Job: its inputs and
// the copy of its credentials.
func (r *Reconciler) deleteRun(ctx context.Context, job *batchv1.Job) error {
	names := []string{RunName(job.Name)}
	if hasCredentials(job) {
		names = append(names, CredentialsName(job.Name))
	}
	for _, name := range names {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: job.Namespace}}
		if err := r.Client.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete per-run Secret %s: %w", name, err)
		}
	}
	return nil
}

// driftJobTTL is how long a finished drift Job stays (its log with it)
// before the Job controller deletes it.
const driftJobTTL = time.Hour

// refreshJobTTL is how long a finished refresh Job stays: long enough for
// its outcome to be recorded and its log read after a failure.
const refreshJobTTL = 10 * time.Minute

// annotationRestoreSerial on a restore Job is the serial it pushes back.
const annotationRestoreSerial = "captf.io/restore-serial"
