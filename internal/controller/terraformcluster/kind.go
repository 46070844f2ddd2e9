// Package terraformcluster is the TerraformCluster kind of the run engine
// (internal/controller/engine): what is a cluster's alone — the control
// plane endpoint, failure domains and exports its module publishes, the
// Clusters and TerraformMachines it watches, and a deletion that waits for
// its machines.
package terraformcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/capi"
	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/render"
	"github.com/captf/captf/internal/runner"
	"github.com/captf/captf/internal/tfstate"
)

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=terraformclusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=terraformclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=terraformmachines,verbs=get;list;watch

// Kind is the TerraformCluster kind: an engine.Reconciler with it
// reconciles TerraformClusters.
var Kind engine.Kind = cluster{engine.NewBasics("TerraformCluster", "tfc", &infrav1.TerraformCluster{}, &infrav1.TerraformClusterList{})}

// cluster is the TerraformCluster kind.
type cluster struct{ engine.Basics }

// Applied: the failure domains reach status.failureDomains, and the
// control plane endpoint spec.controlPlaneEndpoint.
func (cluster) Applied(view engine.Object, msg *runner.Message) []engine.Step {
	view.(*infrav1.TerraformCluster).Status.FailureDomains = failureDomains(msg.FailureDomains)
	if e := msg.Endpoint; e != nil {
		return []engine.Step{publishEndpoint{Host: e.Host, Port: e.Port}}
	}
	return nil
}

// Refresh: no refresh Jobs; a cluster publishes nothing that changes outside its applies.
func (cluster) Refresh(context.Context, client.Reader, engine.Object) (engine.RefreshSchedule, error) {
	return engine.RefreshSchedule{}, nil
}
func (cluster) Refreshed(engine.Object, metav1.Time) {}

func (cluster) Signs(obj engine.Object) []string {
	if e := obj.(*infrav1.TerraformCluster).Spec.ControlPlaneEndpoint; e.Host != "" || e.Port != 0 {
		return []string{"spec.controlPlaneEndpoint, which an apply published"}
	}
	return nil
}

// FromState publishes the module's exports output in status.exports,
// canonical (keys sorted, no spaces), when it is an object that is not
// sensitive and fits MaxExportsBytes; otherwise status.exports is unset
// and ExportsPublished says why, never with a value.
func (cluster) FromState(obj engine.Object, output func(name string) (tfstate.Output, error)) []engine.Step {
	tc := obj.(*infrav1.TerraformCluster)
	exports, reason, msg := readExports(output)
	tc.Status.Exports = exports
	status := metav1.ConditionFalse
	if reason == infrav1.ReasonExportsPublished || reason == infrav1.ReasonNoExports {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&tc.Status.Conditions, metav1.Condition{Type: infrav1.ConditionExportsPublished,
		Status: status, Reason: reason, Message: msg, ObservedGeneration: tc.Generation})
	return nil
}

// readExports reads the exports output: the canonical object, or why
// there is none to publish.
func readExports(output func(name string) (tfstate.Output, error)) (*apiextensionsv1.JSON, string, string) {
	out, err := output(runner.OutputExports)
	switch {
	case err != nil:
		return nil, infrav1.ReasonExportsUnreadable, "The state's exports output could not be read: " + err.Error()
	case !out.Found:
		return nil, infrav1.ReasonNoExports, "The module declares no exports output; machines and pools get an empty object."
	case out.Sensitive:
		return nil, infrav1.ReasonExportsSensitive, "The module's exports output is sensitive, and exports are published in status.exports for machines and pools to read: it is not published. Make it non-sensitive, or keep secrets out of it."
	}
	var value any
	dec := json.NewDecoder(bytes.NewReader(out.Value))
	dec.UseNumber()
	if err := dec.Decode(&value); err != nil {
		return nil, infrav1.ReasonExportsUnreadable, "The state's exports output is not JSON."
	}
	if _, ok := value.(map[string]any); !ok {
		return nil, infrav1.ReasonExportsNotAnObject, "The module's exports output is not an object; machines and pools read an object."
	}
	// encoding/json writes map keys sorted: the canonical form.
	canonical, err := json.Marshal(value)
	if err != nil {
		return nil, infrav1.ReasonExportsUnreadable, "The state's exports output could not be written as JSON."
	}
	if len(canonical) > infrav1.MaxExportsBytes {
		return nil, infrav1.ReasonExportsTooLarge, fmt.Sprintf("The module's exports output takes %d bytes as canonical JSON, more than the %d status.exports holds: it is not published.", len(canonical), infrav1.MaxExportsBytes)
	}
	return &apiextensionsv1.JSON{Raw: canonical}, infrav1.ReasonExportsPublished, fmt.Sprintf("status.exports holds the module's exports output (%d bytes).", len(canonical))
}

// DeletionWaits: a deleted cluster waits for the TerraformMachines and
// TerraformMachinePools of its cluster (by the cluster-name label) to be
// gone.
func (cluster) DeletionWaits(ctx context.Context, c client.Reader, obj engine.Object) (*engine.Wait, error) {
	cluster := engine.ClusterName(obj)
	var machines infrav1.TerraformMachineList
	if err := c.List(ctx, &machines, client.InNamespace(obj.GetNamespace()), client.MatchingLabels{infrav1.LabelClusterName: cluster}); err != nil {
		return nil, fmt.Errorf("list TerraformMachines: %w", err)
	}
	var pools infrav1.TerraformMachinePoolList
	if err := c.List(ctx, &pools, client.InNamespace(obj.GetNamespace()), client.MatchingLabels{infrav1.LabelClusterName: cluster}); err != nil {
		return nil, fmt.Errorf("list TerraformMachinePools: %w", err)
	}
	var remain []string
	for _, m := range machines.Items {
		remain = append(remain, "TerraformMachine "+m.Name)
	}
	for _, p := range pools.Items {
		remain = append(remain, "TerraformMachinePool "+p.Name)
	}
	if len(remain) == 0 {
		return nil, nil
	}
	return &engine.Wait{Reason: infrav1.ReasonMachinesRemain, Message: fmt.Sprintf(
		"The object is deleted and cluster %s still has machines or pools (%d: %s): nothing is destroyed or released until they are gone, since they may run on what it would destroy.",
		cluster, len(remain), strings.Join(remain[:min(len(remain), 5)], ", "))}, nil
}

// A cluster is rendered again whenever its inputs change, and its plans
// are TerraformPlans.
func (cluster) Frozen() bool { return false }

// Held: a cluster holds no change back.
func (cluster) Held() string { return "" }
func (cluster) Plans() bool  { return true }

// Inputs: a cluster has no variables of its own. One that belongs to a
// Cluster API Cluster (made by a topology, or labelled with a cluster
// name) waits for that Cluster to own it; a standalone one waits for
// nothing.
func (cluster) Inputs(ctx context.Context, c client.Reader, obj engine.Object) (map[string]render.Variable, *engine.Wait, error) {
	wait, err := capi.ClusterOwner(ctx, c, obj)
	return nil, wait, err
}

// Gate: a Job of a cluster waits while an apply or destroy of one of its
// machines runs, as theirs wait for its.
func (cluster) Gate(_ context.Context, _ client.Reader, _ engine.Object, jobs []batchv1.Job) (*engine.Wait, error) {
	return capi.MachineJob(jobs), nil
}

// Watch: where Cluster API is installed, its Clusters are watched, so
// lifting a Cluster's pause acts at once (without it the manager runs
// alone); and TerraformMachines and TerraformMachinePools, so a deleted
// cluster waiting for them goes on when the last is gone, and a Job
// waiting for one of theirs when that ends.
func (cluster) Watch(b *builder.Builder, mgr ctrl.Manager) (*builder.Builder, error) {
	if m, err := mgr.GetRESTMapper().RESTMapping(engine.ClusterGroupKind); err == nil {
		c := &unstructured.Unstructured{}
		c.SetGroupVersionKind(m.GroupVersionKind)
		b = b.Watches(c, handler.EnqueueRequestsFromMapFunc(infrastructureOf))
	}
	// Only one that is gone (a deleted cluster waits for them) and the
	// end of an apply or destroy (a cluster's Job waits for it) change
	// what a cluster does; the many other updates of their runs would
	// each cost a reconcile.
	changes := builder.WithPredicates(predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: machineChangeEnded,
	})
	return b.Watches(&infrav1.TerraformMachine{}, handler.EnqueueRequestsFromMapFunc(clustersOf(mgr.GetClient())), changes).
		Watches(&infrav1.TerraformMachinePool{}, handler.EnqueueRequestsFromMapFunc(clustersOf(mgr.GetClient())), changes), nil
}

// machineChangeEnded: an update of a TerraformMachine or
// TerraformMachinePool whose apply or destroy Job ended.
func machineChangeEnded(e event.UpdateEvent) bool {
	old, okOld := e.ObjectOld.(engine.Object)
	now, okNew := e.ObjectNew.(engine.Object)
	return okOld && okNew && capi.ChangeEnded(old, now)
}

// clustersOf maps a TerraformMachine or TerraformMachinePool to the
// TerraformClusters of its namespace whose cluster (engine.ClusterName) is
// its own.
func clustersOf(c client.Reader) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		cluster := obj.GetLabels()[infrav1.LabelClusterName]
		if cluster == "" {
			return nil
		}
		tcs, err := capi.TerraformClustersOf(ctx, c, obj.GetNamespace(), cluster)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "TerraformClusters of a machine or pool")
			return nil
		}
		reqs := make([]reconcile.Request, len(tcs))
		for i, tc := range tcs {
			reqs[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(tc)}
		}
		return reqs
	}
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
