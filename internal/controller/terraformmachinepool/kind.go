// Package terraformmachinepool is the TerraformMachinePool kind of the run
// engine (internal/controller/engine): a Cluster API infrastructure
// machine pool, one module that runs many nodes. What is a pool's alone:
// it waits for its owner MachinePool, its cluster's infrastructure and
// exports and its bootstrap data, as a machine does, but changes in place
// (every change of its inputs is planned and applied; under applyPolicy
// Manual its plans wait as TerraformPlans, as a cluster's, though rotated
// bootstrap data needs no new approval and replicas an autoscaler owns
// are no input); a change of its cluster's exports that deletes or
// replaces waits as an ExportsChange plan (Held); it publishes its own
// provider ID once, and its members' provider IDs, read from its state at
// each new serial (they do not fit a Job's report), which a membership
// refresh Job renews on an interval (Refresh); it replaces the member of
// a Machine that was deleted, through its plan, when its module names each
// member's resource (Replace); and a Job of it waits while its cluster's
// apply or destroy runs.
package terraformmachinepool

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/annotations"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/capi"
	"github.com/captf/captf/internal/controller/engine"
	members "github.com/captf/captf/internal/controller/terraformmachinepoolmachine"
	"github.com/captf/captf/internal/modulecontract"
	"github.com/captf/captf/internal/render"
	"github.com/captf/captf/internal/runner"
	"github.com/captf/captf/internal/tfstate"
)

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=terraformmachinepools,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=terraformmachinepools/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=terraformclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machinepools,verbs=get;list;watch

// Kind is the TerraformMachinePool kind: an engine.Reconciler with it
// reconciles TerraformMachinePools.
var Kind engine.Kind = pool{engine.NewBasics("TerraformMachinePool", "tfmp", &infrav1.TerraformMachinePool{}, &infrav1.TerraformMachinePoolList{}).
	// A cluster lists its pools by its name (its watches, its deletion).
	IndexedBy(infrav1.LabelClusterName)}

// Served says whether mapper serves Cluster API's MachinePool (v1beta2),
// as the kind needs: a pool waits for its owner MachinePool, and a watch
// of MachinePools where none are served would stop the manager. The
// error says why not.
func Served(mapper meta.RESTMapper) error { return capi.Served(mapper, "MachinePool") }

// maxProviderID bounds one entry of spec.providerIDList (the API's).
const maxProviderID = 512

// pool is the TerraformMachinePool kind.
type pool struct{ engine.Basics }

// Applied: nothing from the Job's report. The pool's own provider ID and
// its members are read from the state (FromState): the runner runs the
// module's code.
func (pool) Applied(engine.Object, *runner.Message) []engine.Step { return nil }

// defaultMembershipInterval is the time between two membership refreshes
// of a pool whose spec.membership sets none, after an apply or a change;
// defaultMembershipMaxInterval the longest, while nothing changes.
const (
	defaultMembershipInterval    = 60 * time.Second
	defaultMembershipMaxInterval = 10 * time.Minute
)

// Refresh: a pool's members change outside any apply (an autoscaler, a
// replaced instance), so a refresh Job reads them again right after every
// apply, then every spec.membership.intervalSeconds while they change or
// while the owner MachinePool asks for other replicas than the pool has,
// and less often while they stay (up to maxIntervalSeconds).
func (pool) Refresh(ctx context.Context, c client.Reader, obj engine.Object) (engine.RefreshSchedule, error) {
	p := obj.(*infrav1.TerraformMachinePool)
	s := engine.RefreshSchedule{Interval: defaultMembershipInterval, MaxInterval: defaultMembershipMaxInterval,
		Last: p.Status.LastMembershipRefresh, ChangedAt: p.Status.MembershipChangedAt}
	if v := p.Spec.Membership.IntervalSeconds; v != nil {
		s.Interval = time.Duration(*v) * time.Second
	}
	if v := p.Spec.Membership.MaxIntervalSeconds; v != nil {
		s.MaxInterval = time.Duration(*v) * time.Second
	}
	mp, wait, err := capi.OwnerMachinePool(ctx, c, obj)
	if err != nil || wait != nil {
		return s, err
	}
	s.Expecting = ptr.Deref(mp.Spec.Replicas, defaultReplicas) != p.Status.Replicas
	return s, nil
}

func (pool) Refreshed(view engine.Object, now metav1.Time) {
	view.(*infrav1.TerraformMachinePool).Status.LastMembershipRefresh = &now
}

// providerID is a TerraformMachinePool's spec.providerID.
func providerID(obj engine.Object) *string {
	return &obj.(*infrav1.TerraformMachinePool).Spec.ProviderID
}

func (pool) Signs(obj engine.Object) []string {
	p := obj.(*infrav1.TerraformMachinePool)
	var signs []string
	if p.Spec.ProviderID != "" {
		signs = append(signs, "spec.providerID, which an apply published")
	}
	if len(p.Spec.ProviderIDList) > 0 {
		signs = append(signs, "spec.providerIDList, which the state's outputs published")
	}
	return signs
}

// FromState publishes the module's provider_ids output: sorted in
// spec.providerIDList, counted in status.replicas. When the output is
// missing, sensitive or not a list of distinct provider IDs, both keep
// what they held (Cluster API would delete the Node of every ID that
// leaves the list) and MembersPublished says why, never with a value.
func (pool) FromState(obj engine.Object, output func(name string) (tfstate.Output, error)) []engine.Step {
	p := obj.(*infrav1.TerraformMachinePool)
	ids, reason, msg := readMembers(output)
	status := metav1.ConditionFalse
	if reason == infrav1.ReasonMembersPublished {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{Type: infrav1.ConditionMembersPublished,
		Status: status, Reason: reason, Message: msg, ObservedGeneration: p.Generation})
	replaceable(p, ids, reason, output)
	if replaced := readReplaced(output); !slices.Equal(p.Status.ReplacedMembers, replaced) {
		p.Status.ReplacedMembers = replaced
	}
	var steps []engine.Step
	if id, wait := capi.StateProviderID(output, false); wait == nil && id != "" && p.Spec.ProviderID == "" {
		steps = append(steps, capi.PublishProviderID{ID: id, Field: providerID})
	}
	if status != metav1.ConditionTrue {
		return steps
	}
	p.Status.Replicas = int32(len(ids))
	if slices.Equal(p.Spec.ProviderIDList, ids) {
		return steps
	}
	p.Status.MembershipChangedAt = ptr.To(metav1.Now())
	return append(steps, publishMembers{IDs: ids})
}

// replaceable sets MembersReplaceable from the state's member_addresses
// output: True when it maps every member of provider_ids to a resource
// address (the runner checks each address it uses); never with a value.
// ids and reason are what readMembers read of provider_ids.
func replaceable(p *infrav1.TerraformMachinePool, ids []string, reason string, output func(name string) (tfstate.Output, error)) {
	name := modulecontract.OutputMemberAddresses
	c := metav1.Condition{Type: infrav1.ConditionMembersReplaceable, Status: metav1.ConditionFalse, ObservedGeneration: p.Generation}
	out, err := output(name)
	var addresses map[string]string
	switch {
	case err != nil:
		c.Reason, c.Message = infrav1.ReasonMemberAddressesInvalid, fmt.Sprintf("The state's %s output could not be read: %v", name, err)
	case !out.Found || string(out.Value) == "null":
		c.Reason, c.Message = infrav1.ReasonMemberAddressesMissing, fmt.Sprintf(
			"The module's state has no %s output: deleting a member's Machine replaces nothing, and the member's object and Machine are made again.", name)
	case json.Unmarshal(out.Value, &addresses) != nil:
		c.Reason, c.Message = infrav1.ReasonMemberAddressesInvalid, fmt.Sprintf("The module's %s output is not a map of strings.", name)
	case reason != infrav1.ReasonMembersPublished:
		c.Reason, c.Message = infrav1.ReasonMemberAddressesInvalid, fmt.Sprintf("The members are not published (%s), so their addresses are not read.", reason)
	default:
		missing := 0
		for _, id := range ids {
			if addresses[id] == "" {
				missing++
			}
		}
		if missing > 0 {
			c.Reason, c.Message = infrav1.ReasonMemberAddressesInvalid, fmt.Sprintf(
				"The module's %s output names no resource for %d of the %d members: deleting a member's Machine replaces nothing until it names every one.", name, missing, len(ids))
			break
		}
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, infrav1.ReasonMemberAddresses, fmt.Sprintf(
			"The module's %s output names the resource of each of the %d members: deleting a member's Machine replaces that member through the pool's plan.", name, len(ids))
	}
	meta.SetStatusCondition(&p.Status.Conditions, c)
}

// readReplaced reads the member objects whose members the applied root
// replaced (render.ReplacedOutput), sorted; none when it has none.
func readReplaced(output func(name string) (tfstate.Output, error)) []string {
	out, err := output(render.ReplacedOutput)
	var uids []string
	if err != nil || !out.Found || json.Unmarshal(out.Value, &uids) != nil {
		return nil
	}
	slices.Sort(uids)
	return slices.Compact(uids)
}

// Replace: the members whose Machines were deleted, while the module can
// replace one (MembersReplaceable): each member object of the pool being
// deleted that holds FinalizerMember and names a member of
// spec.providerIDList, unless the last apply replaced it already. Only
// objects the manager made count (the pool's UID in their owner
// reference): a forged one names no member of it.
func (pool) Replace(ctx context.Context, c client.Reader, obj engine.Object) ([]render.Replacement, error) {
	p := obj.(*infrav1.TerraformMachinePool)
	if !meta.IsStatusConditionTrue(p.Status.Conditions, infrav1.ConditionMembersReplaceable) || len(p.Spec.ProviderIDList) == 0 {
		return nil, nil
	}
	// The cache's own objects, read only.
	objs, err := members.Members(ctx, c, p, client.UnsafeDisableDeepCopy)
	if err != nil {
		return nil, err
	}
	var rs []render.Replacement
	for i := range objs {
		m := &objs[i]
		if m.DeletionTimestamp.IsZero() || !controllerutil.ContainsFinalizer(m, infrav1.FinalizerMember) ||
			!slices.Contains(p.Spec.ProviderIDList, m.Spec.ProviderID) || slices.Contains(p.Status.ReplacedMembers, string(m.UID)) {
			continue
		}
		rs = append(rs, render.Replacement{ProviderID: m.Spec.ProviderID, Object: string(m.UID)})
	}
	return rs, nil
}

// Published: a pool is reported provisioned — and Cluster API reads its
// members only then — once spec.providerIDList holds its own state's
// provider_ids output and spec.providerID its provider_id output, if
// any: IDs a pool was created with never reach its MachinePool.
func (pool) Published(obj engine.Object, output func(string) (tfstate.Output, error)) *engine.Wait {
	p := obj.(*infrav1.TerraformMachinePool)
	id, wait := capi.StateProviderID(output, false)
	if wait != nil {
		return wait
	}
	if wait := capi.SameProviderID(p.Spec.ProviderID, id); wait != nil {
		return wait
	}
	ids, reason, msg := readMembers(output)
	if reason != infrav1.ReasonMembersPublished {
		return &engine.Wait{Reason: reason, Message: msg + " The apply counts as failed; the pool is not reported provisioned, so Cluster API reads no members of it."}
	}
	if !slices.Equal(p.Spec.ProviderIDList, ids) {
		return &engine.Wait{Reason: infrav1.ReasonMembersMismatch, Message: fmt.Sprintf(
			"spec.providerIDList is not the %s output of the pool's own state. The pool is not reported provisioned, so Cluster API reads no members of it.", modulecontract.OutputProviderIDs)}
	}
	return nil
}

// readMembers reads the provider_ids output: the IDs sorted, or why there
// are none to publish. A message names an entry by its position, never a
// value.
func readMembers(output func(name string) (tfstate.Output, error)) ([]string, string, string) {
	name := modulecontract.OutputProviderIDs
	out, err := output(name)
	switch {
	case err != nil:
		return nil, infrav1.ReasonMembersInvalid, fmt.Sprintf("The state's %s output could not be read: %v", name, err)
	case !out.Found:
		return nil, infrav1.ReasonMembersMissing, fmt.Sprintf("The module's state has no %s output; a pool module must declare it (captf lint --role pool).", name)
	case out.Sensitive:
		return nil, infrav1.ReasonMembersSensitive, fmt.Sprintf("The module's %s output is sensitive, and the IDs are published in spec.providerIDList: it is not published. Declare it without sensitive.", name)
	}
	// The list is decoded once into the IDs; the entries are looked at one
	// by one only to say what is wrong with a list that is refused.
	var ids []string
	if err := json.Unmarshal(out.Value, &ids); err != nil {
		return nil, infrav1.ReasonMembersInvalid, invalidMembers(name, out.Value)
	}
	if len(ids) > infrav1.MaxProviderIDs {
		return nil, infrav1.ReasonMembersInvalid, fmt.Sprintf("The module's %s output has %d entries, more than the %d spec.providerIDList holds.", name, len(ids), infrav1.MaxProviderIDs)
	}
	for i, id := range ids {
		if id == "" || len(id) > maxProviderID {
			return nil, infrav1.ReasonMembersInvalid, fmt.Sprintf("Entry %d of the module's %s output is not a string of 1 to %d characters.", i, name, maxProviderID)
		}
	}
	// Sorted: an order the module's resources change is no change of the
	// list. A repeated entry is then next to its twin.
	slices.Sort(ids)
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			return nil, infrav1.ReasonMembersInvalid, invalidMembers(name, out.Value)
		}
	}
	return ids, infrav1.ReasonMembersPublished, fmt.Sprintf("spec.providerIDList holds the module's %s output (%d members).", name, len(ids))
}

// invalidMembers says what is wrong with the members list value, a refused
// provider_ids output: not a list, an entry that is not a string, or one
// that repeats an earlier; by position, never with a value.
func invalidMembers(name string, value json.RawMessage) string {
	var raw []json.RawMessage
	if json.Unmarshal(value, &raw) != nil {
		return fmt.Sprintf("The module's %s output is not a list of strings.", name)
	}
	seen := make(map[string]int, len(raw))
	for i, r := range raw {
		var id string
		if json.Unmarshal(r, &id) != nil {
			return fmt.Sprintf("Entry %d of the module's %s output is not a string of 1 to %d characters.", i, name, maxProviderID)
		}
		if j, ok := seen[id]; ok {
			return fmt.Sprintf("Entry %d of the module's %s output repeats entry %d.", i, name, j)
		}
		seen[id] = i
	}
	return fmt.Sprintf("The module's %s output is not a list of distinct strings.", name)
}

// publishMembers writes spec.providerIDList, the InfraMachinePool
// contract's field, which Cluster API copies into the MachinePool.
type publishMembers struct{ IDs []string }

func (s publishMembers) Apply(ctx context.Context, r *engine.Reconciler, x *engine.StepContext) error {
	if err := r.PatchObject(ctx, x.Obj, func(obj engine.Object) {
		obj.(*infrav1.TerraformMachinePool).Spec.ProviderIDList = s.IDs
	}); err != nil {
		return fmt.Errorf("provider ID list: %w", err)
	}
	return nil
}

// DeletionWaits: nothing of captf runs on a pool's infrastructure; its
// destroy waits only for a Job of its cluster (Gate).
func (pool) DeletionWaits(context.Context, client.Reader, engine.Object) (*engine.Wait, error) {
	return nil, nil
}

// Held: a change of the cluster's exports that deletes or replaces pool
// resources waits as an ExportsChange plan, while the pool keeps applying
// with the exports it last applied.
func (pool) Held() string { return modulecontract.VariableExports }

// A pool changes in place, and its plans that wait for approval are
// TerraformPlans, as a cluster's.
func (pool) Frozen() bool { return false }
func (pool) Plans() bool  { return true }

// defaultReplicas is the replicas of a MachinePool that sets none, as
// Cluster API's defaulting webhook sets them.
const defaultReplicas = 1

// Inputs are the pool contract's variables: the cluster's exports, the
// MachinePool's name, replicas (those of the last apply while an
// autoscaler owns them: cluster.x-k8s.io/replicas-managed-by) and failure
// domains, its machine template's labels, taints and Kubernetes version,
// and the bootstrap data, which is sensitive and out of the approval
// hash. Until each can be had the pool waits: for its owner MachinePool,
// its Cluster's infrastructure, the exports, the bootstrap data.
func (pool) Inputs(ctx context.Context, c client.Reader, obj engine.Object) (map[string]render.Variable, *engine.Wait, error) {
	mp, wait, err := capi.OwnerMachinePool(ctx, c, obj)
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
	data, rotated, wait, err := capi.PoolBootstrapData(ctx, c, mp)
	if err != nil || wait != nil {
		return nil, wait, err
	}
	type taint struct {
		Key    string `json:"key"`
		Value  string `json:"value"`
		Effect string `json:"effect"`
	}
	taints := []taint{}
	for _, t := range mp.Spec.Template.Spec.Taints {
		taints = append(taints, taint{Key: t.Key, Value: t.Value, Effect: string(t.Effect)})
	}
	labels := mp.Spec.Template.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	domains := mp.Spec.FailureDomains
	if domains == nil {
		domains = []string{}
	}
	return map[string]render.Variable{
		modulecontract.VariableExports:  {Value: exports},
		modulecontract.VariablePoolName: {Value: jsonOf(mp.Name)},
		// While an autoscaler owns the replicas, the module gets what
		// the last successful apply ran: a value someone approved (or
		// applied under Automatic), never the autoscaler's, which no
		// plan showed. The module should ignore its group's desired size.
		modulecontract.VariableReplicas:       {Value: jsonOf(ptr.Deref(mp.Spec.Replicas, defaultReplicas)), KeepApplied: annotations.ReplicasManagedByExternalAutoscaler(mp)},
		modulecontract.VariableFailureDomains: {Value: jsonOf(domains)},
		modulecontract.VariableNodeLabels:     {Value: jsonOf(labels)},
		modulecontract.VariableNodeTaints:     {Value: jsonOf(taints)},
		// A version change is a change like any other: planned, and
		// under Manual approved, then rolled out by the module.
		modulecontract.VariableKubernetesVersion: {Value: jsonOf(mp.Spec.Template.Spec.Version)},
		// Bytes that are not UTF-8 read as U+FFFD: bootstrap data is
		// text (cloud-init, Ignition). It rotates (kubeadm renews its
		// tokens): an approval does not bind data a bootstrap provider
		// made, and under Manual a change of it alone is applied
		// without a new one. Data from any other Secret is bound.
		modulecontract.VariableBootstrapData: {Value: jsonOf(string(data)), Sensitive: true, Unapproved: rotated},
	}, nil, nil
}

// jsonOf is v as JSON; v is made of strings, numbers, lists and maps of
// strings, which always encode.
func jsonOf(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// Gate: a Job of a pool waits while an apply or destroy of its cluster
// runs.
func (pool) Gate(ctx context.Context, c client.Reader, obj engine.Object, jobs []batchv1.Job) (*engine.Wait, error) {
	return capi.ClusterJob(ctx, c, obj, jobs)
}

// Watch: the owner MachinePools (their bootstrap data, replicas, failure
// domains, labels and taints), the bootstrap data Secrets they name (one
// created, or its data changed), the Clusters (their infrastructure is provisioned)
// and the TerraformClusters (their exports, their Jobs) bring the pools
// back that wait on them or read them.
func (pool) Watch(b *builder.Builder, mgr ctrl.Manager) (*builder.Builder, error) {
	b = b.Watches(&clusterv1.MachinePool{}, handler.EnqueueRequestsFromMapFunc(infrastructureOf),
		builder.WithPredicates(predicate.TypedFuncs[client.Object]{UpdateFunc: machinePoolChanged}))
	b, err := capi.WatchBootstrapData(b, mgr, &clusterv1.MachinePool{}, func() client.ObjectList { return &clusterv1.MachinePoolList{} },
		func(obj client.Object) string {
			return ptr.Deref(obj.(*clusterv1.MachinePool).Spec.Template.Spec.Bootstrap.DataSecretName, "")
		}, infrastructureOf)
	if err != nil {
		return nil, err
	}
	// A member object being deleted (its Machine was) is a member to
	// replace.
	b = b.Watches(&infrav1.TerraformMachinePoolMachine{},
		handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &infrav1.TerraformMachinePool{}),
		builder.WithPredicates(predicate.TypedFuncs[client.Object]{
			CreateFunc: func(event.CreateEvent) bool { return false },
			UpdateFunc: func(e event.UpdateEvent) bool {
				return e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
			},
			DeleteFunc:  func(event.DeleteEvent) bool { return true },
			GenericFunc: func(event.GenericEvent) bool { return false },
		}))
	return capi.WatchClusters(b, mgr, func() client.ObjectList { return &infrav1.TerraformMachinePoolList{} })
}

// machinePoolChanged: an update of a MachinePool that its infrastructure
// pool acts on — what its inputs are read from. What Cluster API writes
// as the pool's members change (spec.providerIDList, copied from the
// pool, and the status) does not concern it.
func machinePoolChanged(e event.UpdateEvent) bool {
	old, okOld := e.ObjectOld.(*clusterv1.MachinePool)
	now, okNew := e.ObjectNew.(*clusterv1.MachinePool)
	if !okOld || !okNew {
		return true
	}
	o, n := old.Spec.Template, now.Spec.Template
	return ptr.Deref(o.Spec.Bootstrap.DataSecretName, "") != ptr.Deref(n.Spec.Bootstrap.DataSecretName, "") ||
		ptr.Deref(old.Spec.Replicas, defaultReplicas) != ptr.Deref(now.Spec.Replicas, defaultReplicas) ||
		!slices.Equal(old.Spec.FailureDomains, now.Spec.FailureDomains) ||
		!maps.Equal(o.Labels, n.Labels) || !slices.Equal(o.Spec.Taints, n.Spec.Taints) ||
		o.Spec.InfrastructureRef != n.Spec.InfrastructureRef || o.Spec.Version != n.Spec.Version ||
		annotations.ReplicasManagedByExternalAutoscaler(old) != annotations.ReplicasManagedByExternalAutoscaler(now)
}

// infrastructureOf maps a MachinePool to the TerraformMachinePool its
// spec.template.spec.infrastructureRef names.
func infrastructureOf(_ context.Context, obj client.Object) []reconcile.Request {
	mp, ok := obj.(*clusterv1.MachinePool)
	if !ok {
		return nil
	}
	return capi.Infrastructure(mp.Namespace, mp.Spec.Template.Spec.InfrastructureRef, "TerraformMachinePool")
}
