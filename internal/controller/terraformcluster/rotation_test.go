package terraformcluster

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/testenv"
)

// TestTemplateRotation: with the manager's webhooks served and Cluster
// API's MachineDeployment, MachineSet and Machine controllers running, a
// TerraformMachineTemplate's spec cannot be edited in place, while Cluster
// API's own edit of its metadata (the Cluster as its owner) passes. A new
// template, and the MachineDeployment pointed at it, roll out new
// TerraformMachines cloned from the new template, whose module gets the
// new spec; the old machines are destroyed.
func TestTemplateRotation(t *testing.T) {
	env := testenv.StartWithClusterAPIAndWebhooks(t, "../../..")
	serveWebhooks(t, env)
	h := startMachinesAs(t, env, env.ConfigAs(managerUser, "system:masters"))
	ctx := context.Background()
	u := h.cluster("rotate", false)
	h.exportsCluster(u, "zone-a")
	if err := h.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "rotate-bootstrap", Namespace: "default"}, Data: map[string][]byte{"value": []byte(bootstrapCanary)}}); err != nil {
		t.Fatal(err)
	}
	first := h.machineTemplate("rotate-1", "rotate-1")
	md := h.machineDeployment("rotate-md", "rotate", first.Name, "v1.34.0", "rotate-bootstrap", 2)
	// Both machines may go at once: no Node ever joins here, so no Machine
	// ever becomes available and a rollout that keeps one would wait.
	both := md.DeepCopy()
	both.Spec.Rollout.Strategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(2))
	if err := h.c.Patch(ctx, both, client.MergeFrom(md)); err != nil {
		t.Fatal(err)
	}
	before := h.provisionedMachines(md.Name, 2)
	for _, tm := range before {
		if _, err := os.Stat(filepath.Join(h.files, "rotate-1", tm.Name+".txt")); err != nil {
			t.Fatalf("machine %s of the first template: %v", tm.Name, err)
		}
	}

	// Cluster API made the Cluster an owner of the template (a metadata
	// edit the webhook lets through); an edit of its spec is refused.
	if err := h.c.Get(ctx, client.ObjectKeyFromObject(first), first); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(first.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "Cluster" && o.Name == "rotate" }) {
		t.Errorf("the template's owners %v lack the Cluster that Cluster API adds", first.OwnerReferences)
	}
	edited := first.DeepCopy()
	edited.Spec.Template.Spec.Variables = []infrav1.Variable{{Name: "dir", Value: &apiextensionsv1.JSON{Raw: []byte(`"rotate-2"`)}}}
	if err := h.c.Patch(ctx, edited, client.MergeFrom(first)); err == nil || !strings.Contains(err.Error(), "spec cannot change") {
		t.Fatalf("an edit of the template's spec: %v, want it refused", err)
	}

	// The rotation: a new template, the MachineDeployment pointed at it.
	second := h.machineTemplate("rotate-2", "rotate-2")
	if err := h.c.Get(ctx, client.ObjectKeyFromObject(md), md); err != nil {
		t.Fatal(err)
	}
	rotated := md.DeepCopy()
	rotated.Spec.Template.Spec.InfrastructureRef.Name = second.Name
	if err := h.c.Patch(ctx, rotated, client.MergeFrom(md)); err != nil {
		t.Fatal(err)
	}
	old := func(tm infrav1.TerraformMachine) bool {
		return slices.ContainsFunc(before, func(b infrav1.TerraformMachine) bool { return b.Name == tm.Name })
	}
	var after []infrav1.TerraformMachine
	waitUntil(h.harness, "the machines of the new template provisioned, the old ones gone", func() bool {
		after = h.deploymentMachines(md.Name)
		return len(after) == 2 && !slices.ContainsFunc(after, func(tm infrav1.TerraformMachine) bool {
			return old(tm) || !machineProvisioned(&tm) || !tm.DeletionTimestamp.IsZero()
		})
	})
	for _, tm := range after {
		if from := tm.Annotations[clusterv1.TemplateClonedFromNameAnnotation]; from != second.Name {
			t.Errorf("machine %s cloned from %q, want %s", tm.Name, from, second.Name)
		}
		if _, err := os.Stat(filepath.Join(h.files, "rotate-2", tm.Name+".txt")); err != nil {
			t.Errorf("machine %s: the module did not get the new template's spec: %v", tm.Name, err)
		}
	}
	for _, tm := range before {
		h.gone(&tm, "the old machine "+tm.Name+" destroyed")
		if _, err := os.Stat(filepath.Join(h.files, "rotate-1", tm.Name+".txt")); !os.IsNotExist(err) {
			t.Errorf("the old machine %s's file after the rollout: %v", tm.Name, err)
		}
	}
}
