package engine

import (
	"context"
	"errors"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/render"
)

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
			// The cache shows the mark: nothing need be remembered.
			r.processed.Delete(job.UID)
			continue
		}
		if _, done := r.processed.Load(job.UID); done {
			// Marked processed a moment ago; the cache does not show it yet.
			continue
		}
		if finished, _ := JobFinished(job); !finished {
			if running == nil {
				running = job
			}
			continue
		}
		fresh, pods, err := r.finishedJob(ctx, job)
		if err != nil {
			return nil, err
		}
		if fresh == nil {
			continue
		}
		if err := r.process(ctx, s, fresh, pods, deleting); err != nil {
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

// finishedJob is a finished Job the cache shows unprocessed, and its pods,
// as the outcome is read from them: the cache's copies when they are final
// (every pod the Job counts is there and has ended, and nothing of them
// changes any more), otherwise the API server's. nil when the API server
// has it gone or processed.
func (r *Reconciler) finishedJob(ctx context.Context, cached *batchv1.Job) (*batchv1.Job, []corev1.Pod, error) {
	var list corev1.PodList
	if err := r.Client.List(ctx, &list, client.InNamespace(cached.Namespace), client.MatchingLabels{JobNameLabel: cached.Name}); err != nil {
		return nil, nil, fmt.Errorf("pods of Job %s: %w", cached.Name, err)
	}
	if podsFinal(cached, list.Items) {
		return cached, list.Items, nil
	}
	job := &batchv1.Job{}
	if err := r.Reader.Get(ctx, client.ObjectKeyFromObject(cached), job); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, nil
		}
		return nil, nil, fmt.Errorf("read Job %s: %w", cached.Name, err)
	}
	if Processed(job) {
		return nil, nil, nil
	}
	pods, err := r.pods(ctx, job)
	if err != nil {
		return nil, nil, err
	}
	return job, pods, nil
}

// podsFinal reports whether pods are all the pods of the finished job,
// each ended: a pod that ended changes no more, and the Job controller
// counts a pod in the Job's status only once it ended.
func podsFinal(job *batchv1.Job, pods []corev1.Pod) bool {
	if len(pods) == 0 || int32(len(pods)) != job.Status.Succeeded+job.Status.Failed {
		return false
	}
	for i := range pods {
		if p := pods[i].Status.Phase; p != corev1.PodSucceeded && p != corev1.PodFailed {
			return false
		}
	}
	return true
}

// process records the outcome of a finished Job: the steps decide lists,
// then the status, then the per-run Secret goes, then the processed mark
// on the Job. A status that already records the Job (a reconcile that
// failed after writing it) gets back only the outcome's conditions.
func (r *Reconciler) process(ctx context.Context, s *scope, job *batchv1.Job, pods []corev1.Pod, deleting bool) error {
	obj := s.obj
	// A state a step read whole (ownState) is held no longer than this.
	defer r.owned.Delete(client.ObjectKeyFromObject(obj))
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
	if st, ok := r.owned.LoadAndDelete(client.ObjectKeyFromObject(obj)); ok {
		// The state the apply wrote, read whole a moment ago to mark it:
		// publishing and backing up its serial now lets this status write
		// record it, where the next reconcile would read it again and
		// write status once more. A failure is left to that reconcile,
		// which tries again (reconcileDue) and reports it.
		_, _ = r.settleState(ctx, obj, st.(*stateRead))
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
	r.processed.Store(job.UID, true)
	observeRun(r.kind().Name(), o)
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
