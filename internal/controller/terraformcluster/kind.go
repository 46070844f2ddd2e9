// Package terraformcluster is the TerraformCluster kind of the run engine
// (internal/controller/engine): what is a cluster's alone — the control
// plane endpoint and failure domains its module publishes, the Clusters it
// watches — and its registration with the manager.
package terraformcluster

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/runner"
)

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=terraformclusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=terraformclusters/status,verbs=get;update;patch

// Kind is the TerraformCluster kind: an engine.Reconciler with it
// reconciles TerraformClusters.
var Kind engine.Kind = cluster{}

// cluster is the TerraformCluster kind.
type cluster struct{}

func (cluster) Name() string       { return "TerraformCluster" }
func (cluster) Short() string      { return "tfc" }
func (cluster) New() engine.Object { return &infrav1.TerraformCluster{} }

func (cluster) ListReading(ctx context.Context, c client.Reader, namespace, key string) ([]engine.Object, error) {
	var list infrav1.TerraformClusterList
	if err := c.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{engine.IndexReads: key}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	objs := make([]engine.Object, len(list.Items))
	for i := range list.Items {
		objs[i] = &list.Items[i]
	}
	return objs, nil
}

func (cluster) CopyStatus(dst, src engine.Object) {
	dst.(*infrav1.TerraformCluster).Status = *src.(*infrav1.TerraformCluster).Status.DeepCopy()
}

// Applied: the failure domains reach status.failureDomains, and the
// control plane endpoint spec.controlPlaneEndpoint.
func (cluster) Applied(view engine.Object, msg *runner.Message) []engine.Step {
	view.(*infrav1.TerraformCluster).Status.FailureDomains = failureDomains(msg.FailureDomains)
	if e := msg.Endpoint; e != nil {
		return []engine.Step{publishEndpoint{Host: e.Host, Port: e.Port}}
	}
	return nil
}

func (cluster) Signs(obj engine.Object) []string {
	if e := obj.(*infrav1.TerraformCluster).Spec.ControlPlaneEndpoint; e.Host != "" || e.Port != 0 {
		return []string{"spec.controlPlaneEndpoint, which an apply published"}
	}
	return nil
}

// Watch: where Cluster API is installed, its Clusters are watched, so
// lifting a Cluster's pause acts at once. Without it the manager runs
// alone.
func (cluster) Watch(b *builder.Builder, mgr ctrl.Manager) *builder.Builder {
	m, err := mgr.GetRESTMapper().RESTMapping(engine.ClusterGroupKind)
	if err != nil {
		return b
	}
	c := &unstructured.Unstructured{}
	c.SetGroupVersionKind(m.GroupVersionKind)
	return b.Watches(c, handler.EnqueueRequestsFromMapFunc(infrastructureOf))
}

// publishEndpoint writes spec.controlPlaneEndpoint, the Cluster API
// contract's field, in a patch of its own (the status is written at the
// end of the reconcile).
type publishEndpoint struct {
	Host string
	Port int32
}

func (s publishEndpoint) Apply(ctx context.Context, r *engine.Reconciler, x *engine.StepContext) error {
	e := infrav1.APIEndpoint{Host: s.Host, Port: s.Port}
	if x.Obj.(*infrav1.TerraformCluster).Spec.ControlPlaneEndpoint == e {
		return nil
	}
	if err := r.PatchObject(ctx, x.Obj, func(obj engine.Object) { obj.(*infrav1.TerraformCluster).Spec.ControlPlaneEndpoint = e }); err != nil {
		return fmt.Errorf("control plane endpoint: %w", err)
	}
	return nil
}

// failureDomains are the module's failure domains as the contract's
// status.failureDomains: what the last successful apply reported, nothing
// when the module declares none (or a sensitive one).
func failureDomains(in []runner.FailureDomain) []infrav1.FailureDomain {
	if len(in) == 0 {
		return nil
	}
	out := make([]infrav1.FailureDomain, len(in))
	for i, d := range in {
		out[i] = infrav1.FailureDomain{Name: d.Name, ControlPlane: ptr.To(d.ControlPlane), Attributes: d.Attributes}
	}
	return out
}

// infrastructureOf maps a Cluster to the TerraformCluster its
// spec.infrastructureRef names (apiGroup in v1beta2, apiVersion before).
func infrastructureOf(_ context.Context, obj client.Object) []reconcile.Request {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	ref, _, _ := unstructured.NestedStringMap(u.Object, "spec", "infrastructureRef")
	group := ref["apiGroup"]
	if gv, err := schema.ParseGroupVersion(ref["apiVersion"]); group == "" && err == nil {
		group = gv.Group
	}
	if ref["kind"] != "TerraformCluster" || group != infrav1.GroupVersion.Group || ref["name"] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: u.GetNamespace(), Name: ref["name"]}}}
}
