package terraformcluster

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/testenv"
)

// The conventions every Cluster API infrastructure provider honours.

// readyIs waits for tc's Ready condition to have reason.
func (h *harness) readyIs(tc *infrav1.TerraformCluster, reason string) {
	h.t.Helper()
	h.wait(tc, "Ready reason "+reason, func(tc *infrav1.TerraformCluster) bool {
		c := meta.FindStatusCondition(tc.Status.Conditions, infrav1.ConditionReady)
		return c != nil && c.Reason == reason
	})
}

// TestWaitsForClusterOwner: a TerraformCluster that a topology made or
// that carries a cluster-name label waits, with Ready False
// WaitingForOwner and no Job, until Cluster API's Cluster controller makes
// its Cluster its owner; then it applies. A standalone one (neither
// label, no owner) applies at once.
func TestWaitsForClusterOwner(t *testing.T) {
	h := startWithClusterAPI(t)
	h.runClusterAPI()
	ctx := context.Background()
	standalone := h.create("alone", infrav1.ApplyAutomatic, "small")
	labelled := h.create("named", infrav1.ApplyAutomatic, "small", func(tc *infrav1.TerraformCluster) {
		tc.Labels = map[string]string{clusterv1.ClusterNameLabel: "named"}
	})
	topology := h.create("topo", infrav1.ApplyAutomatic, "small", func(tc *infrav1.TerraformCluster) {
		tc.Labels = map[string]string{clusterv1.ClusterTopologyOwnedLabel: ""}
	})
	h.wait(standalone, "the standalone cluster's first apply", ready)
	for _, tc := range []*infrav1.TerraformCluster{labelled, topology} {
		h.readyIs(tc, infrav1.ReasonWaitingForOwner)
	}
	// A Cluster that does not name it yet owns nothing: still waiting.
	h.cluster("other", false)
	time.Sleep(3 * time.Second)
	for _, tc := range []*infrav1.TerraformCluster{labelled, topology} {
		if jobs := h.jobs(tc); len(jobs) != 0 {
			t.Errorf("%s: %d Jobs while it waits for its Cluster", tc.Name, len(jobs))
		}
		if err := h.c.Get(ctx, client.ObjectKeyFromObject(tc), tc); err != nil {
			t.Fatal(err)
		}
		if c := condition(tc, infrav1.ConditionReady); c == nil || c.Reason != infrav1.ReasonWaitingForOwner || c.Status != metav1.ConditionFalse {
			t.Errorf("%s: Ready %+v, want False %s", tc.Name, c, infrav1.ReasonWaitingForOwner)
		}
	}
	// Its Cluster names it: Cluster API's Cluster controller adds the
	// owner reference, and the first apply runs.
	h.cluster("named", false)
	h.cluster("topo", false)
	for _, tc := range []*infrav1.TerraformCluster{labelled, topology} {
		h.wait(tc, "the first apply once its Cluster owns it", ready)
		if refs := tc.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Cluster" || refs[0].Name != tc.Name {
			t.Errorf("%s: owners %+v, want its Cluster", tc.Name, refs)
		}
	}
}

// TestExternallyManaged: a TerraformCluster marked
// cluster.x-k8s.io/managed-by, as an annotation or as a label, is left
// alone: no finalizer, no status, no Job. Once the mark is gone it is
// reconciled as any other.
func TestExternallyManaged(t *testing.T) {
	h := start(t)
	ctx := context.Background()
	annotated := h.create("ext-annotated", infrav1.ApplyAutomatic, "small", func(tc *infrav1.TerraformCluster) {
		tc.Annotations = map[string]string{engine.MarkManagedBy: "other-system"}
	})
	labelled := h.create("ext-labelled", infrav1.ApplyAutomatic, "small", func(tc *infrav1.TerraformCluster) {
		tc.Labels = map[string]string{engine.MarkManagedBy: "other-system"}
	})
	// A cluster created after them applies: the manager runs, and had
	// time to see them.
	h.wait(h.create("ext-witness", infrav1.ApplyAutomatic, "small"), "an unmarked cluster's first apply", ready)
	for _, tc := range []*infrav1.TerraformCluster{annotated, labelled} {
		h.leftAlone(tc)
	}
	// The mark removed: reconciled again.
	before := annotated.DeepCopy()
	annotated.Annotations = nil
	if err := h.c.Patch(ctx, annotated, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	h.wait(annotated, "the first apply once the mark is gone", ready)
}

// leftAlone fails the test unless the manager wrote nothing of tc: no
// finalizer, no status, no Job.
func (h *harness) leftAlone(tc *infrav1.TerraformCluster) {
	h.t.Helper()
	if err := h.c.Get(context.Background(), client.ObjectKeyFromObject(tc), tc); err != nil {
		h.t.Fatal(err)
	}
	if len(tc.Finalizers) != 0 || len(tc.Status.Conditions) != 0 || tc.Status.LastRun != nil || tc.Status.ObservedGeneration != 0 {
		h.t.Errorf("%s/%s: the manager wrote it: finalizers %v, status %+v", tc.Namespace, tc.Name, tc.Finalizers, tc.Status)
	}
	var jobs batchv1.JobList
	if err := h.c.List(context.Background(), &jobs, client.InNamespace(tc.Namespace), client.MatchingLabels{infrav1.LabelOwnerName: tc.Name}); err != nil {
		h.t.Fatal(err)
	}
	if len(jobs.Items) != 0 {
		h.t.Errorf("%s/%s: %d Jobs", tc.Namespace, tc.Name, len(jobs.Items))
	}
}

// TestNamespaceAndWatchFilter: a manager run with --namespace default and
// --watch-filter team-a reconciles the objects of that namespace labelled
// cluster.x-k8s.io/watch-filter=team-a, and leaves alone those labelled
// for another manager, those with no such label, and those of another
// namespace, which its cache does not even hold.
func TestNamespaceAndWatchFilter(t *testing.T) {
	h := startScoped(t, testenv.Start(t, "../../.."), nil, managerScope{namespaces: []string{"default"}, watchFilter: "team-a"})
	ctx := context.Background()
	if err := h.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}}); err != nil {
		t.Fatal(err)
	}
	teamA := map[string]string{engine.LabelWatchFilter: "team-a"}
	other := h.create("team-b", infrav1.ApplyAutomatic, "small", func(tc *infrav1.TerraformCluster) {
		tc.Labels = map[string]string{engine.LabelWatchFilter: "team-b"}
	})
	unlabelled := h.create("unlabelled", infrav1.ApplyAutomatic, "small")
	outside := h.create("outside", infrav1.ApplyAutomatic, "small", func(tc *infrav1.TerraformCluster) {
		tc.Namespace, tc.Labels = "elsewhere", teamA
	})
	// Created last: once it applied, the manager had time to see the others.
	mine := h.create("team-a", infrav1.ApplyAutomatic, "small", func(tc *infrav1.TerraformCluster) { tc.Labels = teamA })
	h.wait(mine, "the first apply of the manager's own object", ready)
	for _, tc := range []*infrav1.TerraformCluster{other, unlabelled, outside} {
		h.leftAlone(tc)
	}
}
