// Package terraformmachine is the TerraformMachine kind of the run engine
// (internal/controller/engine): a Cluster API infrastructure machine. What
// is a machine's alone: it waits for its owner Machine, its cluster's
// infrastructure and exports and its bootstrap data; it is rendered once
// and never again after its state records an apply (its later runs use
// the durable inputs Secret); it takes no TerraformPlan; it publishes its
// provider ID, addresses and failure domain; and a Job of it waits while
// its cluster's apply or destroy runs.
package terraformmachine

import (
	"context"
	"encoding/json"
	"maps"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	"github.com/captf/captf/internal/controller/capi"
	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/modulecontract"
	"github.com/captf/captf/internal/render"
	"github.com/captf/captf/internal/runner"
	"github.com/captf/captf/internal/tfstate"
)

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=terraformmachines,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=terraformmachines/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=terraformclusters,verbs=get;list;watch

// Kind is the TerraformMachine kind: an engine.Reconciler with it
// reconciles TerraformMachines.
var Kind engine.Kind = machine{engine.NewBasics("TerraformMachine", "tfm", &infrav1.TerraformMachine{}, &infrav1.TerraformMachineList{}).
	// A cluster lists its machines by its name (its watches, its deletion).
	IndexedBy(infrav1.LabelClusterName)}

// Served says whether mapper serves Cluster API's Machine (v1beta2), as
// the kind needs: a machine waits for its owner Machine, and a watch of
// Machines where none are served would stop the manager. The error says
// why not.
func Served(mapper meta.RESTMapper) error { return capi.Served(mapper, "Machine") }

// machine is the TerraformMachine kind.
type machine struct{ engine.Basics }

// Applied: the addresses and the failure domain reach the status. The
// provider ID is read from the state (FromState), never from the Job's
// report: the runner runs the module's code.
func (machine) Applied(view engine.Object, msg *runner.Message) []engine.Step {
	tm := view.(*infrav1.TerraformMachine)
	tm.Status.Addresses = nil
	for _, a := range msg.Addresses {
		tm.Status.Addresses = append(tm.Status.Addresses, infrav1.MachineAddress{Type: a.Type, Address: a.Address})
	}
	tm.Status.FailureDomain = msg.FailureDomain
	return nil
}

// providerID is a TerraformMachine's spec.providerID.
func providerID(obj engine.Object) *string { return &obj.(*infrav1.TerraformMachine).Spec.ProviderID }

// Refresh: no refresh Jobs; a machine publishes nothing that changes outside its apply.
func (machine) Refresh(context.Context, client.Reader, engine.Object) (engine.RefreshSchedule, error) {
	return engine.RefreshSchedule{}, nil
}
func (machine) Refreshed(engine.Object, metav1.Time) {}

func (machine) Signs(obj engine.Object) []string {
	if obj.(*infrav1.TerraformMachine).Spec.ProviderID != "" {
		return []string{"spec.providerID, which an apply published"}
	}
	return nil
}

// FromState publishes the provider_id output of the machine's state in
// spec.providerID, once. Whether the machine may be reported provisioned
// with it is Published's.
func (machine) FromState(obj engine.Object, output func(string) (tfstate.Output, error)) []engine.Step {
	id, wait := capi.StateProviderID(output, true)
	if wait != nil || *providerID(obj) != "" {
		return nil
	}
	return []engine.Step{capi.PublishProviderID{ID: id, Field: providerID}}
}

// Published: a machine is reported provisioned only when its state has a
// provider_id output and spec.providerID holds it: a machine created with
// another ID (only clusterctl move may create one with an ID, see
// internal/webhook/providerid) never hands it to its Machine.
func (machine) Published(obj engine.Object, output func(string) (tfstate.Output, error)) *engine.Wait {
	id, wait := capi.StateProviderID(output, true)
	if wait != nil {
		return wait
	}
	return capi.SameProviderID(*providerID(obj), id)
}

// DeletionWaits: nothing of Cluster API runs on a machine's
// infrastructure but the machine's own node; its destroy waits only for a
// Job of its cluster (Gate).
func (machine) DeletionWaits(context.Context, client.Reader, engine.Object) (*engine.Wait, error) {
	return nil, nil
}

// Held: a machine is never rendered again once applied; nothing is held.
func (machine) Held() string { return "" }

// A machine is never rendered again once its state records an apply (a
// changed machine is a new Machine), and takes no TerraformPlan: a plan
// the destructive-plan guard stopped is approved by annotation.
func (machine) Frozen() bool { return true }
func (machine) Plans() bool  { return false }

// Inputs are the machine contract's variables: the cluster's exports, the
// Machine's name, failure domain and Kubernetes version, whether it
// belongs to the control plane, and the bootstrap data, which is
// sensitive. Until each can be
// had the machine waits: for its owner Machine, its Cluster's
// infrastructure, the exports, the bootstrap data.
func (machine) Inputs(ctx context.Context, c client.Reader, obj engine.Object) (map[string]render.Variable, *engine.Wait, error) {
	m, wait, err := capi.OwnerMachine(ctx, c, obj)
	if err != nil || wait != nil {
		return nil, wait, err
	}
	cluster, wait, err := capi.ProvisionedCluster(ctx, c, obj)
	if err != nil || wait != nil {
		return nil, wait, err
	}
	exports, wait, err := capi.Exports(ctx, c, cluster)
	if err != nil || wait != nil {
		return nil, wait, err
	}
	data, wait, err := capi.BootstrapData(ctx, c, m)
	if err != nil || wait != nil {
		return nil, wait, err
	}
	_, controlPlane := m.Labels[clusterv1.MachineControlPlaneLabel]
	return map[string]render.Variable{
		modulecontract.VariableExports:       {Value: exports},
		modulecontract.VariableMachineName:   {Value: jsonOf(m.Name)},
		modulecontract.VariableFailureDomain: {Value: jsonOf(m.Spec.FailureDomain)},
		modulecontract.VariableControlPlane:  {Value: jsonOf(controlPlane)},
		// A version bump is new Machines (Cluster API rolls them out),
		// each rendered with its own.
		modulecontract.VariableKubernetesVersion: {Value: jsonOf(m.Spec.Version)},
		// Bytes that are not UTF-8 read as U+FFFD: bootstrap data is
		// text (cloud-init, Ignition).
		modulecontract.VariableBootstrapData: {Value: jsonOf(string(data)), Sensitive: true},
	}, nil, nil
}

// jsonOf is v as JSON; v is a string or a bool, which always encode.
func jsonOf(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// Gate: a Job of a machine waits while an apply or destroy of its cluster
// runs.
func (machine) Gate(ctx context.Context, c client.Reader, obj engine.Object, jobs []batchv1.Job) (*engine.Wait, error) {
	return capi.ClusterJob(ctx, c, obj, jobs)
}

// Watch: the owner Machines (their bootstrap data Secret named there),
// the bootstrap data Secrets they name as they are created, the Clusters
// (their infrastructure is provisioned) and the TerraformClusters (their
// exports, their Jobs) bring the machines back that wait on them.
func (machine) Watch(b *builder.Builder, mgr ctrl.Manager) (*builder.Builder, error) {
	b = b.Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(infrastructureOf),
		builder.WithPredicates(predicate.TypedFuncs[client.Object]{UpdateFunc: machineChanged}))
	b, err := capi.WatchBootstrapData(b, mgr, &clusterv1.Machine{}, func() client.ObjectList { return &clusterv1.MachineList{} },
		func(obj client.Object) string {
			return ptr.Deref(obj.(*clusterv1.Machine).Spec.Bootstrap.DataSecretName, "")
		}, infrastructureOf)
	if err != nil {
		return nil, err
	}
	return capi.WatchClusters(b, mgr, func() client.ObjectList { return &infrav1.TerraformMachineList{} })
}

// machineChanged: an update of a Machine that its infrastructure machine
// acts on — what its inputs are read from (its bootstrap data Secret, its
// failure domain, its labels). The status Cluster API writes as the
// Machine goes through its phases does not concern it.
func machineChanged(e event.UpdateEvent) bool {
	old, okOld := e.ObjectOld.(*clusterv1.Machine)
	now, okNew := e.ObjectNew.(*clusterv1.Machine)
	if !okOld || !okNew {
		return true
	}
	return ptr.Deref(old.Spec.Bootstrap.DataSecretName, "") != ptr.Deref(now.Spec.Bootstrap.DataSecretName, "") ||
		old.Spec.FailureDomain != now.Spec.FailureDomain || !maps.Equal(old.Labels, now.Labels) ||
		old.Spec.InfrastructureRef != now.Spec.InfrastructureRef
}

// infrastructureOf maps a Machine to the TerraformMachine its
// spec.infrastructureRef names.
func infrastructureOf(_ context.Context, obj client.Object) []reconcile.Request {
	m, ok := obj.(*clusterv1.Machine)
	if !ok {
		return nil
	}
	return capi.Infrastructure(m.Namespace, m.Spec.InfrastructureRef, "TerraformMachine")
}
