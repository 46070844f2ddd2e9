package terraformcluster

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
)

// stateLostWith waits for ApplyJobSucceeded to say StateLost.
func stateLostWith(tc *infrav1.TerraformCluster) bool {
	c := condition(tc, infrav1.ConditionApplyJobSucceeded)
	return c != nil && c.Status == metav1.ConditionFalse && c.Reason == engine.ReasonStateLost
}

// TestStateLost: an object that applied and whose state Secret is gone
// runs nothing, under Automatic and under Manual, and says so once in a
// Warning event, instead of creating everything a second time; the
// annotation captf.io/accept-empty-state lets it start again from an
// empty state, and is removed once that apply succeeded.
func TestStateLost(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	for _, policy := range []infrav1.ApplyPolicy{infrav1.ApplyAutomatic, infrav1.ApplyManual} {
		t.Run(string(policy), func(t *testing.T) {
			name := "lost-" + strings.ToLower(string(policy))
			tc := h.create(name, policy, "small")
			h.wait(tc, "first apply", ready)
			if err := h.c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: engine.StateSecretName("tfc", name)}}); err != nil {
				t.Fatal(err)
			}
			h.setSize(tc, "large")
			h.wait(tc, "the lost state guarded", stateLostWith)
			time.Sleep(3 * time.Second)
			if jobs := h.jobs(tc); len(jobs) != 1 {
				t.Fatalf("%d Jobs after the state was lost, want the first apply only", len(jobs))
			}
			warned := 0
			for _, e := range h.events(tc) {
				if e.Reason == engine.ReasonStateLost && e.Type == corev1.EventTypeWarning {
					warned++
				}
			}
			if warned != 1 {
				t.Errorf("%d StateLost warnings, want 1", warned)
			}

			before := tc.DeepCopy()
			tc.Annotations = map[string]string{infrav1.AnnotationAcceptEmptyState: "true"}
			if err := h.c.Patch(ctx, tc, client.MergeFrom(before)); err != nil {
				t.Fatal(err)
			}
			if policy == infrav1.ApplyManual {
				// Accepting an empty state is no approval: the re-create waits
				// for one like any other change.
				p := h.waitingPlan(tc, infrav1.ReasonPlanAwaitingApproval)
				h.approve(tc, p.PlanHash)
			}
			h.wait(tc, "the apply from an empty state", func(tc *infrav1.TerraformCluster) bool {
				_, accepted := tc.Annotations[infrav1.AnnotationAcceptEmptyState]
				return ready(tc) && !accepted
			})
			if err := h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: engine.StateSecretName("tfc", name)}, &corev1.Secret{}); err != nil {
				t.Errorf("no state after the apply from an empty state: %v", err)
			}
		})
	}
}

// TestStateLostAsJobStarts: a state Secret deleted between the manager's
// decision to start a Job and the Job's run (the manager read the state a
// moment before; the Job's terraform then finds none, and would plan to
// create everything again) applies nothing and plans nothing to approve:
// the Job refuses the state it finds, and the object then says StateLost,
// under Automatic and under Manual.
func TestStateLostAsJobStarts(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	t.Cleanup(func() { h.node.BeforeRun(nil) })
	for _, policy := range []infrav1.ApplyPolicy{infrav1.ApplyAutomatic, infrav1.ApplyManual} {
		t.Run(string(policy), func(t *testing.T) {
			name := "lost-as-job-starts-" + strings.ToLower(string(policy))
			tc := h.create(name, policy, "small")
			h.wait(tc, "first apply", ready)
			before := map[string]bool{}
			for _, j := range h.jobs(tc) {
				before[j.Name] = true
			}
			var once sync.Once
			deleted := make(chan error, 1)
			h.node.BeforeRun(func(ctx context.Context, job *batchv1.Job) {
				if job.Labels[infrav1.LabelOwnerName] != engine.NameLabel(name) {
					return
				}
				once.Do(func() {
					err := h.c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: engine.StateSecretName("tfc", name)}})
					deleted <- err
				})
			})
			h.setSize(tc, "large")
			if err := <-deleted; err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
			h.wait(tc, "the lost state guarded", stateLostWith)
			h.node.BeforeRun(nil)
			raced := 0
			for _, j := range h.jobs(tc) {
				if before[j.Name] {
					continue
				}
				raced++
				if j.Status.Succeeded > 0 {
					t.Errorf("Job %s (%s) succeeded on the state terraform found after the deletion", j.Name, j.Labels[engine.LabelOperation])
				}
			}
			if raced == 0 {
				t.Fatal("no Job ran after the change: nothing raced the deletion")
			}
			if tc.Status.Plan != nil {
				t.Errorf("a plan waits for approval after the state was lost: %+v", tc.Status.Plan)
			}
			var plans infrav1.TerraformPlanList
			if err := h.c.List(ctx, &plans, client.InNamespace("default")); err != nil {
				t.Fatal(err)
			}
			for _, p := range plans.Items {
				if strings.HasPrefix(p.Name, name) && p.Spec.Summary.Create > 0 {
					t.Errorf("TerraformPlan %s plans to create %d again", p.Name, p.Spec.Summary.Create)
				}
			}
		})
	}
}
