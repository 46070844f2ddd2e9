package terraformcluster

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
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
// whose Machine is deleted stays, and gets a new Machine, when the module
// has no member_addresses output (MembersReplaceable False); while the
// pool is paused, no member object is made or let go.
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

	members := func() (map[string]infrav1.TerraformMachinePoolMachine, map[string]clusterv1.Machine) {
		return h.poolMembers(mp)
	}
	bound := func(want []string) bool { return h.poolBound(mp, p, want) }
	h.waitPool(p, "a member object and a Machine of the MachinePool for each member", func(*infrav1.TerraformMachinePool) bool { return bound(ids) })
	if c := meta.FindStatusCondition(p.Status.Conditions, infrav1.ConditionMembersReplaceable); c == nil || c.Status != metav1.ConditionFalse || c.Reason != infrav1.ReasonMemberAddressesMissing {
		t.Errorf("MembersReplaceable %+v, want False, %s: the module's member_addresses output is null", c, infrav1.ReasonMemberAddressesMissing)
	}
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
	h.waitPool(p, "the member object deleted with its Machine while paused", func(*infrav1.TerraformMachinePool) bool {
		objs, _ := members()
		o, ok := objs[old.Name]
		return ok && o.DeletionTimestamp != nil
	})
	time.Sleep(10 * time.Second)
	if objs, _ := members(); len(objs) != 1 || objs[old.Name].DeletionTimestamp == nil {
		t.Errorf("member objects %v while the pool is paused, want the one being deleted, still held", slices.Collect(maps.Keys(objs)))
	}
	pause(false)
	h.waitPool(p, "the member object and a new Machine once the pause is lifted", func(*infrav1.TerraformMachinePool) bool {
		_, machines := members()
		return bound(kept) && machines[old.Name].UID != old.UID
	})
}

// poolMembers lists the member objects and Machines of the MachinePool
// mp, by name.
func (h *driftHarness) poolMembers(mp *clusterv1.MachinePool) (map[string]infrav1.TerraformMachinePoolMachine, map[string]clusterv1.Machine) {
	h.t.Helper()
	ctx := context.Background()
	objs, machines := map[string]infrav1.TerraformMachinePoolMachine{}, map[string]clusterv1.Machine{}
	var ol infrav1.TerraformMachinePoolMachineList
	if err := h.c.List(ctx, &ol, client.InNamespace(mp.Namespace), client.MatchingLabels{clusterv1.MachinePoolNameLabel: mp.Name}); err != nil {
		h.t.Fatal(err)
	}
	for _, o := range ol.Items {
		objs[o.Name] = o
	}
	var ml clusterv1.MachineList
	if err := h.c.List(ctx, &ml, client.InNamespace(mp.Namespace), client.MatchingLabels{clusterv1.MachinePoolNameLabel: mp.Name}); err != nil {
		h.t.Fatal(err)
	}
	for _, m := range ml.Items {
		machines[m.Name] = m
	}
	return objs, machines
}

// poolBound reports whether every ID of want has its member object of the
// pool p, provisioned, and a Machine of mp controlling it; and nothing
// else is there.
func (h *driftHarness) poolBound(mp *clusterv1.MachinePool, p *infrav1.TerraformMachinePool, want []string) bool {
	objs, machines := h.poolMembers(mp)
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

// TestPoolMemberReplaced: with a module whose member_addresses output
// names each member's resource (MembersReplaceable), deleting a member's
// Machine under applyPolicy Manual makes a TerraformPlan that replaces
// that member's resource and nothing else; the member's object and its
// Machine wait meanwhile. Approved, the plan applies: the member's
// resource is made anew, the old Machine's deletion finishes, and a new
// Machine names the member; the pool settles with no other plan to
// approve.
func TestPoolMemberReplaced(t *testing.T) {
	h := startMachines(t)
	ctx := context.Background()
	mp, p, ids := h.replaceablePool("mend", func(*infrav1.TerraformMachinePoolSpec) {})
	manual := p.DeepCopy()
	manual.Spec.ApplyPolicy = infrav1.ApplyManual
	if err := h.c.Patch(ctx, manual, client.MergeFrom(p)); err != nil {
		t.Fatal(err)
	}

	// The member of ids[0] is the file mend-pool-0.txt, made by
	// captftest_file.member[0].
	files := h.fileTimes("mend", "mend-pool-0.txt", "mend-pool-1.txt")
	name := terraformmachinepoolmachine.Name(p.Name, ids[0])
	_, machines := h.poolMembers(mp)
	old := machines[name]
	if err := h.c.Delete(ctx, &old); err != nil {
		t.Fatal(err)
	}
	var plan *infrav1.TerraformPlan
	h.waitPool(p, "a plan that replaces the member", func(p *infrav1.TerraformMachinePool) bool {
		for _, pl := range h.plans(p) {
			plan = pl
		}
		return plan != nil
	})
	// The module's data source of the members is read again after it
	// (its depends_on), and so the provider_ids output is known only then.
	got := plan.Spec.Summary
	others := slices.DeleteFunc(slices.Clone(got.Resources), func(r string) bool { return strings.HasSuffix(r, " (read)") })
	if got.Create != 0 || got.Update != 0 || got.Delete != 0 || got.Replace != 1 || !slices.Equal(others, []string{"module.main.captftest_file.member[0] (replace)"}) {
		t.Errorf("plan %s summary %+v, want the deleted Machine's member replaced, nothing else", plan.Name, got)
	}
	objs, machines := h.poolMembers(mp)
	if o, ok := objs[name]; !ok || o.DeletionTimestamp == nil {
		t.Errorf("member object %s gone or not being deleted while its replacement waits for approval", name)
	}
	if m, ok := machines[name]; !ok || m.UID != old.UID {
		t.Errorf("the deleted Machine %s finished its deletion before its member was replaced", name)
	}
	for n, at := range files {
		if info, err := os.Stat(filepath.Join(h.files, "mend", n)); err != nil || !info.ModTime().Equal(at) {
			t.Errorf("%s changed before the plan was approved", n)
		}
	}

	h.approvePlan(plan, "alice")
	h.waitPool(p, "the member replaced: a new Machine for it, the pool settled", func(p *infrav1.TerraformMachinePool) bool {
		_, machines := h.poolMembers(mp)
		return h.poolBound(mp, p, ids) && machines[name].UID != old.UID &&
			p.Status.ActiveJob == nil && len(p.Status.ReplacedMembers) == 0 && p.Status.LastRun != nil && p.Status.LastRun.Succeeded
	})
	if info, err := os.Stat(filepath.Join(h.files, "mend", "mend-pool-0.txt")); err != nil || !info.ModTime().After(files["mend-pool-0.txt"]) {
		t.Errorf("mend-pool-0.txt not made anew by the approved plan (%v)", err)
	}
	if info, err := os.Stat(filepath.Join(h.files, "mend", "mend-pool-1.txt")); err != nil || !info.ModTime().Equal(files["mend-pool-1.txt"]) {
		t.Errorf("mend-pool-1.txt changed: only the deleted Machine's member is replaced (%v)", err)
	}
	if names := h.planNames(p); len(names) != 1 {
		t.Errorf("TerraformPlans %v, want only the approved one: letting the replaced member go needs no approval", names)
	}
}

// TestPoolMemberReplacedAutomatic: under applyPolicy Automatic with
// allowDestructivePlans, deleting a member's Machine replaces the member
// with no TerraformPlan: the member's resource is made anew, the other's
// is not, and a new Machine names the member.
func TestPoolMemberReplacedAutomatic(t *testing.T) {
	h := startMachines(t)
	ctx := context.Background()
	mp, p, ids := h.replaceablePool("heal", func(s *infrav1.TerraformMachinePoolSpec) { s.AllowDestructivePlans = true })
	files := h.fileTimes("heal", "heal-pool-0.txt", "heal-pool-1.txt")
	name := terraformmachinepoolmachine.Name(p.Name, ids[1])
	_, machines := h.poolMembers(mp)
	old := machines[name]
	if err := h.c.Delete(ctx, &old); err != nil {
		t.Fatal(err)
	}
	h.waitPool(p, "the member replaced: a new Machine for it, the pool settled", func(p *infrav1.TerraformMachinePool) bool {
		_, machines := h.poolMembers(mp)
		info, err := os.Stat(filepath.Join(h.files, "heal", "heal-pool-1.txt"))
		return h.poolBound(mp, p, ids) && machines[name].UID != old.UID && err == nil && info.ModTime().After(files["heal-pool-1.txt"]) &&
			p.Status.ActiveJob == nil && len(p.Status.ReplacedMembers) == 0 && p.Status.LastRun != nil && p.Status.LastRun.Succeeded
	})
	if info, err := os.Stat(filepath.Join(h.files, "heal", "heal-pool-0.txt")); err != nil || !info.ModTime().Equal(files["heal-pool-0.txt"]) {
		t.Errorf("heal-pool-0.txt changed: only the deleted Machine's member is replaced (%v)", err)
	}
	if names := h.planNames(p); len(names) != 0 {
		t.Errorf("TerraformPlans %v under Automatic with allowDestructivePlans, want none", names)
	}
}

// replaceablePool starts a pool of two members in cluster whose module
// names each member's resource (member_addresses), spec changing its
// spec first, and waits until it is provisioned, MembersReplaceable, and
// each member has its object and Machine. It returns the pool's members.
func (h *driftHarness) replaceablePool(cluster string, spec func(*infrav1.TerraformMachinePoolSpec)) (*clusterv1.MachinePool, *infrav1.TerraformMachinePool, []string) {
	h.t.Helper()
	mp, p := h.startPool(cluster, 2, func(s *infrav1.TerraformMachinePoolSpec) {
		spec(s)
		s.Variables = append(s.Variables, infrav1.Variable{Name: "member_addresses", Value: &apiextensionsv1.JSON{Raw: []byte("true")}})
	})
	h.waitPool(p, "provisioned with 2 members, replaceable", func(p *infrav1.TerraformMachinePool) bool {
		return p.Status.Ready && len(p.Spec.ProviderIDList) == 2 && meta.IsStatusConditionTrue(p.Status.Conditions, infrav1.ConditionMembersReplaceable)
	})
	ids := slices.Clone(p.Spec.ProviderIDList)
	h.waitPool(p, "a member object and a Machine for each member", func(*infrav1.TerraformMachinePool) bool { return h.poolBound(mp, p, ids) })
	return mp, p, ids
}

// fileTimes are the modification times of the files names that the pool
// module made in dir, by name.
func (h *driftHarness) fileTimes(dir string, names ...string) map[string]time.Time {
	h.t.Helper()
	times := map[string]time.Time{}
	for _, n := range names {
		info, err := os.Stat(filepath.Join(h.files, dir, n))
		if err != nil {
			h.t.Fatal(err)
		}
		times[n] = info.ModTime()
	}
	return times
}
