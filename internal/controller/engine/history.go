package engine

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
)

// defaultHistory is how many finished Jobs of each kind are kept when the
// object's job settings say nothing.
const defaultHistory = 3

// pruneJobs deletes the processed Jobs beyond the object's history limits
// (successful and failed counted apart, newest kept), with their pods. The
// plan Job of the plan that waits is always kept: its log is where a
// reviewer reads the planned values. Unprocessed Jobs are never touched,
// nor drift Jobs, which the Job controller deletes an hour after they
// finished.
func (r *Reconciler) pruneJobs(ctx context.Context, obj Object) error {
	jobs, err := r.jobsOf(ctx, r.Client, obj)
	if err != nil {
		return err
	}
	keep := map[bool]int{true: limit(obj.GetRunnerSpec().Jobs.SuccessfulJobsHistoryLimit), false: limit(obj.GetRunnerSpec().Jobs.FailedJobsHistoryLimit)}
	live := ""
	if p := obj.GetRunnerStatus().Plan; p != nil {
		live = p.Job
	}
	// Newest first.
	for i := len(jobs) - 1; i >= 0; i-- {
		job := &jobs[i]
		finished, succeeded := JobFinished(job)
		if op := infrav1.Operation(job.Labels[LabelOperation]); !finished || !Processed(job) || job.Name == live || op == infrav1.OperationDrift || op == infrav1.OperationRefresh {
			// Drift and refresh Jobs go by their ttlSecondsAfterFinished.
			continue
		}
		if keep[succeeded] > 0 {
			keep[succeeded]--
			continue
		}
		if err := r.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("prune Job %s: %w", job.Name, err)
		}
	}
	return nil
}

func limit(n *int32) int {
	if n == nil {
		return defaultHistory
	}
	return int(*n)
}
