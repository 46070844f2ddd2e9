package capi

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/captf/captf/internal/controller/engine"
)

// IndexBootstrapData indexes the objects that name a bootstrap data
// Secret (Machines, MachinePools) by that Secret's name.
const IndexBootstrapData = "captf.io/bootstrap-data"

// WatchBootstrapData brings back the objects of a kind when the bootstrap
// data they wait for appears: it indexes owner's type (a Machine, a
// MachinePool) by the Secret secretOf names, and watches Secrets; one
// created, or whose data changed, maps through the owners that name it
// (listed into list) to their infrastructure objects (infraOf). Bootstrap
// providers may write the Secret after the owner names it. The manager's
// own Secrets, which change several times a run, find no owner in the
// index and cost no request.
func WatchBootstrapData(b *builder.Builder, mgr ctrl.Manager, owner client.Object, list func() client.ObjectList,
	secretOf func(client.Object) string, infraOf handler.MapFunc) (*builder.Builder, error) {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), owner, IndexBootstrapData, func(obj client.Object) []string {
		if name := secretOf(obj); name != "" {
			return []string{name}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	c := mgr.GetClient()
	return b.Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, secret client.Object) []reconcile.Request {
		owners := list()
		if err := c.List(ctx, owners, client.InNamespace(secret.GetNamespace()), client.MatchingFields{IndexBootstrapData: secret.GetName()}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "List the owners naming a bootstrap data Secret")
			return nil
		}
		items, err := meta.ExtractList(owners)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "List the owners naming a bootstrap data Secret")
			return nil
		}
		var reqs []reconcile.Request
		for _, item := range items {
			if o, ok := item.(client.Object); ok {
				reqs = append(reqs, infraOf(ctx, o)...)
			}
		}
		return reqs
	}), builder.WithPredicates(predicate.Funcs{
		UpdateFunc: secretDataChanged,
		DeleteFunc: func(event.DeleteEvent) bool { return false },
	})), nil
}

// secretDataChanged: an update of a Secret whose data changed.
func secretDataChanged(e event.UpdateEvent) bool {
	old, okOld := e.ObjectOld.(*corev1.Secret)
	now, okNew := e.ObjectNew.(*corev1.Secret)
	return !okOld || !okNew || engine.DataChanged(old, now)
}
