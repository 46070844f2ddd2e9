package engine

import (
	"context"
	"maps"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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
// spec.identityRef names, "<kind>/*" for a variablesFrom selector; and for
// a TerraformClusterIdentity it names, "TerraformClusterIdentity/<name>"
// and "TerraformClusterIdentity/*" (uses one: a namespace's labels may
// decide whether it may).
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
	if id := spec.IdentityRef; id != nil && id.Kind == infrav1.IdentityKindTerraformClusterIdentity {
		keys.Insert(infrav1.IdentityKindTerraformClusterIdentity+"/"+id.Name, infrav1.IdentityKindTerraformClusterIdentity+"/*")
	}
	return sets.List(keys)
}

// indexIdentitySecret indexes TerraformClusterIdentities by the Secret of
// their credentials ("<namespace>/<name>"), so an event of any Secret finds
// the identities that name it without listing them all.
const indexIdentitySecret = "captf.io/identity-secret"

// indexed holds the indexes indexOnce registered, by field indexer and
// field: the reconcilers of several kinds share one manager, whose cache
// takes an index once.
var indexed sync.Map

type indexKey struct {
	indexer client.FieldIndexer
	field   string
}

// indexOnce registers field of obj's kind with indexer, unless it is there
// already.
func indexOnce(ctx context.Context, indexer client.FieldIndexer, obj client.Object, field string, extract client.IndexerFunc) error {
	if _, done := indexed.LoadOrStore(indexKey{indexer, field}, true); done {
		return nil
	}
	return indexer.IndexField(ctx, obj, field, extract)
}

// IndexIdentities registers indexIdentitySecret with the manager's cache,
// once.
func IndexIdentities(ctx context.Context, indexer client.FieldIndexer) error {
	return indexOnce(ctx, indexer, &infrav1.TerraformClusterIdentity{}, indexIdentitySecret, func(obj client.Object) []string {
		ref := obj.(*infrav1.TerraformClusterIdentity).Spec.SecretRef
		return []string{ref.Namespace + "/" + ref.Name}
	})
}

// identityUsers maps a TerraformClusterIdentity to the objects of the kind,
// in every namespace, whose spec.identityRef names it: a change of which
// namespaces it allows, or of its Secret, shows on them at once.
func (r *Reconciler) identityUsers(ctx context.Context, id client.Object) []reconcile.Request {
	list, err := r.kind().ListReading(ctx, r.Client, "", infrav1.IdentityKindTerraformClusterIdentity+"/"+id.GetName())
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "List objects of an identity", "kind", r.kind().Name(), "identity", id.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list))
	for _, o := range list {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
	}
	return reqs
}

// secretUsers maps a Secret to the objects that read it: as a variables
// source or an identity of kind Secret (sourcesOf), or as the credentials
// of a TerraformClusterIdentity they use.
func (r *Reconciler) secretUsers() func(context.Context, client.Object) []reconcile.Request {
	sources := r.sourcesOf("Secret")
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		reqs := sources(ctx, obj)
		var ids infrav1.TerraformClusterIdentityList
		if err := r.Client.List(ctx, &ids, client.MatchingFields{indexIdentitySecret: obj.GetNamespace() + "/" + obj.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "List identities of a Secret")
			return reqs
		}
		for i := range ids.Items {
			reqs = append(reqs, r.identityUsers(ctx, &ids.Items[i])...)
		}
		return reqs
	}
}

// namespaceUsers maps a namespace whose labels changed to the objects of
// the kind in it that use a TerraformClusterIdentity allowing namespaces
// by a label selector: whether they may use it can have changed.
func (r *Reconciler) namespaceUsers(ctx context.Context, ns client.Object) []reconcile.Request {
	list, err := r.kind().ListReading(ctx, r.Client, ns.GetName(), infrav1.IdentityKindTerraformClusterIdentity+"/*")
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "List objects of a namespace that use an identity", "kind", r.kind().Name(), "namespace", ns.GetName())
		return nil
	}
	var reqs []reconcile.Request
	for _, o := range list {
		ref := o.GetRunnerSpec().IdentityRef
		var id infrav1.TerraformClusterIdentity
		if err := r.Client.Get(ctx, client.ObjectKey{Name: ref.Name}, &id); err != nil {
			// Missing: its own creation brings the object back.
			continue
		}
		if a := id.Spec.AllowedNamespaces; a != nil && a.Selector != nil {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
		}
	}
	return reqs
}

// labelsChanged lets through a namespace's update that changed its labels,
// the only part of a namespace an identity reads. A namespace made or
// deleted holds no object yet, or none any more.
var labelsChanged = predicate.Funcs{
	CreateFunc: func(event.CreateEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return !maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
	},
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
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
// neither watched nor held in memory. Of those it holds no managed fields,
// and of a Job's pod template and of a pod only what the manager reads of
// a cached one (stripJob, stripPod).
// Of every Secret but the manager's own it holds no data, and of its
// state backups neither, which would hold every state several times over
// (secretdata.go): their metadata is what backing up a new serial lists.
func CacheOptions() cache.Options {
	managed := labels.SelectorFromSet(labels.Set{infrav1.LabelManaged: "true"})
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&batchv1.Job{}:   {Label: managed, Transform: stripJob},
		&corev1.Pod{}:    {Label: managed, Transform: stripPod},
		&corev1.Secret{}: {Transform: stripSecretData},
	}}
}

// CacheOptionsIn is CacheOptions restricted to namespaces, every
// namespace when there are none: the manager watches, holds and so
// reconciles the objects of those namespaces alone (--namespace).
// Cluster-scoped objects (identities, namespaces) are watched whatever
// the namespaces.
func CacheOptionsIn(namespaces ...string) cache.Options {
	opts := CacheOptions()
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts
}

// stripJob is the cache's transform of a Job: it keeps the metadata but
// the managed fields, the status, and the spec but the pod template's,
// of which it keeps each container's name, image and command and each
// volume's name and Secret. That is what a cached Job's template is read
// for: the image it runs (pinDigest), whether it guards (setRunning), and
// whether it mounts a per-run copy of credentials (hasCredentials). A
// runner Job's template (environment, mounts, resources, security
// context, its init container) is otherwise held for every Job kept.
func stripJob(in any) (any, error) {
	job, ok := in.(*batchv1.Job)
	if !ok {
		return in, nil
	}
	job.ManagedFields = nil
	spec := &job.Spec.Template.Spec
	containers := make([]corev1.Container, len(spec.Containers))
	for i, c := range spec.Containers {
		containers[i] = corev1.Container{Name: c.Name, Image: c.Image, Command: c.Command}
	}
	var volumes []corev1.Volume
	for _, v := range spec.Volumes {
		if v.Secret != nil {
			volumes = append(volumes, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: v.Secret.SecretName}}})
		}
	}
	*spec = corev1.PodSpec{Containers: containers, Volumes: volumes}
	return job, nil
}

// stripPod is the cache's transform of a pod: it keeps the metadata but
// the managed fields, and of the status the phase and each container's
// name, image, image ID and state. That is all a cached pod is read for:
// its owner's labels and annotations (podOwner), whether it cannot pull
// an image (pullFailure), and, once it ended, the outcome of its Job
// (outcomeOf: the runner's report in its termination message, the digest
// it ran; finishedJob). Its spec, a copy of its Job's template, is not
// held for every pod of every Job kept.
func stripPod(in any) (any, error) {
	pod, ok := in.(*corev1.Pod)
	if !ok {
		return in, nil
	}
	pod.ManagedFields = nil
	pod.Spec = corev1.PodSpec{}
	pod.Status = corev1.PodStatus{
		Phase:                 pod.Status.Phase,
		InitContainerStatuses: containerStates(pod.Status.InitContainerStatuses),
		ContainerStatuses:     containerStates(pod.Status.ContainerStatuses),
	}
	return pod, nil
}

// containerStates keeps of each container status its name, image, image
// ID and state.
func containerStates(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	if in == nil {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(in))
	for i, st := range in {
		out[i] = corev1.ContainerStatus{Name: st.Name, Image: st.Image, ImageID: st.ImageID, State: st.State}
	}
	return out
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
