package capi

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
)

// WatchClusters adds the watches every kind Cluster API owns needs beside
// its owner's: the Clusters (their pause, their infrastructure
// provisioned) and the TerraformClusters (their exports, the end of their
// Jobs), each bringing back the objects of its cluster that list (an
// empty list of the kind) finds by their cluster-name label. Only the
// changes such an object acts on pass (ClusterChanged,
// TerraformClusterChanged). The engine reads a Cluster's pause from the
// cache's unstructured copy, in whatever version is served, which another
// informer than the typed one fills: its own watch of that copy brings the
// objects back once it shows the pause (pauseChanged), not before.
func WatchClusters(b *builder.Builder, mgr ctrl.Manager, list func() client.ObjectList) (*builder.Builder, error) {
	m, err := mgr.GetRESTMapper().RESTMapping(engine.ClusterGroupKind)
	if err != nil {
		return nil, fmt.Errorf("the Clusters served: %w", err)
	}
	served := &unstructured.Unstructured{}
	served.SetGroupVersionKind(m.GroupVersionKind)
	c := mgr.GetClient()
	byName := func(obj client.Object) string { return obj.GetName() }
	return b.
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(ofCluster(c, list, byName)),
			builder.WithPredicates(predicate.TypedFuncs[client.Object]{UpdateFunc: ClusterChanged})).
		Watches(served, handler.EnqueueRequestsFromMapFunc(ofCluster(c, list, byName)),
			builder.WithPredicates(predicate.Funcs{CreateFunc: func(event.CreateEvent) bool { return false }, DeleteFunc: func(event.DeleteEvent) bool { return false }, UpdateFunc: pauseChanged})).
		Watches(&infrav1.TerraformCluster{}, handler.EnqueueRequestsFromMapFunc(ofCluster(c, list, func(obj client.Object) string {
			return engine.ClusterName(obj.(*infrav1.TerraformCluster))
		})), builder.WithPredicates(predicate.TypedFuncs[client.Object]{UpdateFunc: TerraformClusterChanged})), nil
}

// pauseChanged: an update of a Cluster's unstructured copy that changed its
// spec.paused.
func pauseChanged(e event.UpdateEvent) bool {
	old, okOld := e.ObjectOld.(*unstructured.Unstructured)
	now, okNew := e.ObjectNew.(*unstructured.Unstructured)
	if !okOld || !okNew {
		return true
	}
	was, _, _ := unstructured.NestedBool(old.Object, "spec", "paused")
	is, _, _ := unstructured.NestedBool(now.Object, "spec", "paused")
	return was != is
}

// ClusterChanged: an update of a Cluster that its machines and pools act
// on — its pause, its infrastructure provisioned or named. Cluster API
// writes a Cluster's status whenever one of its machines changes; were
// each such update a reconcile of every machine of the cluster, a cluster
// of M machines would cost M² of them.
func ClusterChanged(e event.UpdateEvent) bool {
	old, okOld := e.ObjectOld.(*clusterv1.Cluster)
	now, okNew := e.ObjectNew.(*clusterv1.Cluster)
	if !okOld || !okNew {
		return true
	}
	return ptr.Deref(old.Spec.Paused, false) != ptr.Deref(now.Spec.Paused, false) ||
		ptr.Deref(old.Status.Initialization.InfrastructureProvisioned, false) != ptr.Deref(now.Status.Initialization.InfrastructureProvisioned, false) ||
		old.Spec.InfrastructureRef != now.Spec.InfrastructureRef
}

// TerraformClusterChanged: an update of a TerraformCluster that its
// machines and pools act on — its exports or their condition, its
// cluster, or the end of its apply or destroy Job (their Jobs wait for
// it). A cluster's other runs (plans, drift checks) and status do not
// concern them.
func TerraformClusterChanged(e event.UpdateEvent) bool {
	old, okOld := e.ObjectOld.(*infrav1.TerraformCluster)
	now, okNew := e.ObjectNew.(*infrav1.TerraformCluster)
	if !okOld || !okNew {
		return true
	}
	// exports: the exports and their condition's status and reason.
	exports := func(tc *infrav1.TerraformCluster) [3]string {
		var e [3]string
		if tc.Status.Exports != nil {
			e[0] = string(tc.Status.Exports.Raw)
		}
		if c := meta.FindStatusCondition(tc.Status.Conditions, infrav1.ConditionExportsPublished); c != nil {
			e[1], e[2] = string(c.Status), c.Reason
		}
		return e
	}
	return exports(old) != exports(now) || engine.ClusterName(old) != engine.ClusterName(now) || ChangeEnded(old, now)
}

// Infrastructure is the request for the object of kind (of captf's API)
// that ref, an owner's infrastructureRef in namespace, names; none when
// it names another.
func Infrastructure(namespace string, ref clusterv1.ContractVersionedObjectReference, kind string) []reconcile.Request {
	if ref.Kind != kind || ref.APIGroup != infrav1.GroupVersion.Group || ref.Name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: namespace, Name: ref.Name}}}
}

// ofCluster maps an object to the objects in list (an empty list of a
// kind) of its namespace whose cluster-name label is the cluster
// clusterOf names.
func ofCluster(c client.Reader, list func() client.ObjectList, clusterOf func(client.Object) string) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		l := list()
		if err := c.List(ctx, l, client.InNamespace(obj.GetNamespace()), client.MatchingLabels{clusterv1.ClusterNameLabel: clusterOf(obj)}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "List the objects of a cluster")
			return nil
		}
		var reqs []reconcile.Request
		if err := meta.EachListItem(l, func(o runtime.Object) error {
			if item, ok := o.(client.Object); ok {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(item)})
			}
			return nil
		}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Read the objects of a cluster")
			return nil
		}
		return reqs
	}
}
