package capi

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
)

// ClusterOwner says what an infrastructure cluster that belongs to a
// Cluster API Cluster waits for before it applies: its Cluster as an
// owner, and that Cluster there. One belongs to a Cluster when Cluster
// API's topology made it (topology.cluster.x-k8s.io/owned) or it carries
// a cluster-name label: the topology controller creates it before the
// Cluster names it, and Cluster API's Cluster controller adds the owner
// reference once the Cluster's spec.infrastructureRef names it. nil for a
// standalone object (neither label), and where Cluster API's Cluster is
// not served (nothing would ever own it).
func ClusterOwner(ctx context.Context, c client.Reader, obj client.Object) (*engine.Wait, error) {
	_, topology := obj.GetLabels()[clusterv1.ClusterTopologyOwnedLabel]
	name := obj.GetLabels()[clusterv1.ClusterNameLabel]
	if !topology && name == "" {
		return nil, nil
	}
	apiVersion := clusterv1.GroupVersion.String()
	ref := engine.OwnerCluster(obj)
	if ref != nil {
		apiVersion, name = ref.APIVersion, ref.Name
	}
	if name == "" {
		return waitingForCluster(), nil
	}
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(engine.ClusterGroupKind.Kind)
	err := c.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}, u)
	switch {
	case meta.IsNoMatchError(err):
		return nil, nil
	case ref == nil && err == nil, ref == nil && apierrors.IsNotFound(err):
		return waitingForCluster(), nil
	case apierrors.IsNotFound(err), err == nil && u.GetUID() != ref.UID:
		return &engine.Wait{Reason: infrav1.ReasonWaitingForOwner, Message: fmt.Sprintf("The owner Cluster %s is not there.", name)}, nil
	case err != nil:
		return nil, fmt.Errorf("Cluster %s: %w", name, err)
	}
	return nil, nil
}

// waitingForCluster is the wait of an infrastructure cluster that no
// Cluster owns yet.
func waitingForCluster() *engine.Wait {
	return &engine.Wait{Reason: infrav1.ReasonWaitingForOwner, Message: "No Cluster API Cluster is the object's owner yet; Cluster API's Cluster controller adds the reference once a Cluster's spec.infrastructureRef names the object."}
}
