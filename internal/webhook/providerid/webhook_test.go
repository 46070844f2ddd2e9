package providerid

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/testenv"
)

const manager = "system:serviceaccount:captf-system:captf-manager"

// TestByTheManagerOnly: through the real API server, a user may create a
// machine or a pool and change other fields, but not set a machine's
// providerID, nor a pool's providerID or providerIDList; the manager may.
func TestByTheManagerOnly(t *testing.T) {
	env := testenv.StartWithWebhooks(t, "../../..")
	env.ServeWebhooks(t, func(mgr ctrl.Manager) error { return SetupWithManager(mgr, manager) })
	ctx := context.Background()
	alice := env.ClientAs(t, "alice", "system:masters")
	mgr := env.ClientAs(t, manager, "system:masters")
	runner := infrav1.RunnerSpec{Image: "registry.example.com/m:1"}

	cases := []struct {
		name    string
		obj     client.Object
		patch   string // sets a published field to %s
		refused string
		get     func(client.Object) string
	}{{
		name: "machine providerID", obj: &infrav1.TerraformMachine{ObjectMeta: metav1.ObjectMeta{Name: "node-0", Namespace: "default"}, Spec: infrav1.TerraformMachineSpec{RunnerSpec: runner}},
		patch: `{"spec":{"providerID":"%s"}}`, refused: "spec.providerID: Forbidden: only the manager sets it",
		get: func(o client.Object) string { return o.(*infrav1.TerraformMachine).Spec.ProviderID },
	}, {
		name: "pool providerID", obj: &infrav1.TerraformMachinePool{ObjectMeta: metav1.ObjectMeta{Name: "pool-0", Namespace: "default"}, Spec: infrav1.TerraformMachinePoolSpec{RunnerSpec: runner}},
		patch: `{"spec":{"providerID":"%s"}}`, refused: "spec.providerID: Forbidden: only the manager sets it",
		get: func(o client.Object) string { return o.(*infrav1.TerraformMachinePool).Spec.ProviderID },
	}, {
		name: "pool providerIDList", obj: &infrav1.TerraformMachinePool{ObjectMeta: metav1.ObjectMeta{Name: "pool-1", Namespace: "default"}, Spec: infrav1.TerraformMachinePoolSpec{RunnerSpec: runner}},
		patch: `{"spec":{"providerIDList":["%s"]}}`, refused: "spec.providerIDList: Forbidden: only the manager sets it",
		get: func(o client.Object) string {
			return strings.Join(o.(*infrav1.TerraformMachinePool).Spec.ProviderIDList, ",")
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := alice.Create(ctx, tc.obj); err != nil {
				t.Fatalf("alice creates it: %v", err)
			}
			set := func(c client.Client, id string) error {
				return c.Patch(ctx, tc.obj.DeepCopyObject().(client.Object), client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, tc.patch, id)))
			}
			err := set(alice, "aws:///us-east-1a/i-mallory")
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.refused) {
				t.Errorf("alice sets it: %v, want %q", err, tc.refused)
			}
			if err := alice.Patch(ctx, tc.obj.DeepCopyObject().(client.Object), client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"team":"a"}}}`))); err != nil {
				t.Errorf("alice annotates it: %v", err)
			}
			if err := set(mgr, "aws:///us-east-1a/i-0123"); err != nil {
				t.Fatalf("the manager sets it: %v", err)
			}
			if err := set(alice, "aws:///us-east-1a/i-mallory"); err == nil {
				t.Error("alice changed what the manager set")
			}
			got := tc.obj.DeepCopyObject().(client.Object)
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(tc.obj), got); err != nil {
				t.Fatal(err)
			}
			if v := tc.get(got); v != "aws:///us-east-1a/i-0123" {
				t.Errorf("stored %q", v)
			}
		})
	}

}

// TestCreateCarriesOnlyWhatTheOwnerHolds: through the real API server, a
// user may not create a machine, a pool or a pool's member object that
// already names provider IDs, unless its controlling owner Machine or MachinePool is there (by
// UID) and holds the same IDs, as when clusterctl move creates it on its
// new management cluster (TestMoveMachines moves one with clusterctl's
// mover); the manager may.
func TestCreateCarriesOnlyWhatTheOwnerHolds(t *testing.T) {
	env := testenv.StartWithClusterAPIAndWebhooks(t, "../../..")
	env.ServeWebhooks(t, func(mgr ctrl.Manager) error { return SetupWithManager(mgr, manager) })
	ctx := context.Background()
	alice := env.ClientAs(t, "alice", "system:masters")
	mgr := env.ClientAs(t, manager, "system:masters")
	runner := infrav1.RunnerSpec{Image: "registry.example.com/m:1"}
	const victim = "aws:///us-east-1a/i-victim"

	// Owners as Cluster API's objects, each holding the victim's ID.
	owner := func(kind string, spec map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": kind,
			"metadata": map[string]any{"name": strings.ToLower(kind) + "-0", "namespace": "default"},
			"spec":     spec,
		}}
		if err := env.Client.Create(ctx, u); err != nil {
			t.Fatalf("create the %s: %v", kind, err)
		}
		return u
	}
	holding := owner("Machine", map[string]any{"clusterName": "c", "providerID": victim, "bootstrap": map[string]any{"dataSecretName": "b"},
		"infrastructureRef": map[string]any{"apiGroup": infrav1.GroupVersion.Group, "kind": "TerraformMachine", "name": "node-0"}})
	pool := owner("MachinePool", map[string]any{"clusterName": "c", "providerIDList": []any{victim}, "template": map[string]any{"spec": map[string]any{
		"clusterName": "c", "bootstrap": map[string]any{"dataSecretName": "b"},
		"infrastructureRef": map[string]any{"apiGroup": infrav1.GroupVersion.Group, "kind": "TerraformMachinePool", "name": "pool-0"}}}})
	ownedBy := func(u *unstructured.Unstructured, uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: u.GetKind(), Name: u.GetName(), UID: uid, Controller: ptr.To(true)}}
	}
	machine := func(name, id string, owners []metav1.OwnerReference) client.Object {
		return &infrav1.TerraformMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", OwnerReferences: owners},
			Spec: infrav1.TerraformMachineSpec{RunnerSpec: runner, ProviderID: id}}
	}
	member := func(name, id string, owners []metav1.OwnerReference) client.Object {
		return &infrav1.TerraformMachinePoolMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", OwnerReferences: owners},
			Spec: infrav1.TerraformMachinePoolMachineSpec{ProviderID: id}}
	}
	members := func(name, id string, list []string, owners []metav1.OwnerReference) client.Object {
		return &infrav1.TerraformMachinePool{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", OwnerReferences: owners},
			Spec: infrav1.TerraformMachinePoolSpec{RunnerSpec: runner, ProviderID: id, ProviderIDList: list}}
	}

	refused := []struct {
		name, want string
		obj        client.Object
	}{
		{"a machine with a provider ID and no owner", "spec.providerID: Forbidden", machine("m-1", victim, nil)},
		{"a machine whose owner Machine holds another ID", "spec.providerID: Forbidden", machine("m-2", "aws:///us-east-1a/i-other", ownedBy(holding, holding.GetUID()))},
		{"a machine whose owner reference names another UID", "spec.providerID: Forbidden", machine("m-3", victim, ownedBy(holding, "00000000-0000-0000-0000-000000000000"))},
		{"a machine whose owner is not there", "spec.providerID: Forbidden", machine("m-4", victim, []metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Machine", Name: "gone", UID: "1", Controller: ptr.To(true)}})},
		{"a pool with members and no owner", "spec.providerIDList: Forbidden", members("p-1", "", []string{victim}, nil)},
		{"a pool with its own ID and no owner", "spec.providerID: Forbidden", members("p-2", "asg-1", nil, nil)},
		{"a pool with a member its MachinePool does not hold", "spec.providerIDList: Forbidden", members("p-3", "", []string{victim, "aws:///us-east-1a/i-other"}, ownedBy(pool, pool.GetUID()))},
		// A pool's member object names a Node for Cluster API's
		// MachinePool controller, which makes a Machine for it.
		{"a pool's member object with no owner", "spec.providerID: Forbidden", member("pm-1", victim, nil)},
		{"a pool's member object whose owner Machine holds another ID", "spec.providerID: Forbidden", member("pm-2", "aws:///us-east-1a/i-other", ownedBy(holding, holding.GetUID()))},
		{"a pool's member object owned by the MachinePool", "spec.providerID: Forbidden", member("pm-3", victim, ownedBy(pool, pool.GetUID()))},
	}
	for _, tc := range refused {
		if err := alice.Create(ctx, tc.obj); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: alice creates it: %v, want %q", tc.name, err, tc.want)
		}
	}

	allowed := []struct {
		name string
		as   client.Client
		obj  client.Object
	}{
		{"a machine without a provider ID", alice, machine("m-5", "", nil)},
		{"a machine whose owner Machine holds its ID (clusterctl move)", alice, machine("m-6", victim, ownedBy(holding, holding.GetUID()))},
		{"a pool whose owner MachinePool holds its members (clusterctl move)", alice, members("p-4", "asg-1", []string{victim}, ownedBy(pool, pool.GetUID()))},
		{"a machine the manager creates with an ID", mgr, machine("m-7", victim, nil)},
		{"a pool the manager creates with members", mgr, members("p-5", "asg-1", []string{victim}, nil)},
		{"a pool's member object whose owner Machine holds its ID (clusterctl move)", alice, member("pm-4", victim, ownedBy(holding, holding.GetUID()))},
		{"a pool's member object the manager creates", mgr, member("pm-5", victim, nil)},
	}
	for _, tc := range allowed {
		if err := tc.as.Create(ctx, tc.obj); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
