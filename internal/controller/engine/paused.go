package engine

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
)

// Cluster API's pause, as its infrastructure contract asks: while the
// object carries the annotation cluster.x-k8s.io/paused (its presence,
// whatever its value) or its Cluster (its owner, else the one its
// cluster-name label names: clusterOf) has spec.paused, the manager
// starts no Job and changes nothing but the object's status, where the
// Paused condition says why. A Job that already runs finishes; its outcome
// is recorded once the pause is lifted (the finished Job is the record).

// AnnotationPaused is Cluster API's pause marker.
const AnnotationPaused = "cluster.x-k8s.io/paused"

// MarkManagedBy is Cluster API's mark of externally managed
// infrastructure: an object that carries it, as an annotation (what
// Cluster API's own code reads) or a label (what its contract document
// names), is managed by another system and left alone (externallyManaged).
const MarkManagedBy = "cluster.x-k8s.io/managed-by"

// externallyManaged reports whether obj carries MarkManagedBy, as an
// annotation or a label, whatever its value. The manager then writes
// nothing of it, neither finalizer nor status, and starts no Job: the
// system that manages it fulfils the contract's fields.
func externallyManaged(obj Object) bool {
	_, annotated := obj.GetAnnotations()[MarkManagedBy]
	_, labelled := obj.GetLabels()[MarkManagedBy]
	return annotated || labelled
}

// ClusterGroupKind is Cluster API's Cluster.
var ClusterGroupKind = schema.GroupKind{Group: "cluster.x-k8s.io", Kind: "Cluster"}

// The Paused condition of the contract and its reasons.
const (
	ConditionPaused = "Paused"
	ReasonPaused    = "Paused"
	ReasonNotPaused = "NotPaused"
)

// paused says why obj is paused, or "" when it is not.
func (r *Reconciler) paused(ctx context.Context, obj Object) (string, error) {
	return WhyPaused(ctx, r.Client, obj)
}

// WhyPaused says why obj is paused, or "" when it is not: Cluster API's pause
// marker on obj, or spec.paused of its Cluster, read through c (the
// manager's cache). A controller beside the engine that writes what
// belongs to obj (a pool's member objects) pauses with it.
func WhyPaused(ctx context.Context, c client.Client, obj client.Object) (string, error) {
	if _, ok := obj.GetAnnotations()[AnnotationPaused]; ok {
		return "the object has the annotation " + AnnotationPaused, nil
	}
	apiVersion, name, err := clusterOf(c, obj)
	if err != nil || name == "" {
		return "", err
	}
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(ClusterGroupKind.Kind)
	err = c.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}, u)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("Cluster %s: %w", name, err)
	}
	if p, _, _ := unstructured.NestedBool(u.Object, "spec", "paused"); p {
		return "its Cluster " + name + " has spec.paused", nil
	}
	return "", nil
}

// clusterOf names the Cluster API Cluster whose pause pauses obj, and the
// version to read it in: its owner Cluster (an infrastructure cluster's),
// else the Cluster its cluster-name label names. Cluster API makes the
// Machine the only owner of an infrastructure machine and labels it, and
// pauses a cluster (clusterctl move too) by the Cluster's spec.paused
// alone. "" when there is none, or Cluster API is not served.
func clusterOf(c client.Client, obj client.Object) (apiVersion, name string, err error) {
	if ref := OwnerCluster(obj); ref != nil {
		return ref.APIVersion, ref.Name, nil
	}
	name = obj.GetLabels()[infrav1.LabelClusterName]
	if name == "" {
		return "", "", nil
	}
	m, err := c.RESTMapper().RESTMapping(ClusterGroupKind)
	if meta.IsNoMatchError(err) {
		return "", "", nil
	}
	if err != nil {
		return "", "", fmt.Errorf("Cluster %s: %w", name, err)
	}
	return m.GroupVersionKind.GroupVersion().String(), name, nil
}

// OwnerCluster is obj's owner reference to a Cluster API Cluster, if any.
func OwnerCluster(obj metav1.Object) *metav1.OwnerReference {
	refs := obj.GetOwnerReferences()
	for i, ref := range refs {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err == nil && gv.Group == ClusterGroupKind.Group && ref.Kind == ClusterGroupKind.Kind {
			return &refs[i]
		}
	}
	return nil
}
