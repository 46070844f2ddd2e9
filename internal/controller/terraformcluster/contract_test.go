package terraformcluster

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
)

// The Cluster API infrastructure contract against Cluster API's own CRDs.

// cluster makes a Cluster API Cluster (v1beta2) whose infrastructureRef
// names the TerraformCluster name.
func (h *harness) cluster(name string, paused bool) *unstructured.Unstructured {
	h.t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec": map[string]any{
			"paused":            paused,
			"infrastructureRef": map[string]any{"apiGroup": infrav1.GroupVersion.Group, "kind": "TerraformCluster", "name": name},
		},
	}}
	if err := h.c.Create(context.Background(), u); err != nil {
		h.t.Fatal(err)
	}
	return u
}

// pausedWith waits for the Paused condition to say status.
func pausedWith(status metav1.ConditionStatus) func(*infrav1.TerraformCluster) bool {
	return func(tc *infrav1.TerraformCluster) bool {
		c := condition(tc, ConditionPaused)
		return c != nil && c.Status == status && c.ObservedGeneration == tc.Generation
	}
}

// TestPaused: while its owning Cluster has spec.paused, or it carries
// cluster.x-k8s.io/paused (present, whatever its value), a TerraformCluster
// starts no Job and says so in its Paused condition; lifting the Cluster's
// pause acts at once through the Clusters' watch, and lifting the
// annotation through the object's own.
func TestPaused(t *testing.T) {
	h := startWithClusterAPI(t)
	ctx := context.Background()
	c := h.cluster("owned", true)
	tc := h.create("owned", infrav1.ApplyAutomatic, "small", func(tc *infrav1.TerraformCluster) {
		tc.OwnerReferences = []metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Name: c.GetName(), UID: c.GetUID()}}
	})
	h.wait(tc, "paused by its Cluster", pausedWith(metav1.ConditionTrue))
	time.Sleep(3 * time.Second)
	if jobs := h.jobs(tc); len(jobs) != 0 {
		t.Fatalf("%d Jobs while the Cluster is paused", len(jobs))
	}
	if err := unstructured.SetNestedField(c.Object, false, "spec", "paused"); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	h.wait(tc, "the first apply once the Cluster is unpaused", func(tc *infrav1.TerraformCluster) bool {
		return ready(tc) && pausedWith(metav1.ConditionFalse)(tc)
	})

	// The annotation, with an empty value: its presence pauses.
	before := tc.DeepCopy()
	tc.Annotations = map[string]string{annotationPaused: ""}
	if err := h.c.Patch(ctx, tc, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	h.wait(tc, "paused by the annotation", pausedWith(metav1.ConditionTrue))
	h.setSize(tc, "large")
	time.Sleep(3 * time.Second)
	if jobs := h.jobs(tc); len(jobs) != 1 {
		t.Fatalf("%d Jobs; a change while paused started one", len(jobs))
	}
	before = tc.DeepCopy()
	delete(tc.Annotations, annotationPaused)
	if err := h.c.Patch(ctx, tc, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	h.wait(tc, "the change applied once the annotation is gone", func(tc *infrav1.TerraformCluster) bool {
		return ready(tc) && len(h.jobs(tc)) == 2
	})
}
