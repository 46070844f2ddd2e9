package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strconv"
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

// errAdopt says a Job of the object exists that the reconcile did not know
// of (the cache had not seen it, or status lost it): it is taken up on the
// next pass instead of starting a second Job on the same state.
var errAdopt = errors.New("an unprocessed Job of the object exists")

// jobRequest is a Job to start: what it does, what it expects, and which
// plan it carries out.
type jobRequest struct {
	op infrav1.Operation
	// expect is the hash the apply expects (--expect-plan); "" for an
	// ungated apply.
	expect string
	// approved marks an apply of an approved plan; plan names its
	// TerraformPlan.
	approved bool
	plan     string
	// digest pins the module image to what the plan Job ran.
	digest string
	// guard has an ungated apply plan first and apply nothing that
	// deletes or replaces a resource (the destructive-plan guard).
	guard bool
	// backup is the state backup a restore Job pushes back.
	backup *backup
	// applied: the Job runs what the last successful apply ran (its
	// inputs are root), with its image and identity; a destroy or a drift
	// check.
	applied *appliedRun
}

// startJob creates a runner Job and its per-run inputs Secret and records
// it as the active Job. Before it creates one, it asks the API server
// itself for an unprocessed Job of the object: there is at most one.
func (r *Reconciler) startJob(ctx context.Context, obj Object, root *render.Root, req jobRequest) error {
	if err := r.noUnprocessedJob(ctx, obj); err != nil {
		return err
	}
	if err := r.checkLock(ctx, obj); err != nil {
		return err
	}
	identity := obj.GetRunnerSpec().IdentityRef
	if req.applied != nil {
		identity = req.applied.identityRef()
	}
	// An identity the object may not use starts nothing.
	if _, err := r.credentials(ctx, obj, identity); err != nil {
		return err
	}
	if req.op == infrav1.OperationApply {
		if err := r.writeDurableInputs(ctx, obj, root); err != nil {
			return err
		}
	}
	image, err := r.jobImage(ctx, obj, req.op)
	if err != nil {
		return err
	}
	if req.digest != "" {
		image = Pin(obj.GetRunnerSpec().Image, req.digest)
	}
	if req.applied != nil {
		image = req.applied.image
	}
	job := r.buildJob(obj, image, identity, req.op, req.expect, req.expect != "" || req.op == infrav1.OperationPlan)
	if req.op == infrav1.OperationDrift {
		// Drift Jobs are not kept in the object's history (they would
		// push out the apply Jobs' logs): the Job controller deletes
		// each an hour after it finished.
		job.Spec.TTLSecondsAfterFinished = ptr.To(int32(driftJobTTL.Seconds()))
	}
	if req.guard && req.expect == "" {
		// The guard's run does not mount the plan key: the plan that
		// waits for approval, if any, is made by a plan Job.
		c := &job.Spec.Template.Spec.Containers[0]
		c.Command = append(c.Command, "--guard")
	}
	if req.backup != nil {
		withBackup(job, req.backup)
	}
	job.Annotations[annotationInputsHash] = root.InputsHash
	if req.op == infrav1.OperationApply {
		job.Annotations[annotationApplyPolicy] = string(policy(obj))
	}
	if req.approved {
		job.Annotations[infrav1.AnnotationApprovedPlan] = req.expect
	}
	if req.plan != "" {
		job.Annotations[infrav1.AnnotationPlan] = req.plan
	}
	if req.digest != "" {
		job.Annotations[infrav1.AnnotationImageDigest] = req.digest
	}
	if err := r.blockMove(ctx, obj); err != nil {
		return err
	}
	if err := r.Client.Create(ctx, job); err != nil {
		return fmt.Errorf("create %s Job: %w", req.op, err)
	}
	// A new Job has no per-run Secret yet: no need to ask.
	if err := r.createRun(ctx, obj, job, root); err != nil {
		return fmt.Errorf("per-run inputs of Job %s: %w", job.Name, err)
	}
	return r.activate(ctx, obj, job)
}

// noUnprocessedJob asks the API server itself, not the cache, for a Job of
// obj whose outcome is not recorded yet: errAdopt when there is one, which
// the next pass takes up.
func (r *Reconciler) noUnprocessedJob(ctx context.Context, obj Object) error {
	jobs, err := r.jobsOf(ctx, r.Reader, obj)
	if err != nil {
		return err
	}
	for i := range jobs {
		if !Processed(&jobs[i]) {
			return fmt.Errorf("%w: %s", errAdopt, jobs[i].Name)
		}
	}
	return nil
}

// resume makes a Job that runs the active one: its per-run inputs Secret
// exists, an approved apply has moved its plan to Approved and announced
// it, and status.activeJob names it. startJob calls it for a new Job; a
// reconcile calls it for a running Job that status does not name (its
// start was cut short). Every step is idempotent.
func (r *Reconciler) resume(ctx context.Context, obj Object, root *render.Root, job *batchv1.Job) error {
	var run corev1.Secret
	err := r.Reader.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: RunName(job.Name)}, &run)
	if apierrors.IsNotFound(err) {
		if root == nil || root.InputsHash != job.Annotations[annotationInputsHash] {
			// Its inputs were never written and can no longer be: the pod
			// waits for the volume and never ran. Delete it; what is due
			// starts anew.
			return r.dropJob(ctx, obj, job)
		}
		err = r.createRun(ctx, obj, job, root)
	}
	if err != nil {
		return fmt.Errorf("per-run inputs of Job %s: %w", job.Name, err)
	}
	return r.activate(ctx, obj, job)
}

// activate records a Job whose per-run Secret exists as the active one:
// an approved apply moves its plan to Approved and announces it, and
// status.activeJob names it.
func (r *Reconciler) activate(ctx context.Context, obj Object, job *batchv1.Job) error {
	op := infrav1.Operation(job.Labels[LabelOperation])
	// Set before the Job was created; again for a Job taken up whose start
	// was cut short.
	if err := r.blockMove(ctx, obj); err != nil {
		return err
	}
	if err := r.approvalStarted(ctx, obj, job); err != nil {
		return err
	}
	obj.GetRunnerStatus().ActiveJob = &infrav1.ActiveJob{Name: job.Name, Operation: op}
	switch {
	case op == infrav1.OperationPlan:
		setCondition(obj, infrav1.ConditionApplyJobSucceeded, unknown, ReasonPlanning, "A plan Job runs; its plan will wait for approval.")
	case op == infrav1.OperationDestroy:
		setCondition(obj, infrav1.ConditionReady, false, ReasonDestroying, "A destroy Job runs.")
	case op == infrav1.OperationRestore:
		setCondition(obj, infrav1.ConditionStateRestored, unknown, infrav1.ReasonRestoring, "Restore "+job.Name+" of state serial "+job.Annotations[annotationRestoreSerial]+" runs.")
	case op == infrav1.OperationDrift:
		setCondition(obj, infrav1.ConditionDriftJobSucceeded, unknown, ReasonDriftChecking, "Drift check "+job.Name+" runs.")
	case job.Annotations[infrav1.AnnotationApprovedPlan] != "":
		setCondition(obj, infrav1.ConditionApplyJobSucceeded, unknown, ReasonApplying, "The approved plan is being applied.")
	case slices.Contains(job.Spec.Template.Spec.Containers[0].Command, "--guard"):
		setCondition(obj, infrav1.ConditionApplyJobSucceeded, unknown, ReasonApplying, "An apply Job runs; it plans first and applies nothing that deletes or replaces a resource.")
	default:
		setCondition(obj, infrav1.ConditionApplyJobSucceeded, unknown, ReasonApplying, "An apply Job runs.")
	}
	return nil
}

// approvalStarted records that an approved apply Job started: its
// TerraformPlan moves to Approved and PlanApproved is announced, once. A
// reconcile does it when it starts or adopts the Job, and again when it
// handles the finished Job, for a Job that finished before its start was
// recorded (the manager killed, a write failed).
func (r *Reconciler) approvalStarted(ctx context.Context, obj Object, job *batchv1.Job) error {
	hash := job.Annotations[infrav1.AnnotationApprovedPlan]
	if hash == "" {
		return nil
	}
	plan := job.Annotations[infrav1.AnnotationPlan]
	by, err := r.approvedBy(ctx, obj, hash)
	if err != nil {
		return err
	}
	if by == "" {
		by = "an approval that has since been consumed"
	}
	if err := r.approvePlan(ctx, plan, obj.GetNamespace(), by); err != nil {
		return err
	}
	key := plan
	if key == "" {
		key = job.Name
	}
	return r.announce(ctx, obj, announce{Key: key, Type: corev1.EventTypeNormal, Reason: infrav1.EventPlanApproved, Action: "Apply", Related: job.Name,
		Note: fmt.Sprintf("Plan %s approved by %s; an apply Job runs with --expect-plan.", hash, by)})
}

// createRun writes the per-run Secrets of job, owned by the Job: the copy
// of its credentials first, then its inputs, so that inputs found mean
// credentials written.
func (r *Reconciler) createRun(ctx context.Context, obj Object, job *batchv1.Job, root *render.Root) error {
	identity := jobIdentity(obj, job)
	creds, err := r.credentials(ctx, obj, identity)
	if err != nil {
		return err
	}
	if identity != nil {
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
		if ref := metav1.GetControllerOf(&job); ref != nil && ref.UID == obj.GetUID() {
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

// Processed reports whether a Job's outcome is fully recorded.
func Processed(job *batchv1.Job) bool { return job.Annotations[infrav1.AnnotationProcessed] == "true" }

func (r *Reconciler) buildJob(obj Object, image string, identity *infrav1.IdentityReference, op infrav1.Operation, expect string, gated bool) *batchv1.Job {
	labels := OwnerLabels(r.kind(), obj)
	labels[LabelOperation] = string(op)
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

// withBackup adds the chunks of a state backup to a restore Job's inputs,
// as backup/chunk-<n> beside the per-run files, and records its serial.
func withBackup(job *batchv1.Job, b *backup) {
	vols := job.Spec.Template.Spec.Volumes
	for i := range vols {
		if vols[i].Name != "inputs" || vols[i].Secret == nil {
			continue
		}
		sources := []corev1.VolumeProjection{{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: vols[i].Secret.SecretName}}}}
		for n, s := range b.secrets() {
			key := ChunkKey(n)
			sources = append(sources, corev1.VolumeProjection{Secret: &corev1.SecretProjection{
				LocalObjectReference: corev1.LocalObjectReference{Name: s.Name},
				Items:                []corev1.KeyToPath{{Key: key, Path: path.Join(runner.BackupDir, key)}},
			}})
		}
		vols[i].VolumeSource = corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: sources}}
	}
	job.Annotations[annotationRestoreSerial] = strconv.FormatInt(b.serial(), 10)
	if d := b.first.Annotations[annotationStateSum]; d != "" {
		// The runner checks each chunk against its digest before it
		// pushes anything, and names a chunk that differs.
		c := &job.Spec.Template.Spec.Containers[0]
		c.Command = append(c.Command, "--backup-digests="+d)
	}
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
