package engine

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/sets"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/captf/captf/api/v1alpha1"
)

// readsIndex is the index key of each variable source of an object the
// engine reconciles: "<kind>/<name>" for a valueFrom and for the Secret
// spec.identityRef names, "<kind>/*" for a variablesFrom selector.
func readsIndex(obj client.Object) []string {
	o, ok := obj.(Object)
	if !ok {
		return nil
	}
	spec := o.GetRunnerSpec()
	keys := sets.New[string]()
	for _, v := range spec.Variables {
		switch {
		case v.ValueFrom == nil:
		case v.ValueFrom.SecretKeyRef != nil:
			keys.Insert("Secret/" + v.ValueFrom.SecretKeyRef.Name)
		case v.ValueFrom.ConfigMapKeyRef != nil:
			keys.Insert("ConfigMap/" + v.ValueFrom.ConfigMapKeyRef.Name)
		}
	}
	for _, src := range spec.VariablesFrom {
		keys.Insert(src.Kind + "/*")
	}
	if id := spec.IdentityRef; id != nil && id.Kind == infrav1.IdentityKindSecret {
		keys.Insert("Secret/" + id.Name)
	}
	return sets.List(keys)
}

// sourcesOf maps a ConfigMap or Secret to the objects of the kind in its
// namespace that read variables from it, by name (valueFrom) or by label
// (variablesFrom), so new inputs act at once instead of at the next
// re-check.
func (r *Reconciler) sourcesOf(kind string) func(context.Context, client.Object) []reconcile.Request {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		seen := sets.New[client.ObjectKey]()
		var reqs []reconcile.Request
		for _, key := range []string{kind + "/" + obj.GetName(), kind + "/*"} {
			// Read only: the cache's objects need no copy.
			list, err := r.kind().ListReading(ctx, r.Client, obj.GetNamespace(), key)
			if err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "List objects for a variables source", "kind", r.kind().Name())
				return nil
			}
			for _, o := range list {
				k := client.ObjectKeyFromObject(o)
				if !seen.Has(k) && readsFrom(o.GetRunnerSpec(), kind, obj) {
					seen.Insert(k)
					reqs = append(reqs, reconcile.Request{NamespacedName: k})
				}
			}
		}
		return reqs
	}
}

// readsFrom reports whether spec reads a variable from obj, a kind
// ("ConfigMap" or "Secret").
func readsFrom(spec *infrav1.RunnerSpec, kind string, obj client.Object) bool {
	for _, v := range spec.Variables {
		if v.ValueFrom == nil {
			continue
		}
		if kind == "ConfigMap" && v.ValueFrom.ConfigMapKeyRef != nil && v.ValueFrom.ConfigMapKeyRef.Name == obj.GetName() {
			return true
		}
		if kind == "Secret" && v.ValueFrom.SecretKeyRef != nil && v.ValueFrom.SecretKeyRef.Name == obj.GetName() {
			return true
		}
	}
	if id := spec.IdentityRef; id != nil && id.Kind == infrav1.IdentityKindSecret && kind == "Secret" && id.Name == obj.GetName() {
		return true
	}
	for _, src := range spec.VariablesFrom {
		if src.Kind != kind {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(&src.Selector)
		if err == nil && sel.Matches(labels.Set(obj.GetLabels())) {
			return true
		}
	}
	return false
}

// ClientOptions are the options of the manager's client: objects read as
// unstructured — Cluster API's Clusters, whose pause pauses an object
// (paused.go), in whatever version is served — come from the cache like
// the typed ones. Without it every reconcile of an object of a Cluster
// would read the Cluster from the API server: a second request on each
// idle re-check.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{Unstructured: true}}
}

// CacheOptions keeps the manager's cache of Jobs and Pods to those captf
// made (labelled captf.io/managed=true): a cluster's other workloads are
// neither watched nor held in memory. State backups are kept out of it too:
// they would hold every state several times over (backup.go). Of every
// other Secret but the manager's own it holds no data (secretdata.go).
func CacheOptions() cache.Options {
	managed := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{infrav1.LabelManaged: "true"})}
	noBackup, err := labels.NewRequirement(infrav1.LabelStateBackup, selection.DoesNotExist, nil)
	if err != nil {
		// A constant key always makes a requirement.
		panic(err)
	}
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&batchv1.Job{}:   managed,
		&corev1.Pod{}:    managed,
		&corev1.Secret{}: {Label: labels.NewSelector().Add(*noBackup), Transform: stripSecretData},
	}}
}

// podOwner maps a runner pod that cannot pull its image to its object,
// if of the kind: such a pod changes no Job, so only its own watch
// tells. Any other change of a pod (created, running, finished) is not
// acted on: its Job's own events say what matters, and a reconcile per
// pod event would cost a request each.
func (r *Reconciler) podOwner(_ context.Context, obj client.Object) []reconcile.Request {
	// The label may hold a shortened name; the annotation holds it whole.
	name := obj.GetAnnotations()[infrav1.LabelOwnerName]
	if obj.GetLabels()[infrav1.LabelOwnerKind] != r.kind().Name() || name == "" {
		return nil
	}
	if pod, ok := obj.(*corev1.Pod); !ok || pullFailure([]corev1.Pod{*pod}) == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}}}
}

// jobEnded lets through the events of a runner Job the manager acts on:
// it finished, it is being deleted or gone. Its creation unfinished (the
// manager made it and recorded it), its progress (running, active pods) and the
// manager's own marks on it say nothing new, and each would cost a
// reconcile and a request. A manager that starts lists every Job with the
// objects themselves, whose events bring them all back.
var jobEnded = predicate.Funcs{
	CreateFunc: func(e event.CreateEvent) bool {
		// A Job the cache first sees finished (it ran while the watch
		// was down) is acted on.
		job, ok := e.Object.(*batchv1.Job)
		ended, _ := JobFinished(job)
		return !ok || ended
	},
	UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*batchv1.Job)
		now, okNew := e.ObjectNew.(*batchv1.Job)
		if !okOld || !okNew {
			return true
		}
		endedBefore, _ := JobFinished(old)
		endedNow, _ := JobFinished(now)
		return endedNow != endedBefore || (now.DeletionTimestamp != nil && old.DeletionTimestamp == nil)
	},
	DeleteFunc:  func(event.DeleteEvent) bool { return true },
	GenericFunc: func(event.GenericEvent) bool { return true },
}
