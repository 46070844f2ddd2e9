package terraformcluster

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
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
		c := condition(tc, engine.ConditionPaused)
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
	tc.Annotations = map[string]string{engine.AnnotationPaused: ""}
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
	delete(tc.Annotations, engine.AnnotationPaused)
	if err := h.c.Patch(ctx, tc, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	h.wait(tc, "the change applied once the annotation is gone", func(tc *infrav1.TerraformCluster) bool {
		return ready(tc) && len(h.jobs(tc)) == 2
	})
}

// runClusterAPI runs Cluster API's own Cluster and Machine controllers
// against the harness's API server until the test ends.
func (h *harness) runClusterAPI() {
	h.t.Helper()
	h.env.RunClusterAPI(h.t)
}

// TestClusterAPIReadsTheContract: Cluster API's own Cluster controller,
// reading a TerraformCluster through its contract (the version the CRD's
// labels name), finds the infrastructure provisioned after the first
// apply and copies its control plane endpoint and failure domains (from
// the module's outputs) into the Cluster.
func TestClusterAPIReadsTheContract(t *testing.T) {
	h := startWithClusterAPI(t)
	h.runClusterAPI()
	ctx := context.Background()
	u := h.cluster("contract", false)
	tc := h.create("contract", infrav1.ApplyAutomatic, "small", func(tc *infrav1.TerraformCluster) {
		tc.OwnerReferences = []metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Cluster", Name: u.GetName(), UID: u.GetUID()}}
	})
	h.wait(tc, "the first apply", ready)

	var c clusterv1.Cluster
	deadline := time.Now().Add(time.Minute)
	for {
		got := u.DeepCopy()
		if err := h.c.Get(ctx, client.ObjectKeyFromObject(u), got); err != nil {
			t.Fatal(err)
		}
		c = clusterv1.Cluster{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(got.Object, &c); err != nil {
			t.Fatal(err)
		}
		if ptr.Deref(c.Status.Initialization.InfrastructureProvisioned, false) && c.Spec.ControlPlaneEndpoint.IsValid() && len(c.Status.FailureDomains) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Cluster never took the contract's fields: spec %+v, status %+v", c.Spec, c.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if want := (clusterv1.APIEndpoint{Host: "api.default.example.test", Port: 6443}); c.Spec.ControlPlaneEndpoint != want {
		t.Errorf("Cluster spec.controlPlaneEndpoint %+v, want %+v", c.Spec.ControlPlaneEndpoint, want)
	}
	want := []clusterv1.FailureDomain{
		{Name: "zone-a", ControlPlane: ptr.To(true), Attributes: map[string]string{"rack": "1"}},
		{Name: "zone-b", ControlPlane: ptr.To(false), Attributes: map[string]string{"rack": "2"}},
	}
	if diff := cmp.Diff(want, c.Status.FailureDomains); diff != "" {
		t.Errorf("Cluster status.failureDomains (-want +got):\n%s", diff)
	}
	if infraReady := meta.FindStatusCondition(c.Status.Conditions, clusterv1.ClusterInfrastructureReadyCondition); infraReady == nil || infraReady.Status != metav1.ConditionTrue {
		t.Errorf("Cluster condition InfrastructureReady: %+v", infraReady)
	}
}
