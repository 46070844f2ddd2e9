package terraformcluster

import (
	"context"
	"errors"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/render"
	"github.com/captf/captf/internal/runner"
	"github.com/captf/captf/pkg/fingerprint"
)

func nowTime() metav1.Time { return metav1.Now() }

// collect takes in the active Job once it finished: it reads the report,
// records status.lastRun, deletes the per-run Secret and clears
// status.activeJob, and pins the image digest a successful apply ran.
// done is false while the Job still runs (its watch brings the object
// back); job is nil when the Job is gone. A Job that
// left no report is a failed run.
func (r *Reconciler) collect(ctx context.Context, tc *infrav1.TerraformCluster) (job *batchv1.Job, msg *runner.Message, done bool, err error) {
	active := tc.Status.ActiveJob
	key := client.ObjectKey{Namespace: tc.Namespace, Name: active.Name}
	job = &batchv1.Job{}
	// A Job still running in the cache needs no request: a stale answer
	// only waits for the Job's next event. What acts on a Job (a finished
	// one, or one the cache does not hold yet) reads the API server.
	if err := r.Client.Get(ctx, key, job); err == nil {
		if finished, _ := jobFinished(job); !finished {
			return job, nil, false, nil
		}
	}
	job = &batchv1.Job{}
	if err := r.Reader.Get(ctx, key, job); err != nil {
		if apierrors.IsNotFound(err) {
			tc.Status.ActiveJob = nil
			return nil, nil, true, nil
		}
		return nil, nil, false, err
	}
	finished, succeeded := jobFinished(job)
	if !finished {
		return job, nil, false, nil
	}
	pods, err := r.pods(ctx, job)
	if err != nil {
		return nil, nil, false, err
	}
	if msg, err = report(job, pods); err != nil {
		return nil, nil, false, err
	}
	if succeeded && msg != nil && msg.Outcome == runner.OutcomeApplied {
		for i := range pods {
			if err := r.pinDigest(ctx, job, resolvedDigest(&pods[i])); err != nil {
				return nil, nil, false, err
			}
		}
	}
	if err := r.deleteRun(ctx, job); err != nil {
		return nil, nil, false, err
	}
	now := nowTime()
	run := &infrav1.RunStatus{Job: job.Name, Operation: active.Operation, StartedAt: job.Status.StartTime, FinishedAt: &now, Succeeded: succeeded}
	if msg == nil {
		run.Succeeded = false
		run.Error = &infrav1.RunError{Kind: runner.OutcomeFailed, Message: "the Job left no report"}
	}
	tc.Status.ActiveJob = nil
	tc.Status.LastRun = run
	return job, msg, true, nil
}

// finishJob handles the active Job once it finished and moves the flow on;
// while it runs, it looks for an image that cannot be pulled (waitJob).
func (r *Reconciler) finishJob(ctx context.Context, tc *infrav1.TerraformCluster, root *render.Root) error {
	job, msg, done, err := r.collect(ctx, tc)
	if err != nil || job == nil {
		return err
	}
	if !done {
		return r.waitJob(ctx, tc, job, root)
	}
	run := tc.Status.LastRun
	if msg == nil {
		return r.failed(tc, run.Operation, run)
	}

	inputsHash := job.Annotations[annotationInputsHash]
	switch msg.Outcome {
	case runner.OutcomePlanned:
		if msg.Plan.Empty() {
			// An empty plan needs no approval, but the apply plans again
			// and stops if the plan is no longer empty.
			return r.startJob(ctx, tc, root, infrav1.OperationApply, fingerprint.EmptyPlanHash, false)
		}
		if err := r.recordPlan(ctx, tc, job.Name, msg.Plan, inputsHash, infrav1.ReasonPlanAwaitingApproval); err != nil {
			return err
		}
		r.Recorder.Eventf(tc, job, corev1.EventTypeNormal, infrav1.EventPlanReady, "Plan",
			"Plan %s waits for approval: %d to add, %d to change, %d to destroy, %d output changes.",
			msg.Plan.PlanHash, msg.Plan.Add, msg.Plan.Change, msg.Plan.Destroy, msg.Plan.OutputChanges)
	case runner.OutcomeApplied, runner.OutcomeNoChanges:
		tc.Status.Failures = 0
		if err := r.markApplied(ctx, tc); err != nil {
			return err
		}
		if err := r.setEndpoint(ctx, tc, msg.Endpoint); err != nil {
			return err
		}
		if hash := job.Annotations[infrav1.AnnotationApprovedPlan]; hash != "" {
			if err := r.consumeApproval(ctx, tc, hash); err != nil {
				return err
			}
			if err := r.closeLivePlan(ctx, tc, infrav1.PlanApplied, infrav1.ReasonPlanApplied, "The apply planned exactly these changes and applied them."); err != nil {
				return err
			}
			r.Recorder.Eventf(tc, job, corev1.EventTypeNormal, infrav1.EventPlanApplied, "Apply", "Plan %s applied.", hash)
		}
		tc.Status.Plan = nil
	case runner.OutcomePlanChanged:
		// Nothing was applied. This is not a failure: no backoff, no cap.
		run.Error = &infrav1.RunError{Kind: infrav1.ErrorKindPlanChanged, Message: "The fresh plan does not hash to the approved one; nothing was applied."}
		if err := r.annotateJob(ctx, job, infrav1.AnnotationPlanChanged, msg.Plan.PlanHash); err != nil {
			return err
		}
		if err := r.closeLivePlan(ctx, tc, infrav1.PlanFailed, infrav1.ReasonApplyPlanChanged,
			"The apply found other changes than the approved ones and applied nothing; a new plan waits."); err != nil {
			return err
		}
		if err := r.recordPlan(ctx, tc, job.Name, msg.Plan, inputsHash, infrav1.ReasonPlanChanged); err != nil {
			return err
		}
		r.Recorder.Eventf(tc, job, corev1.EventTypeWarning, infrav1.EventPlanChanged, "Apply",
			"The plan moved since %s was approved; nothing was applied. The new plan %s waits for approval.",
			job.Annotations[infrav1.AnnotationApprovedPlan], msg.Plan.PlanHash)
	default:
		run.Succeeded = false
		run.Error = &infrav1.RunError{Kind: msg.Outcome, Message: msg.Error}
		return r.failed(tc, run.Operation, run)
	}
	return nil
}

// failed records a failed run. A failed apply keeps status.plan and the
// approval, so the retry (after the backoff) expects the same plan.
func (r *Reconciler) failed(tc *infrav1.TerraformCluster, op infrav1.Operation, run *infrav1.RunStatus) error {
	reason := ReasonApplyFailed
	switch {
	case run.Error.Kind == runner.OutcomeBadInput:
		// The module refused the inputs; the message names the variables.
		reason = ReasonInvalidInputs
	case op == infrav1.OperationPlan:
		reason = ReasonPlanFailed
	}
	tc.Status.Failures++
	msg := fmt.Sprintf("Job %s failed (%s)", run.Job, run.Error.Kind)
	if run.Error.Message != "" {
		msg += ": " + run.Error.Message
	}
	setCondition(tc, infrav1.ConditionApplyJobSucceeded, false, reason, msg)
	return nil
}

func (r *Reconciler) annotateJob(ctx context.Context, job *batchv1.Job, key, value string) error {
	before := job.DeepCopy()
	if job.Annotations == nil {
		job.Annotations = map[string]string{}
	}
	job.Annotations[key] = value
	return r.Client.Patch(ctx, job, client.MergeFrom(before))
}

// errPulling says the active Job waits for an image it cannot pull.
var errPulling = errors.New("image pull")

// waitJob looks at a Job that still runs. One whose image cannot be pulled
// never started the runner: it is reported in a condition, and deleted
// once the object's inputs moved on (a fixed image reference), so the new
// inputs need not wait for the Job's deadline.
func (r *Reconciler) waitJob(ctx context.Context, tc *infrav1.TerraformCluster, job *batchv1.Job, root *render.Root) error {
	// The cache tells whether a pod may be stuck; only then is it read
	// from the API server, which the decision below acts on.
	var cached corev1.PodList
	if err := r.Client.List(ctx, &cached, client.InNamespace(job.Namespace), client.MatchingLabels{jobNameLabel: job.Name}); err != nil {
		return fmt.Errorf("pods of Job %s: %w", job.Name, err)
	}
	if pullFailure(cached.Items) == "" {
		return nil
	}
	if err := r.Reader.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
		return fmt.Errorf("read Job %s: %w", job.Name, err)
	}
	if finished, _ := jobFinished(job); finished {
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
	setCondition(tc, infrav1.ConditionApplyJobSucceeded, false, ReasonImagePullFailed, fmt.Sprintf("Job %s cannot start: %s", job.Name, why))
	if job.Annotations[annotationInputsHash] == root.InputsHash {
		return errPulling
	}
	if err := r.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Job %s: %w", job.Name, err)
	}
	if err := r.deleteRun(ctx, job); err != nil {
		return err
	}
	tc.Status.ActiveJob = nil
	return nil
}

// setEndpoint publishes the module's control plane endpoint in
// spec.controlPlaneEndpoint, the Cluster API contract's field, in a patch
// of its own (the status is written at the end of the reconcile).
func (r *Reconciler) setEndpoint(ctx context.Context, tc *infrav1.TerraformCluster, e *runner.Endpoint) error {
	if e == nil || (tc.Spec.ControlPlaneEndpoint == infrav1.APIEndpoint{Host: e.Host, Port: e.Port}) {
		return nil
	}
	patch := client.MergeFrom(tc.DeepCopy())
	tc.Spec.ControlPlaneEndpoint = infrav1.APIEndpoint{Host: e.Host, Port: e.Port}
	status := tc.Status
	if err := r.Client.Patch(ctx, tc, patch); err != nil {
		return fmt.Errorf("control plane endpoint: %w", err)
	}
	// The patch answers with the stored status; the reconcile's own stays.
	tc.Status = status
	return nil
}
