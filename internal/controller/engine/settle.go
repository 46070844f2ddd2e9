package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/render"
)

// scope is one reconcile of one object: the object as the reconcile
// changes it, and its status as last written, so that every status write
// sends only what changed (and no resourceVersion: the status is this
// manager's alone, and a concurrent write of the object's metadata or
// spec, such as Cluster API setting an owner reference, must not fail it).
type scope struct {
	obj Object
	// written is the object as its status was last written.
	written Object
	// paused: the object is paused; steps that wait for the pause to be
	// lifted are left out (reconcilePaused).
	paused bool
	// processed names the Jobs this reconcile marked processed, which the
	// cache may not show yet (releaseMove).
	processed map[string]bool
}

func newScope(obj Object) *scope {
	return &scope{obj: obj, written: obj.DeepCopyObject().(Object)}
}

// patchStatus writes what changed in the status since it was last
// written, as a merge patch of the status alone.
func (r *Reconciler) patchStatus(ctx context.Context, s *scope) error {
	base := s.obj.DeepCopyObject().(Object)
	r.kind().CopyStatus(base, s.written)
	if equality.Semantic.DeepEqual(base, s.obj) {
		// An idle re-check changes nothing: an empty patch would still be
		// a request per object per re-check.
		return nil
	}
	written := s.obj.DeepCopyObject().(Object)
	if err := r.Client.Status().Patch(ctx, s.obj, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	r.kind().CopyStatus(s.obj, written)
	s.written = written
	return nil
}

// ReasonOutcomeNotRecorded: a Job finished, but a step of recording its
// outcome failed (an API error, an unreachable webhook); it is retried
// with a backoff and no other Job starts meanwhile.
const ReasonOutcomeNotRecorded = "OutcomeNotRecorded"

// settleJobs processes every finished Job of the object that is not yet
// processed, oldest first, and returns the Job that still runs, if any,
// after making sure its start is complete (resume). root is nil when the
// inputs cannot be rendered now; deleting drops the steps of outcomes the
// object no longer needs.
func (r *Reconciler) settleJobs(ctx context.Context, s *scope, root *render.Root, deleting bool) (*batchv1.Job, error) {
	obj := s.obj
	jobs, err := r.jobsOf(ctx, r.Client, obj)
	if err != nil {
		return nil, err
	}
	if a := obj.GetRunnerStatus().ActiveJob; a != nil && !hasJob(jobs, a.Name) {
		// Not in the cache yet, or gone: ask the API server.
		job := &batchv1.Job{}
		err := r.Reader.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: a.Name}, job)
		switch {
		case apierrors.IsNotFound(err):
			// Deleted before it finished: nothing to record, but an apply
			// may have changed things half-way; the next plans first.
			if a.Operation == infrav1.OperationApply {
				if err := r.markInterrupted(ctx, obj); err != nil {
					return nil, err
				}
			}
			obj.GetRunnerStatus().ActiveJob = nil
		case err != nil:
			return nil, fmt.Errorf("read Job %s: %w", a.Name, err)
		default:
			jobs = append(jobs, *job)
		}
	}
	var running *batchv1.Job
	for i := range jobs {
		job := &jobs[i]
		if Processed(job) {
			continue
		}
		if finished, _ := JobFinished(job); !finished {
			if running == nil {
				running = job
			}
			continue
		}
		// Act on the API server's view of the Job, not the cache's.
		fresh := &batchv1.Job{}
		if err := r.Reader.Get(ctx, client.ObjectKeyFromObject(job), fresh); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("read Job %s: %w", job.Name, err)
		}
		if Processed(fresh) {
			continue
		}
		if err := r.process(ctx, s, fresh, deleting); err != nil {
			if run := s.written.GetRunnerStatus().LastRun; run == nil || run.Job != fresh.Name {
				// Once the written status records the outcome, only the
				// cleanup is left (the per-run Secret, the processed
				// mark): the conditions say the outcome, and the retry is
				// silent — the mark may even have landed unseen.
				setCondition(obj, infrav1.ConditionApplyJobSucceeded, unknown, ReasonOutcomeNotRecorded,
					fmt.Sprintf("Job %s finished, but its outcome is not recorded yet (%v); retrying with a backoff, and no other Job starts meanwhile.", fresh.Name, err))
			}
			return nil, err
		}
	}
	if running == nil {
		return nil, nil
	}
	if a := obj.GetRunnerStatus().ActiveJob; a == nil || a.Name != running.Name {
		if err := r.resume(ctx, obj, root, running); err != nil {
			return nil, err
		}
		if obj.GetRunnerStatus().ActiveJob == nil {
			// resume dropped a Job that could never run.
			return nil, nil
		}
	}
	return running, nil
}

func hasJob(jobs []batchv1.Job, name string) bool {
	for i := range jobs {
		if jobs[i].Name == name {
			return true
		}
	}
	return false
}

// process records the outcome of a finished Job: the steps decide lists,
// then the status, then the per-run Secret goes, then the processed mark
// on the Job. A status that already records the Job (a reconcile that
// failed after writing it) gets back only the outcome's conditions.
func (r *Reconciler) process(ctx context.Context, s *scope, job *batchv1.Job, deleting bool) error {
	obj := s.obj
	pods, err := r.pods(ctx, job)
	if err != nil {
		return err
	}
	o := outcomeOf(job, pods)
	view, steps := decide(r.kind(), obj, o, nowTime())
	if !deleting {
		x := &StepContext{Obj: obj, Job: job, Paused: s.paused}
		for _, st := range steps {
			if err := st.Apply(ctx, r, x); err != nil {
				return err
			}
		}
	}
	if run := obj.GetRunnerStatus().LastRun; run == nil || run.Job != job.Name {
		r.kind().CopyStatus(obj, view)
	} else {
		// Recorded by a reconcile that failed after the status write: the
		// rest stays as written (a failure is counted once), the
		// conditions say the outcome again instead of the failure to
		// record it.
		obj.GetRunnerStatus().Conditions = view.GetRunnerStatus().Conditions
	}
	if a := obj.GetRunnerStatus().ActiveJob; a != nil && a.Name == job.Name {
		obj.GetRunnerStatus().ActiveJob = nil
	}
	if err := r.patchStatus(ctx, s); err != nil {
		return err
	}
	// The per-run Secret goes before the Job is marked processed: a
	// failure to delete it is retried like any other step.
	if err := r.deleteRun(ctx, job); err != nil {
		return err
	}
	if err := r.annotateJob(ctx, job, infrav1.AnnotationProcessed, "true"); err != nil {
		return err
	}
	if s.processed == nil {
		s.processed = map[string]bool{}
	}
	s.processed[job.Name] = true
	return nil
}

func (r *Reconciler) annotateJob(ctx context.Context, job *batchv1.Job, key, value string) error {
	if job.Annotations[key] == value {
		return nil
	}
	before := job.DeepCopy()
	if job.Annotations == nil {
		job.Annotations = map[string]string{}
	}
	job.Annotations[key] = value
	if err := r.Client.Patch(ctx, job, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("annotate Job %s: %w", job.Name, err)
	}
	return nil
}

// errPulling says the active Job waits for an image it cannot pull.
var errPulling = errors.New("image pull")

// waitJob looks at a Job that still runs. One whose image cannot be pulled
// never started the runner: it is reported in a condition, and deleted
// once the object's inputs moved on (a fixed image reference), so the new
// inputs need not wait for the Job's deadline, or once what allowed it no
// longer holds (startedUnder), so a pull fixed later never applies what
// nobody allows any more.
func (r *Reconciler) waitJob(ctx context.Context, obj Object, job *batchv1.Job, root *render.Root) error {
	// The cache tells whether a pod may be stuck; only then is it read
	// from the API server, which the decision below acts on.
	var cached corev1.PodList
	if err := r.Client.List(ctx, &cached, client.InNamespace(job.Namespace), client.MatchingLabels{JobNameLabel: job.Name}); err != nil {
		return fmt.Errorf("pods of Job %s: %w", job.Name, err)
	}
	if pullFailure(cached.Items) == "" {
		return nil
	}
	if err := r.Reader.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
		return fmt.Errorf("read Job %s: %w", job.Name, err)
	}
	if finished, _ := JobFinished(job); finished {
		// It ended meanwhile: its event brings the object back.
		return nil
	}
	pods, err := r.pods(ctx, job)
	if err != nil {
		return err
	}
	why := pullFailure(pods)
	if why == "" {
		return nil
	}
	setCondition(obj, infrav1.ConditionApplyJobSucceeded, false, ReasonImagePullFailed, fmt.Sprintf("Job %s cannot start: %s", job.Name, why))
	allowed, err := r.stillAllowed(ctx, obj, job)
	if err != nil {
		return err
	}
	if allowed && (root == nil || job.Annotations[annotationInputsHash] == root.InputsHash) {
		return errPulling
	}
	return r.dropJob(ctx, obj, job)
}

// stillAllowed reports whether what allowed an apply Job when it was
// created still holds: the applyPolicy it was created under
// (annotationApplyPolicy), and for the apply of an approved plan, that
// approval. The inputs are checked apart.
func (r *Reconciler) stillAllowed(ctx context.Context, obj Object, job *batchv1.Job) (bool, error) {
	if job.Labels[LabelOperation] != string(infrav1.OperationApply) {
		return true, nil
	}
	if p, ok := job.Annotations[annotationApplyPolicy]; ok && p != string(policy(obj)) {
		return false, nil
	}
	hash := job.Annotations[infrav1.AnnotationApprovedPlan]
	if hash == "" {
		return true, nil
	}
	by, err := r.approvedBy(ctx, obj, hash)
	return by != "", err
}

func nowTime() metav1.Time { return metav1.Now() }

// removeAnnotation removes the annotation key from obj, in a merge patch
// that names that key alone. A patch made by diffing would, when key is
// the last annotation obj was read with, clear the whole field, and with it
// any annotation written since, such as an approval.
func (r *Reconciler) removeAnnotation(ctx context.Context, obj Object, key string) error {
	if _, ok := obj.GetAnnotations()[key]; !ok {
		return nil
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: nil}}})
	if err != nil {
		return err
	}
	status := obj.DeepCopyObject().(Object)
	if err := r.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, body)); err != nil {
		return fmt.Errorf("remove %s: %w", key, err)
	}
	r.kind().CopyStatus(obj, status)
	return nil
}

// PatchObject changes obj as change does, in a merge patch of the object
// (not its status, which the reconcile writes at its end). The patch
// answers with the stored status; the reconcile's own stays.
func (r *Reconciler) PatchObject(ctx context.Context, obj Object, change func(Object)) error {
	patch := client.MergeFrom(obj.DeepCopyObject().(Object))
	change(obj)
	status := obj.DeepCopyObject().(Object)
	if err := r.Client.Patch(ctx, obj, patch); err != nil {
		return err
	}
	r.kind().CopyStatus(obj, status)
	return nil
}
