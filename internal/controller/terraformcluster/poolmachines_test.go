package terraformcluster

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/terraformmachinepoolmachine"
)

// TestPoolMembersAsMachines: a provisioned pool publishes each member as a
// TerraformMachinePoolMachine (status.infrastructureMachineKind), and
// Cluster API's own MachinePool controller makes a Machine for each, named
// as it and its controller; a member that leaves the pool's state (a
// scale-down) has its Machine deleted, and its object goes; a member
// whose Machine is deleted stays, and gets a new Machine; while the pool
// is paused, no member object is made.
func TestPoolMembersAsMachines(t *testing.T) {
	h := startMachines(t)
	ctx := context.Background()
	mp, p := h.startPool("fleet", 2, func(s *infrav1.TerraformMachinePoolSpec) {
		// The scale-down below deletes a member: no guard, so it applies
		// as it would once approved.
		s.AllowDestructivePlans = true
	})
	h.waitPool(p, "provisioned with 2 members, each as a member object", func(p *infrav1.TerraformMachinePool) bool {
		return p.Status.Ready && len(p.Spec.ProviderIDList) == 2 && p.Status.InfrastructureMachineKind == infrav1.InfrastructureMachineKindPool
	})
	ids := slices.Clone(p.Spec.ProviderIDList)

	// members lists the member objects and Machines of the pool, by name.
	members := func() (map[string]infrav1.TerraformMachinePoolMachine, map[string]clusterv1.Machine) {
		objs, machines := map[string]infrav1.TerraformMachinePoolMachine{}, map[string]clusterv1.Machine{}
		var ol infrav1.TerraformMachinePoolMachineList
		if err := h.c.List(ctx, &ol, client.InNamespace("default"), client.MatchingLabels{clusterv1.MachinePoolNameLabel: mp.Name}); err != nil {
			t.Fatal(err)
		}
		for _, o := range ol.Items {
			objs[o.Name] = o
		}
		var ml clusterv1.MachineList
		if err := h.c.List(ctx, &ml, client.InNamespace("default"), client.MatchingLabels{clusterv1.MachinePoolNameLabel: mp.Name}); err != nil {
			t.Fatal(err)
		}
		for _, m := range ml.Items {
			machines[m.Name] = m
		}
		return objs, machines
	}
	// bound: every ID of want has its member object, provisioned, and a
	// Machine of the MachinePool controlling it; nothing else is there.
	bound := func(want []string) bool {
		objs, machines := members()
		if len(objs) != len(want) || len(machines) != len(want) {
			return false
		}
		for _, id := range want {
			o, ok := objs[terraformmachinepoolmachine.Name(p.Name, id)]
			if !ok || o.Spec.ProviderID != id || o.Status.Initialization == nil || !ptr.Deref(o.Status.Initialization.Provisioned, false) {
				return false
			}
			m, ok := machines[o.Name]
			ref := metav1.GetControllerOf(&o)
			if !ok || ref == nil || ref.Kind != "Machine" || ref.UID != m.UID || m.Spec.InfrastructureRef.Name != o.Name ||
				metav1.GetControllerOf(&m) == nil || metav1.GetControllerOf(&m).UID != mp.UID {
				return false
			}
		}
		return true
	}
	h.waitPool(p, "a member object and a Machine of the MachinePool for each member", func(*infrav1.TerraformMachinePool) bool { return bound(ids) })
	objs, _ := members()
	for name, o := range objs {
		var owned bool
		for _, r := range o.OwnerReferences {
			owned = owned || (r.Kind == "TerraformMachinePool" && r.UID == p.UID && !ptr.Deref(r.Controller, false))
		}
		if !owned {
			t.Errorf("member %s: owners %+v, want the pool (not as controller)", name, o.OwnerReferences)
		}
	}

	// A scale-down: the member that leaves the state loses its Machine and
	// its object; the other keeps both.
	scaled := mp.DeepCopy()
	scaled.Spec.Replicas = ptr.To(int32(1))
	if err := h.c.Patch(ctx, scaled, client.MergeFrom(mp)); err != nil {
		t.Fatal(err)
	}
	h.waitPool(p, "one member left", func(p *infrav1.TerraformMachinePool) bool { return len(p.Spec.ProviderIDList) == 1 })
	kept := p.Spec.ProviderIDList
	h.waitPool(p, "the member gone with its Machine and object", func(*infrav1.TerraformMachinePool) bool { return bound(kept) })

	// Deleting a member's Machine does not remove the member: Cluster
	// API deletes the object, the manager makes it again (its ID is still
	// in the state), and Cluster API a new Machine for it; no Job runs.
	_, machines := members()
	var old clusterv1.Machine
	for _, m := range machines {
		old = m
	}
	jobs := len(h.jobs(p))
	if err := h.c.Delete(ctx, &old); err != nil {
		t.Fatal(err)
	}
	var seen string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last seen: %s", seen)
		}
	})
	h.waitPool(p, "a new Machine for the member whose Machine was deleted", func(*infrav1.TerraformMachinePool) bool {
		objs, machines := members()
		seen = ""
		for n, o := range objs {
			seen += fmt.Sprintf("object %s deleting=%v owners=%v; ", n, o.DeletionTimestamp != nil, o.OwnerReferences)
		}
		for n, m := range machines {
			seen += fmt.Sprintf("machine %s uid=%s deleting=%v finalizers=%v phase=%s; ", n, m.UID, m.DeletionTimestamp != nil, m.Finalizers, m.Status.Phase)
		}
		return bound(kept) && machines[old.Name].UID != old.UID
	})
	if n := len(h.jobs(p)); n != jobs {
		t.Errorf("%d Jobs of the pool after its member's Machine was deleted, want %d: nothing runs", n, jobs)
	}
	if err := h.c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Spec.ProviderIDList, kept) {
		t.Errorf("members %v after a Machine's deletion, want %v", p.Spec.ProviderIDList, kept)
	}

	// Paused (as clusterctl move pauses it), the pool's member objects are
	// neither made nor deleted: a Machine deleted meanwhile takes its
	// object with it, which comes back once the pause is lifted.
	pause := func(paused bool) {
		patch := []byte(`{"metadata":{"annotations":{"cluster.x-k8s.io/paused":""}}}`)
		if !paused {
			patch = []byte(`{"metadata":{"annotations":{"cluster.x-k8s.io/paused":null}}}`)
		}
		if err := h.c.Patch(ctx, p, client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatal(err)
		}
	}
	pause(true)
	_, machines = members()
	for _, m := range machines {
		old = m
	}
	if err := h.c.Delete(ctx, &old); err != nil {
		t.Fatal(err)
	}
	h.waitPool(p, "the Machine and its object gone while paused", func(*infrav1.TerraformMachinePool) bool {
		objs, machines := members()
		return len(objs) == 0 && len(machines) == 0
	})
	time.Sleep(10 * time.Second)
	if objs, _ := members(); len(objs) != 0 {
		t.Errorf("%d member objects made while the pool is paused", len(objs))
	}
	pause(false)
	h.waitPool(p, "the member object and a Machine again once the pause is lifted", func(*infrav1.TerraformMachinePool) bool { return bound(kept) })
}
