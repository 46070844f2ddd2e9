package capi

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
)

// MachineJob is a Wait while an apply or destroy Job of a TerraformMachine
// or a TerraformMachinePool of obj's cluster (engine.ClusterName) has not
// finished: a cluster's apply or destroy waits for its machines' and
// pools', as theirs wait for its (ClusterJob). The Jobs come from api, the
// API server itself, by their captf.io/cluster label: one created a moment
// ago counts.
func MachineJob(ctx context.Context, api client.Reader, obj engine.Object) (*engine.Wait, error) {
	kinds, err := labels.NewRequirement(infrav1.LabelOwnerKind, selection.In, []string{"TerraformMachine", "TerraformMachinePool"})
	if err != nil {
		return nil, err
	}
	cluster, err := labels.NewRequirement(infrav1.LabelCluster, selection.Equals, []string{engine.NameLabel(engine.ClusterName(obj))})
	if err != nil {
		return nil, err
	}
	var jobs batchv1.JobList
	if err := api.List(ctx, &jobs, client.InNamespace(obj.GetNamespace()), client.MatchingLabelsSelector{Selector: labels.NewSelector().Add(*kinds, *cluster)}); err != nil {
		return nil, fmt.Errorf("Jobs of the cluster's TerraformMachines and TerraformMachinePools: %w", err)
	}
	j := running(jobs.Items)
	if j == nil {
		return nil, nil
	}
	return &engine.Wait{Reason: infrav1.ReasonMachineJobRuns, Message: fmt.Sprintf(
		"The %s Job %s of %s %s runs; a Job of this object starts when it ended.", j.Labels[engine.LabelOperation], j.Name, j.Labels[infrav1.LabelOwnerKind], j.Labels[infrav1.LabelOwnerName])}, nil
}

// running is the first of jobs that changes infrastructure — an apply or a
// destroy — and has not finished, nil when none.
func running(jobs []batchv1.Job) *batchv1.Job {
	for i := range jobs {
		j := &jobs[i]
		op := infrav1.Operation(j.Labels[engine.LabelOperation])
		if finished, _ := engine.JobFinished(j); finished || j.DeletionTimestamp != nil || (op != infrav1.OperationApply && op != infrav1.OperationDestroy) {
			continue
		}
		return j
	}
	return nil
}

// ChangeEnded reports whether an apply or destroy Job that old's status
// named is no longer active in now's: the end a Job of related state
// waits for.
func ChangeEnded(old, now engine.Object) bool {
	was, is := old.GetRunnerStatus().ActiveJob, now.GetRunnerStatus().ActiveJob
	changes := was != nil && (was.Operation == infrav1.OperationApply || was.Operation == infrav1.OperationDestroy)
	return changes && (is == nil || is.Name != was.Name)
}
