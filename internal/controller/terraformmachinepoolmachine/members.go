// Package terraformmachinepoolmachine keeps a TerraformMachinePool's
// members as TerraformMachinePoolMachines, so that Cluster API's
// MachinePool controller makes a Machine for each (kubectl get machines,
// a health check's view of every node). The objects run no Jobs and hold
// no state: this package makes one per provider ID of the pool's
// spec.providerIDList, which the manager alone writes and only from the
// pool's own state, and deletes the Machine (or, without one, the object)
// of an ID that left it. Each object carries FinalizerMember: once its
// Machine is deleted (a health check's remediation), it stays while the
// pool's inputs ask for the member's replacement, through the pool's plan
// and approval, and goes once an apply replaced it; a pool whose module
// cannot replace a member lets it go at once, and the object is made
// again while its ID is in the pool's state.
package terraformmachinepoolmachine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/labels/format"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/capi"
	"github.com/captf/captf/internal/controller/engine"
)

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=terraformmachinepoolmachines,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=terraformmachinepoolmachines/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=get;list;watch;delete

// Reconciler keeps the member objects of each TerraformMachinePool.
type Reconciler struct {
	Client client.Client
	// WatchFilter, when set, limits the pools reconciled to those whose
	// cluster.x-k8s.io/watch-filter label has this value.
	WatchFilter string
}

// SetupWithManager reconciles pools as they or their member objects change.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).Named("terraformmachinepoolmachine").
		For(&infrav1.TerraformMachinePool{}, builder.WithPredicates(predicate.NewPredicateFuncs(r.watched))).
		Watches(&infrav1.TerraformMachinePoolMachine{},
			handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &infrav1.TerraformMachinePool{})).
		WithOptions(opts).
		Complete(r)
}

// watched: the pools of this manager (WatchFilter).
func (r *Reconciler) watched(obj client.Object) bool {
	return r.WatchFilter == "" || obj.GetLabels()[clusterv1.WatchLabel] == r.WatchFilter
}

// Reconcile makes the pool's member objects match its published members.
// A write that lost to another's (a conflict: Cluster API's Machine
// controller writes the objects too) is a quiet retry, not an error.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, err := r.reconcile(ctx, req)
	if apierrors.IsConflict(err) {
		ctrl.LoggerFrom(ctx).V(1).Info("Conflict, retrying", "error", err.Error())
		return reconcile.Result{RequeueAfter: engine.ConflictRetry}, nil
	}
	return res, err
}

func (r *Reconciler) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pool := &infrav1.TerraformMachinePool{}
	err := r.Client.Get(ctx, req.NamespacedName, pool)
	switch {
	case apierrors.IsNotFound(err):
		// Gone: the run engine's finalizer held it while it was being
		// deleted, when release let its members go; any it left behind
		// go now.
		return reconcile.Result{}, r.orphans(ctx, req.NamespacedName)
	case err != nil:
		return reconcile.Result{}, err
	case !r.watched(pool):
		return reconcile.Result{}, nil
	}
	members, err := r.members(ctx, pool)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !pool.DeletionTimestamp.IsZero() {
		// The pool's destroy removes every member; Cluster API deletes
		// the MachinePool's Machines with it.
		return reconcile.Result{}, r.release(ctx, members)
	}
	// Paused as the pool is (clusterctl move pauses it while it copies
	// the objects): nothing is made or deleted.
	if why, err := engine.WhyPaused(ctx, r.Client, pool); err != nil || why != "" {
		return reconcile.Result{}, err
	}
	// Provisioned: its spec.providerIDList holds its own state's members
	// (the manager reports a pool provisioned only then, and alone writes
	// the list).
	if !engine.IsProvisioned(pool) {
		return reconcile.Result{}, nil
	}
	mp, wait, err := capi.OwnerMachinePool(ctx, r.Client, pool)
	if err != nil || wait != nil {
		return reconcile.Result{}, err
	}
	if pool.Status.InfrastructureMachineKind != infrav1.InfrastructureMachineKindPool {
		patch := client.MergeFrom(pool.DeepCopy())
		pool.Status.InfrastructureMachineKind = infrav1.InfrastructureMachineKindPool
		if err := r.Client.Status().Patch(ctx, pool, patch); err != nil {
			return reconcile.Result{}, fmt.Errorf("infrastructureMachineKind: %w", err)
		}
	}
	want := map[string]bool{}
	for _, id := range pool.Spec.ProviderIDList {
		want[id] = true
	}
	// An object being deleted keeps its name until it is gone: the
	// member's object is made again only then (the delete's event brings
	// the pool back).
	have := map[string]bool{}
	for i := range members {
		m := &members[i]
		have[m.Spec.ProviderID] = true
		switch {
		case !m.DeletionTimestamp.IsZero():
			if replaced(pool, m, want) {
				if err := r.letGo(ctx, m); err != nil {
					return reconcile.Result{}, err
				}
			}
		case want[m.Spec.ProviderID]:
			if err := r.report(ctx, m); err != nil {
				return reconcile.Result{}, err
			}
		default:
			if err := r.gone(ctx, m); err != nil {
				return reconcile.Result{}, err
			}
		}
	}
	var result reconcile.Result
	for _, id := range pool.Spec.ProviderIDList {
		if have[id] {
			continue
		}
		// A Machine of that name still being deleted (its object was
		// deleted with it) would find a new object of the name and wait
		// for it to go, for ever: the object is made once it is gone.
		if deleting, err := r.machineDeleting(ctx, pool.Namespace, Name(pool.Name, id)); err != nil || deleting {
			result.RequeueAfter = machineGoneCheck
			if err != nil {
				return reconcile.Result{}, err
			}
			continue
		}
		if err := r.create(ctx, pool, mp, id); err != nil {
			return reconcile.Result{}, err
		}
	}
	return result, nil
}

// replaced reports whether the member object m, being deleted (its
// Machine was), may go: its member left the pool's state, or the pool's
// last apply replaced it, or the pool's module cannot replace a member
// (MembersReplaceable is not True: the object is then made again, as is
// its Machine). Until then the pool's inputs ask for its replacement
// (the pool kind's Replace), and Cluster API waits for the object.
func replaced(pool *infrav1.TerraformMachinePool, m *infrav1.TerraformMachinePoolMachine, want map[string]bool) bool {
	return !want[m.Spec.ProviderID] || slices.Contains(pool.Status.ReplacedMembers, string(m.UID)) ||
		!meta.IsStatusConditionTrue(pool.Status.Conditions, infrav1.ConditionMembersReplaceable)
}

// letGo removes FinalizerMember from m.
func (r *Reconciler) letGo(ctx context.Context, m *infrav1.TerraformMachinePoolMachine) error {
	if !controllerutil.ContainsFinalizer(m, infrav1.FinalizerMember) {
		return nil
	}
	patch := client.MergeFromWithOptions(m.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(m, infrav1.FinalizerMember)
	if err := r.Client.Patch(ctx, m, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("member %s: %w", m.Name, err)
	}
	return nil
}

// orphans lets go and deletes the member objects of a pool that is gone
// (named pool): those whose owner references name a pool of that name.
func (r *Reconciler) orphans(ctx context.Context, pool types.NamespacedName) error {
	list := &infrav1.TerraformMachinePoolMachineList{}
	if err := r.Client.List(ctx, list, client.InNamespace(pool.Namespace)); err != nil {
		return fmt.Errorf("members: %w", err)
	}
	var left []infrav1.TerraformMachinePoolMachine
	for _, m := range list.Items {
		for _, o := range m.OwnerReferences {
			if o.Kind == "TerraformMachinePool" && o.Name == pool.Name {
				left = append(left, m)
				break
			}
		}
	}
	return r.release(ctx, left)
}

// machineGoneCheck is how often a member whose Machine is being deleted is
// looked at again: Machines are not watched here.
const machineGoneCheck = 5 * time.Second

// machineDeleting reports whether the Machine name is being deleted.
func (r *Reconciler) machineDeleting(ctx context.Context, namespace, name string) (bool, error) {
	machine := &clusterv1.Machine{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, machine); {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("machine %s: %w", name, err)
	}
	return !machine.DeletionTimestamp.IsZero(), nil
}

// members are the member objects the manager made for pool (Members).
func (r *Reconciler) members(ctx context.Context, pool *infrav1.TerraformMachinePool) ([]infrav1.TerraformMachinePoolMachine, error) {
	return Members(ctx, r.Client, pool)
}

// Members are the member objects the manager made for pool, read through
// c with opts: in its namespace and owned by it, by UID. An object made by
// anyone else names no member of it.
func Members(ctx context.Context, c client.Reader, pool *infrav1.TerraformMachinePool, opts ...client.ListOption) ([]infrav1.TerraformMachinePoolMachine, error) {
	list := &infrav1.TerraformMachinePoolMachineList{}
	if err := c.List(ctx, list, append(opts, client.InNamespace(pool.Namespace))...); err != nil {
		return nil, fmt.Errorf("members: %w", err)
	}
	return slices.DeleteFunc(list.Items, func(m infrav1.TerraformMachinePoolMachine) bool {
		return !OwnedBy(&m, pool.UID)
	}), nil
}

// OwnedBy reports whether obj has an owner reference to the pool of uid:
// a member object the manager made for it.
func OwnedBy(obj metav1.Object, uid types.UID) bool {
	for _, o := range obj.GetOwnerReferences() {
		if o.Kind == "TerraformMachinePool" && o.UID == uid {
			return true
		}
	}
	return false
}

// Name is the name of the member object of the pool named pool for the
// provider ID id: the pool's name, cut to fit, and the first 10 hex digits
// of the ID's SHA-256 (a name reveals no ID, and stays the same for it).
func Name(pool, id string) string {
	sum := sha256.Sum256([]byte(id))
	const maxPrefix = 253 - 1 - 10
	if len(pool) > maxPrefix {
		pool = pool[:maxPrefix]
	}
	return pool + "-" + hex.EncodeToString(sum[:])[:10]
}

// create makes the member object of id: labelled as Cluster API's
// MachinePool controller lists them, owned by the pool (not as its
// controller: the Machine Cluster API makes for it becomes that, and its
// Machine controller refuses an object with another); then reports it
// provisioned.
func (r *Reconciler) create(ctx context.Context, pool *infrav1.TerraformMachinePool, mp *clusterv1.MachinePool, id string) error {
	m := &infrav1.TerraformMachinePoolMachine{
		ObjectMeta: metav1.ObjectMeta{
			Name:      Name(pool.Name, id),
			Namespace: pool.Namespace,
			Labels: map[string]string{
				clusterv1.MachinePoolNameLabel: format.MustFormatValue(mp.Name),
				clusterv1.ClusterNameLabel:     mp.Spec.ClusterName,
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: infrav1.GroupVersion.String(), Kind: "TerraformMachinePool",
				Name: pool.Name, UID: pool.UID, BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: infrav1.TerraformMachinePoolMachineSpec{ProviderID: id},
	}
	controllerutil.AddFinalizer(m, infrav1.FinalizerMember)
	if f := pool.Labels[clusterv1.WatchLabel]; f != "" {
		m.Labels[clusterv1.WatchLabel] = f
	}
	// A create that finds the name taken (this member not yet in the
	// cache) fails, and the next reconcile sees it.
	if err := r.Client.Create(ctx, m); err != nil {
		return fmt.Errorf("member %s: %w", m.Name, err)
	}
	return r.report(ctx, m)
}

// report sets the member's status: provisioned, as long as its ID is in
// the pool's state.
func (r *Reconciler) report(ctx context.Context, m *infrav1.TerraformMachinePoolMachine) error {
	if !controllerutil.ContainsFinalizer(m, infrav1.FinalizerMember) {
		// Made before members were replaced on a Machine's deletion.
		patch := client.MergeFromWithOptions(m.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(m, infrav1.FinalizerMember)
		if err := r.Client.Patch(ctx, m, patch); err != nil {
			return fmt.Errorf("member %s: %w", m.Name, err)
		}
	}
	if m.Status.Ready && m.Status.Initialization != nil && ptr.Deref(m.Status.Initialization.Provisioned, false) {
		return nil
	}
	patch := client.MergeFrom(m.DeepCopy())
	m.Status.Ready = true
	m.Status.Initialization = &infrav1.Initialization{Provisioned: ptr.To(true)}
	meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: infrav1.ConditionReady, Status: metav1.ConditionTrue,
		Reason: "Provisioned", Message: "The member is in its pool's state.", ObservedGeneration: m.Generation})
	if err := r.Client.Status().Patch(ctx, m, patch); err != nil {
		return fmt.Errorf("member %s status: %w", m.Name, err)
	}
	return nil
}

// gone handles a member whose ID left the pool's state (a scale-down, a
// replacement): its Machine is deleted, so that Cluster API drains its
// Node and then deletes the object; without a Machine, the object itself.
func (r *Reconciler) gone(ctx context.Context, m *infrav1.TerraformMachinePoolMachine) error {
	if ref := metav1.GetControllerOf(m); ref != nil && ref.Kind == "Machine" && capi.GroupOf(ref.APIVersion) == clusterv1.GroupVersion.Group {
		machine := &clusterv1.Machine{}
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: ref.Name}, machine)
		switch {
		case err == nil && machine.UID == ref.UID:
			if !machine.DeletionTimestamp.IsZero() {
				return nil
			}
			if err := r.Client.Delete(ctx, machine, client.Preconditions{UID: &machine.UID}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("machine %s of a member gone: %w", machine.Name, err)
			}
			return nil
		case err != nil && !apierrors.IsNotFound(err):
			return fmt.Errorf("machine %s: %w", ref.Name, err)
		}
	}
	if err := r.Client.Delete(ctx, m, client.Preconditions{UID: &m.UID}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("member %s gone: %w", m.Name, err)
	}
	return nil
}

// release deletes the member objects of a pool being deleted: its destroy
// removes every member. (Garbage collection would not: each object is
// owned by its Machine too, which its MachinePool owns.)
func (r *Reconciler) release(ctx context.Context, members []infrav1.TerraformMachinePoolMachine) error {
	for i := range members {
		m := &members[i]
		if err := r.letGo(ctx, m); err != nil {
			return err
		}
		if !m.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.Client.Delete(ctx, m, client.Preconditions{UID: &m.UID}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("member %s: %w", m.Name, err)
		}
	}
	return nil
}
