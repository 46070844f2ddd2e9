package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/render"
)

// errAdopt says a Job of the object exists that the reconcile did not know
// of (the cache had not seen it, or status lost it): it is taken up on the
// next pass instead of starting a second Job on the same state.
var errAdopt = errors.New("an unprocessed Job of the object exists")

// errWait says a Job was not started because the kind's Gate holds it
// back: Reconcile says why and looks again later.
type errWait struct{ *Wait }

func (e *errWait) Error() string { return e.Message }

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
	// allowDeletes, with guard and approved, is the approval hash of an
	// approved ExportsChange plan: its apply may delete or replace for
	// exactly that input set (--allow-deletes-hash); approvedHash is then
	// the plan's hash, recorded as the approved one.
	allowDeletes, approvedHash string
	// reviewedDeletes and reviewedDestroy, with allowDeletes, are the
	// addresses the approved plan's summary lists as deleted or replaced
	// and how many it deletes or replaces in all: the apply deletes no
	// other (--reviewed-delete, --reviewed-destroy).
	reviewedDeletes []string
	reviewedDestroy int32
	// unapproved names the variables whose values alone changed since the
	// last successful apply, which the approval hash leaves out (a pool's
	// rotated bootstrap data): the guarded apply shows that is all it
	// applies (--applied-inputs) or applies nothing.
	unapproved []string
	// exportsChange marks a plan Job of inputs whose held variable
	// changed (annotationExportsChange).
	exportsChange bool
	// lineage is the lineage of the state the decision to start the Job
	// read (empty: none): the Job applies nothing planned from another
	// state, such as an empty one made after the state was deleted in the
	// meantime (--state-lineage).
	lineage string
	// backup is the state backup a restore Job pushes back.
	backup *backup
	// applied: the Job runs what the last successful apply ran (its
	// inputs are root), with its image and identity; a destroy or a drift
	// check.
	applied *appliedRun
}

// clusterStarts serializes the Job starts of the objects of one cluster,
// whatever their kind, in this manager (with --leader-elect the only one
// that starts Jobs).
var clusterStarts keyedMutex

// keyedMutex is a mutex per key; a key's entry lives while it is held or
// waited for.
type keyedMutex struct {
	mu    sync.Mutex
	locks map[string]*keyedLock
}

type keyedLock struct {
	sync.Mutex
	users int
}

// lock takes key's mutex and returns what releases it.
func (k *keyedMutex) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyedLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyedLock{}
		k.locks[key] = l
	}
	l.users++
	k.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		k.mu.Lock()
		if l.users--; l.users == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}

// startJob creates a runner Job and its per-run inputs Secret and records
// it as the active Job. Before it creates one, it looks for an unprocessed
// Job of the object in a list of its cluster's Jobs that has every one
// (clusterJobs): there is at most one.
func (r *Reconciler) startJob(ctx context.Context, obj Object, root *render.Root, req jobRequest) error {
	// The kind's gate and the Job's creation are one step for the objects
	// of a cluster: otherwise a cluster and its machine could each find
	// the other's Job not there yet, and both start.
	unlock := clusterStarts.lock(clusterKey(obj))
	defer unlock()
	// One list serves the gate and the search for a Job of the object's
	// own.
	jobs, err := r.clusterJobs(ctx, obj)
	if err != nil {
		return err
	}
	if w, err := r.kind().Gate(ctx, r.Client, obj, jobs); err != nil || w != nil {
		if w != nil {
			return &errWait{w}
		}
		return err
	}
	if err := r.noUnprocessedJobAmong(ctx, obj, jobs); err != nil {
		return err
	}
	if err := r.checkLock(ctx, obj); err != nil {
		return err
	}
	identity := obj.GetRunnerSpec().IdentityRef
	if req.applied != nil {
		identity = req.applied.identityRef()
	}
	// An identity the object may not use starts nothing. Its credentials
	// are read once, here, and copied for the Job below.
	creds, err := r.credentials(ctx, obj, identity)
	if err != nil {
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
	// An approved ExportsChange apply carries an approved plan: it mounts
	// the plan key, which checks its inputs' digest.
	job := r.buildJob(obj, image, identity, req.op, req.expect, req.expect != "" || req.op == infrav1.OperationPlan || req.allowDeletes != "")
	switch req.op {
	case infrav1.OperationDrift:
		// Drift Jobs are not kept in the object's history (they would
		// push out the apply Jobs' logs): the Job controller deletes
		// each an hour after it finished.
		job.Spec.TTLSecondsAfterFinished = ptr.To(int32(driftJobTTL.Seconds()))
	case infrav1.OperationRefresh:
		// Nor are refresh Jobs, which run every minute or so.
		job.Spec.TTLSecondsAfterFinished = ptr.To(int32(refreshJobTTL.Seconds()))
	}
	if req.guard && req.expect == "" {
		// The guard's run does not mount the plan key: the plan that
		// waits for approval, if any, is made by a plan Job.
		c := &job.Spec.Template.Spec.Containers[0]
		c.Command = append(c.Command, "--guard")
		if req.allowDeletes != "" {
			// The runner checks the inputs it stages against their digest
			// in its arguments, which only the manager writes: what may
			// delete is the input set rendered here.
			key, err := r.planKey(ctx, obj)
			if err != nil {
				return err
			}
			c.Command = append(c.Command, "--allow-deletes-hash="+req.allowDeletes, "--inputs-digest="+render.RunDigest(key, root.MainTF, root.Vars),
				"--reviewed-destroy="+strconv.Itoa(int(req.reviewedDestroy)))
			for _, a := range req.reviewedDeletes {
				c.Command = append(c.Command, "--reviewed-delete="+a)
			}
		}
		if len(req.unapproved) > 0 {
			withApplied(job, InputsName(r.kind().Short(), obj.GetName()))
			c.Command = append(c.Command, "--applied-inputs="+path.Join(infrav1.PathInputs, appliedDir), "--unapproved-vars="+strings.Join(req.unapproved, ","))
		}
	}
	if req.applied == nil && (req.op == infrav1.OperationPlan || req.op == infrav1.OperationApply) {
		// The members the root replaces: the runner finds their
		// resources in the state.
		c := &job.Spec.Template.Spec.Containers[0]
		for _, id := range root.Replace {
			c.Command = append(c.Command, "--replace-member="+id)
		}
	}
	if req.lineage != "" && req.op != infrav1.OperationRestore {
		c := &job.Spec.Template.Spec.Containers[0]
		c.Command = append(c.Command, "--state-lineage="+req.lineage)
	}
	if req.exportsChange {
		job.Annotations[annotationExportsChange] = root.ApprovalHash
	}
	if req.backup != nil {
		withBackup(job, req.backup)
	}
	job.Annotations[annotationInputsHash] = root.InputsHash
	if req.op == infrav1.OperationApply {
		job.Annotations[annotationApplyPolicy] = string(policy(obj))
	}
	if req.approved {
		job.Annotations[infrav1.AnnotationApprovedPlan] = cmp.Or(req.expect, req.approvedHash)
	}
	if req.plan != "" {
		job.Annotations[infrav1.AnnotationPlan] = req.plan
	}
	if req.digest != "" {
		job.Annotations[infrav1.AnnotationImageDigest] = req.digest
	}
	if err := r.blockMove(ctx, obj, req.op); err != nil {
		return err
	}
	err = r.Client.Create(ctx, job)
	r.Jobs.created(clusterKey(obj), job, err)
	if err != nil {
		return fmt.Errorf("create %s Job: %w", req.op, err)
	}
	if req.approved {
		r.observeApproval(ctx, obj, req.plan)
	}
	// A new Job has no per-run Secret yet: no need to ask.
	if err := r.createRun(ctx, obj, job, root, creds); err != nil {
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

// noUnprocessedJobAmong is noUnprocessedJob with jobs, every Job of obj's
// cluster (clusterJobs): a Job of obj's made a moment ago is among them.
// One made under another cluster label (obj's cluster-name label changed
// since) is older, and the cache shows it; one shown unprocessed that this
// manager marked processed a moment ago is not counted.
func (r *Reconciler) noUnprocessedJobAmong(ctx context.Context, obj Object, jobs []batchv1.Job) error {
	cached, err := r.jobsOf(ctx, r.Client, obj)
	if err != nil {
		return err
	}
	read := map[types.UID]bool{}
	for _, job := range jobs {
		read[job.UID] = true
		if _, done := r.processed.Load(job.UID); controlledBy(&job, obj) && !done && !Processed(&job) {
			return fmt.Errorf("%w: %s", errAdopt, job.Name)
		}
	}
	for _, job := range cached {
		if _, done := r.processed.Load(job.UID); !read[job.UID] && !done && !Processed(&job) {
			return fmt.Errorf("%w: %s", errAdopt, job.Name)
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
		var creds map[string][]byte
		if creds, err = r.credentials(ctx, obj, jobIdentity(obj, job)); err == nil {
			err = r.createRun(ctx, obj, job, root, creds)
		}
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
	if err := r.blockMove(ctx, obj, op); err != nil {
		return err
	}
	if err := r.approvalStarted(ctx, obj, job); err != nil {
		return err
	}
	obj.GetRunnerStatus().ActiveJob = &infrav1.ActiveJob{Name: job.Name, Operation: op}
	if ready := condition(obj, infrav1.ConditionReady); op != infrav1.OperationDestroy && !IsProvisioned(obj) &&
		((ready != nil && ready.Status == metav1.ConditionFalse) || (ready == nil && op == infrav1.OperationApply)) {
		// What the object waited for (its kind's inputs, a related Job)
		// is there, its first apply failed, or it is new: Ready says the
		// first apply goes on.
		setCondition(obj, infrav1.ConditionReady, false, infrav1.ReasonProvisioning, "The first apply runs.")
	}
	switch {
	case op == infrav1.OperationPlan:
		setCondition(obj, infrav1.ConditionApplyJobSucceeded, unknown, ReasonPlanning, "A plan Job runs; its plan will wait for approval.")
	case op == infrav1.OperationDestroy:
		setCondition(obj, infrav1.ConditionReady, false, ReasonDestroying, "A destroy Job runs.")
	case op == infrav1.OperationRestore:
		setCondition(obj, infrav1.ConditionStateRestored, unknown, infrav1.ReasonRestoring, "Restore "+job.Name+" of state serial "+job.Annotations[annotationRestoreSerial]+" runs.")
	case op == infrav1.OperationDrift:
		setCondition(obj, infrav1.ConditionDriftJobSucceeded, unknown, ReasonDriftChecking, "Drift check "+job.Name+" runs.")
	case op == infrav1.OperationRefresh:
		// A refresh says nothing of the applies: status.activeJob names it.
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

// blockMove sets AnnotationBlockMove on obj before a Job of op that may
// write its state is created: such a Job must not be cut off by a move
// (the source deletes the object, and garbage collection its Jobs), and
// its outcome must be written before the objects are copied. The value
// names the object's UID, so that a copy of the object made while the Job
// ran (clusterctl gave up waiting, or the object was copied by other
// means) can tell that the annotation came from elsewhere: a run there was
// cut short.
func (r *Reconciler) blockMove(ctx context.Context, obj Object, op infrav1.Operation) error {
	if !writesState(obj, op) {
		return nil
	}
	if v, ok := obj.GetAnnotations()[AnnotationBlockMove]; ok && v == blockMoveValue(obj) {
		return nil
	}
	err := r.PatchObject(ctx, obj, func(obj Object) {
		if foreignBlockMove(obj) {
			// The evidence of the cut run stays when this one replaces it.
			annotate(obj, infrav1.AnnotationMovedMidRun, "true")
		}
		annotate(obj, AnnotationBlockMove, blockMoveValue(obj))
	})
	if err != nil {
		return fmt.Errorf("block-move annotation: %w", err)
	}
	return nil
}

// writesState reports whether a Job of op may write obj's terraform
// state. A plan Job writes none once the state exists (status holds its
// serial): terraform plan only reads it. Before that, terraform's
// kubernetes backend writes an empty state when it finds none. Every other
// Job writes it; a drift check too, by its refresh-only apply. Cut off by
// a move, a plan costs only its outcome: the copy plans again.
func writesState(obj Object, op infrav1.Operation) bool {
	return op != infrav1.OperationPlan || obj.GetRunnerStatus().StateSerial == nil
}

// appliedDir is the folder, under the inputs, of the last successful
// apply's inputs in a Job that applies only values the approval leaves out.
const appliedDir = "applied"

// withApplied adds to job's inputs the files of the last successful apply,
// which the durable inputs Secret durable keeps (keepApplied), under
// appliedDir.
func withApplied(job *batchv1.Job, durable string) {
	projectInputs(job, corev1.VolumeProjection{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: durable}, Items: []corev1.KeyToPath{
		{Key: KeyAppliedMain, Path: path.Join(appliedDir, "main.tf.json")},
		{Key: keyAppliedVars, Path: path.Join(appliedDir, "terraform.tfvars.json")},
	}}})
}

// projectInputs makes job's inputs volume the per-run Secret and, beside
// its files, the sources extra.
func projectInputs(job *batchv1.Job, extra ...corev1.VolumeProjection) {
	vols := job.Spec.Template.Spec.Volumes
	for i := range vols {
		if vols[i].Name != "inputs" || vols[i].Secret == nil {
			continue
		}
		sources := append([]corev1.VolumeProjection{{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: vols[i].Secret.SecretName}}}}, extra...)
		vols[i].VolumeSource = corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: sources}}
	}
}
