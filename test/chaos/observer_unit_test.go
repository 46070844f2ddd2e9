package chaos

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	infrav1 "github.com/captf/captf/api/v1alpha1"
)

// TestObserverOverlaps: a Job created while another Job of the same
// object is active overlaps it; a Job of another object (a machine's
// while its cluster's runs) is the cluster gate's to judge, not this one.
func TestObserverOverlaps(t *testing.T) {
	job := func(name, kind, owner string, rv string, succeeded int32) *batchv1.Job {
		return &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv, Labels: map[string]string{
				"captf.io/operation": "apply", infrav1.LabelOwnerKind: kind, infrav1.LabelOwnerName: owner,
			}},
			Status: batchv1.JobStatus{Succeeded: succeeded},
		}
	}
	type event struct {
		typ watch.EventType
		job *batchv1.Job
	}
	for _, tc := range []struct {
		reason string
		events []event
		want   []overlap
	}{{
		reason: "two Jobs of one machine at once",
		events: []event{
			{watch.Added, job("m-a", "TerraformMachine", "m", "10", 0)},
			{watch.Added, job("m-b", "TerraformMachine", "m", "11", 0)},
		},
		want: []overlap{{job: "m-b (apply)", active: "m-a (apply)"}},
	}, {
		reason: "the first Job ended before the second",
		events: []event{
			{watch.Added, job("m-a", "TerraformMachine", "m", "10", 0)},
			{watch.Modified, job("m-a", "TerraformMachine", "m", "11", 1)},
			{watch.Added, job("m-b", "TerraformMachine", "m", "12", 0)},
		},
	}, {
		reason: "a machine's Job while its cluster's runs",
		events: []event{
			{watch.Added, job("c-a", "TerraformCluster", "c", "10", 0)},
			{watch.Added, job("m-a", "TerraformMachine", "m", "11", 0)},
		},
	}, {
		reason: "two objects of one name, of two kinds",
		events: []event{
			{watch.Added, job("c-a", "TerraformCluster", "x", "10", 0)},
			{watch.Added, job("m-a", "TerraformMachine", "x", "11", 0)},
		},
	}} {
		t.Run(tc.reason, func(t *testing.T) {
			o := &observer{jobs: map[string]*jobRecord{}}
			for _, e := range tc.events {
				o.job(e.typ, e.job)
			}
			_, got, _ := o.snapshot()
			if d := cmp.Diff(tc.want, got, cmp.AllowUnexported(overlap{})); d != "" {
				t.Errorf("overlaps (-want +got):\n%s", d)
			}
		})
	}
}
