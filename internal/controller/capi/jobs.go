package capi

import (
	"fmt"

	batchv1 "k8s.io/api/batch/v1"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
)

// MachineJob is a Wait while an apply or destroy Job of a TerraformMachine
// or a TerraformMachinePool of a cluster has not finished: a cluster's
// apply or destroy waits for its machines' and pools', as theirs wait for
// its (ClusterJob). jobs are the cluster's Jobs (their captf.io/cluster
// label), every one of them: one created a moment ago counts.
func MachineJob(jobs []batchv1.Job) *engine.Wait {
	var machines []batchv1.Job
	for _, j := range jobs {
		if k := j.Labels[infrav1.LabelOwnerKind]; k == "TerraformMachine" || k == "TerraformMachinePool" {
			machines = append(machines, j)
		}
	}
	j := running(machines, func(j *batchv1.Job) bool { finished, _ := engine.JobFinished(j); return finished })
	if j == nil {
		return nil
	}
	return &engine.Wait{Reason: infrav1.ReasonMachineJobRuns, Message: fmt.Sprintf(
		"The %s Job %s of %s %s runs; a Job of this object starts when it ended.", j.Labels[engine.LabelOperation], j.Name, j.Labels[infrav1.LabelOwnerKind], j.Labels[infrav1.LabelOwnerName])}
}

// running is the first of jobs that changes infrastructure — an apply or a
// destroy — and is not done, nil when none.
func running(jobs []batchv1.Job, done func(*batchv1.Job) bool) *batchv1.Job {
	for i := range jobs {
		j := &jobs[i]
		op := infrav1.Operation(j.Labels[engine.LabelOperation])
		if done(j) || j.DeletionTimestamp != nil || (op != infrav1.OperationApply && op != infrav1.OperationDestroy) {
			continue
		}
		return j
	}
	return nil
}

// recorded says whether the outcome of the Job j of tc is recorded: tc's
// status names it as its last run (the write that also publishes what
// the run changed, its exports), or j is marked captf.io/processed. Until
// then a machine would read the exports of before the Job. The status
// write is what brings the machine back (ChangeEnded).
func recorded(tc *infrav1.TerraformCluster, j *batchv1.Job) bool {
	if engine.Processed(j) {
		return true
	}
	run := tc.Status.LastRun
	return run != nil && run.Job == j.Name
}

// runs says how j stands: it runs, or it ended and its outcome is not
// recorded yet.
func runs(j *batchv1.Job) string {
	if finished, _ := engine.JobFinished(j); finished {
		return "ended, and its outcome is not recorded yet"
	}
	return "runs"
}

// ChangeEnded reports whether an apply or destroy Job that old's status
// named is no longer active in now's: the end a Job of related state
// waits for.
func ChangeEnded(old, now engine.Object) bool {
	was, is := old.GetRunnerStatus().ActiveJob, now.GetRunnerStatus().ActiveJob
	changes := was != nil && (was.Operation == infrav1.OperationApply || was.Operation == infrav1.OperationDestroy)
	return changes && (is == nil || is.Name != was.Name)
}
