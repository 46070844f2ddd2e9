package terraformmachine

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/testenv"
)

const manager = "system:serviceaccount:captf-system:captf-manager"

// TestProviderIDByTheManagerOnly: through the real API server, a user may
// create a machine (clusterctl move does, with its providerID) and change
// other fields, but not set its providerID; the manager may.
func TestProviderIDByTheManagerOnly(t *testing.T) {
	env := testenv.StartWithWebhooks(t, "../../..")
	env.ServeWebhooks(t, (&Validator{ManagerUsername: manager}).SetupWithManager)
	ctx := context.Background()
	alice := env.ClientAs(t, "alice", "system:masters")
	mgr := env.ClientAs(t, manager, "system:masters")

	m := &infrav1.TerraformMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "node-0", Namespace: "default"},
		Spec:       infrav1.TerraformMachineSpec{RunnerSpec: infrav1.RunnerSpec{Image: "registry.example.com/m:1"}},
	}
	if err := alice.Create(ctx, m); err != nil {
		t.Fatalf("alice creates a machine: %v", err)
	}
	set := func(c client.Client, id string) error {
		return c.Patch(ctx, m.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"providerID":"`+id+`"}}`)))
	}
	err := set(alice, "aws:///us-east-1a/i-mallory")
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.providerID: Forbidden: only the manager sets it") {
		t.Errorf("alice sets the providerID: %v, want it refused", err)
	}
	if err := alice.Patch(ctx, m.DeepCopy(), client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"team":"a"}}}`))); err != nil {
		t.Errorf("alice annotates the machine: %v", err)
	}
	if err := set(mgr, "aws:///us-east-1a/i-0123"); err != nil {
		t.Fatalf("the manager sets the providerID: %v", err)
	}
	if err := set(alice, "aws:///us-east-1a/i-mallory"); err == nil {
		t.Error("alice changed the providerID the manager set")
	}
	var got infrav1.TerraformMachine
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), &got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.ProviderID != "aws:///us-east-1a/i-0123" {
		t.Errorf("stored providerID %q", got.Spec.ProviderID)
	}

	// clusterctl move creates the machine again with its providerID.
	moved := &infrav1.TerraformMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", Namespace: "default"},
		Spec:       infrav1.TerraformMachineSpec{RunnerSpec: infrav1.RunnerSpec{Image: "registry.example.com/m:1"}, ProviderID: "aws:///us-east-1a/i-0456"},
	}
	if err := alice.Create(ctx, moved); err != nil {
		t.Errorf("creating a machine with its providerID, as clusterctl move does: %v", err)
	}
}
