package providerid

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/testenv"
)

const manager = "system:serviceaccount:captf-system:captf-manager"

// TestByTheManagerOnly: through the real API server, a user may create a
// machine or a pool (clusterctl move does, with what was published) and
// change other fields, but not set a machine's providerID, nor a pool's
// providerID or providerIDList; the manager may.
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

	// clusterctl move creates the objects again with what was published.
	moved := []client.Object{
		&infrav1.TerraformMachine{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Namespace: "default"},
			Spec: infrav1.TerraformMachineSpec{RunnerSpec: runner, ProviderID: "aws:///us-east-1a/i-0456"}},
		&infrav1.TerraformMachinePool{ObjectMeta: metav1.ObjectMeta{Name: "pool-2", Namespace: "default"},
			Spec: infrav1.TerraformMachinePoolSpec{RunnerSpec: runner, ProviderID: "asg-1", ProviderIDList: []string{"aws:///us-east-1a/i-0789"}}},
	}
	for _, obj := range moved {
		if err := alice.Create(ctx, obj); err != nil {
			t.Errorf("creating %s with what was published, as clusterctl move does: %v", obj.GetName(), err)
		}
	}
}
