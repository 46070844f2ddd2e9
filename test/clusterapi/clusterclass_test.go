// Package clusterapi checks captf's objects against Cluster API's own code:
// its CRDs on a real API server, and its webhooks and reconcilers run in
// this process, as a management cluster would run them.
package clusterapi

import (
	"context"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/core/reconcilers/clusterclass"
	"sigs.k8s.io/cluster-api/core/webhooks/admission"
	"sigs.k8s.io/cluster-api/feature"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/testenv"
)

// env starts an API server with captf's CRDs, Cluster API's and kubeadm's
// (a ClusterClass needs a control plane template), and a client that
// knows Cluster API's types.
func env(t *testing.T) (*testenv.Env, client.Client) {
	t.Helper()
	e := testenv.StartWithKubeadm(t, "../..")
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, clusterv1.AddToScheme, infrav1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(e.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return e, c
}

// labelCRD sets the labels of a CRD to labels.
func labelCRD(t *testing.T, c client.Client, name string, labels map[string]string) {
	t.Helper()
	var crd apiextensionsv1.CustomResourceDefinition
	if err := c.Get(context.Background(), client.ObjectKey{Name: name}, &crd); err != nil {
		t.Fatal(err)
	}
	crd.Labels = labels
	if err := c.Update(context.Background(), &crd); err != nil {
		t.Fatal(err)
	}
}

// TestClusterClass: the ClusterClass sample, whose infrastructure is a
// TerraformClusterTemplate, passes Cluster API's ClusterClass webhook;
// Cluster API's ClusterClass reconciler finds the template, owns it (so
// clusterctl move carries it) and finds its apiVersion current for the
// contract through the CRD's labels; and a TerraformCluster made from the
// template as the topology controller makes it is accepted. Without the
// contract labels the same reconciler refuses the template.
func TestClusterClass(t *testing.T) {
	if err := feature.MutableGates.Set(string(feature.ClusterTopology) + "=true"); err != nil {
		t.Fatal(err)
	}
	_, c := env(t)
	ctx := ctrl.LoggerInto(context.Background(), ctrl.Log)

	var cc clusterv1.ClusterClass
	for _, u := range testenv.Objects(t, "../../config/samples/clusterclass.yaml") {
		if u.GetKind() == "ClusterClass" {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &cc); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := c.Create(ctx, u); err != nil {
			t.Fatalf("create %s: %v", u.GetKind(), err)
		}
	}
	if _, err := (&admission.ClusterClass{Client: c}).ValidateCreate(ctx, &cc); err != nil {
		t.Fatalf("Cluster API's webhook refuses the ClusterClass: %v", err)
	}
	if err := c.Create(ctx, &cc); err != nil {
		t.Fatal(err)
	}
	kcp := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlaneTemplate",
		"metadata": map[string]any{"name": cc.Spec.ControlPlane.TemplateRef.Name, "namespace": cc.Namespace},
		"spec":     map[string]any{"template": map[string]any{"spec": map[string]any{"kubeadmConfigSpec": map[string]any{"format": "cloud-config"}}}},
	}}
	if err := c.Create(ctx, kcp); err != nil {
		t.Fatal(err)
	}
	bootstrap := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfigTemplate",
		"metadata": map[string]any{"name": cc.Spec.Workers.MachineDeployments[0].Bootstrap.TemplateRef.Name, "namespace": cc.Namespace},
		"spec":     map[string]any{"template": map[string]any{"spec": map[string]any{"format": "cloud-config"}}},
	}}
	if err := c.Create(ctx, bootstrap); err != nil {
		t.Fatal(err)
	}

	reconciler := &clusterclass.Reconciler{Client: c}
	key := types.NamespacedName{Namespace: cc.Namespace, Name: cc.Name}
	// The first pass only records the Paused condition and asks again.
	for range 2 {
		if _, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
			t.Fatalf("Cluster API's ClusterClass reconciler: %v", err)
		}
	}
	if err := c.Get(ctx, key, &cc); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{clusterv1.ClusterClassRefVersionsUpToDateCondition, clusterv1.ClusterClassVariablesReadyCondition} {
		cond := meta.FindStatusCondition(cc.Status.Conditions, want)
		if cond == nil || cond.Status != metav1.ConditionTrue {
			t.Errorf("ClusterClass condition %s: %+v", want, cond)
		}
	}
	var tmpl infrav1.TerraformClusterTemplate
	if err := c.Get(ctx, client.ObjectKey{Namespace: cc.Namespace, Name: cc.Spec.Infrastructure.TemplateRef.Name}, &tmpl); err != nil {
		t.Fatal(err)
	}
	if len(tmpl.OwnerReferences) != 1 || tmpl.OwnerReferences[0].Kind != "ClusterClass" || tmpl.OwnerReferences[0].UID != cc.UID {
		t.Errorf("the template's owners %+v, want the ClusterClass", tmpl.OwnerReferences)
	}

	var mt infrav1.TerraformMachineTemplate
	if err := c.Get(ctx, client.ObjectKey{Namespace: cc.Namespace, Name: cc.Spec.Workers.MachineDeployments[0].Infrastructure.TemplateRef.Name}, &mt); err != nil {
		t.Fatal(err)
	}
	if cc.Spec.ControlPlane.MachineInfrastructure.TemplateRef.Name != mt.Name {
		t.Fatalf("the sample's control plane machines are not TerraformMachines of %s", mt.Name)
	}
	if len(mt.OwnerReferences) != 1 || mt.OwnerReferences[0].UID != cc.UID {
		t.Errorf("the machine template's owners %+v, want the ClusterClass", mt.OwnerReferences)
	}
	// The topology controller compares templates by a server-side-apply
	// dry run of the spec it read (unstructured, as stored): it applies
	// with no change.
	stored := &unstructured.Unstructured{}
	stored.SetGroupVersionKind(infrav1.GroupVersion.WithKind("TerraformMachineTemplate"))
	if err := c.Get(ctx, client.ObjectKeyFromObject(&mt), stored); err != nil {
		t.Fatal(err)
	}
	applied := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": infrav1.GroupVersion.String(), "kind": "TerraformMachineTemplate",
		"metadata": map[string]any{"name": mt.Name, "namespace": mt.Namespace},
		"spec":     stored.Object["spec"],
	}}
	if err := c.Patch(ctx, applied, client.Apply, client.FieldOwner("capi-topology"), client.ForceOwnership, client.DryRunAll); err != nil {
		t.Fatalf("a dry-run apply of the machine template: %v", err)
	}
	if applied.GetGeneration() != stored.GetGeneration() {
		t.Errorf("a dry-run apply of the unchanged machine template changes it: generation %d → %d\nstored %v\napplied %v", stored.GetGeneration(), applied.GetGeneration(), stored.Object["spec"], applied.Object["spec"])
	}
	// A change of what defines a machine is a new template for Cluster
	// API, but the template itself takes it: no immutability rule.
	changed := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": infrav1.GroupVersion.String(), "kind": "TerraformMachineTemplate",
		"metadata": map[string]any{"name": mt.Name, "namespace": mt.Namespace},
		"spec":     runtime.DeepCopyJSONValue(stored.Object["spec"]),
	}}
	if err := unstructured.SetNestedField(changed.Object, "registry.example.com/modules/demo-machine:1.0.1", "spec", "template", "spec", "image"); err != nil {
		t.Fatal(err)
	}
	if err := c.Patch(ctx, changed, client.Apply, client.FieldOwner("capi-topology"), client.ForceOwnership, client.DryRunAll); err != nil {
		t.Errorf("a dry-run apply of a new image into the machine template: %v", err)
	}
	// A MachineSet's machine from it: the template's spec as a
	// TerraformMachine.
	tm := &infrav1.TerraformMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "demo-1-md-abcde", Namespace: cc.Namespace, Labels: map[string]string{clusterv1.ClusterNameLabel: "demo-1"}},
		Spec:       mt.Spec.Template.Spec,
	}
	if err := c.Create(ctx, tm); err != nil {
		t.Fatalf("a TerraformMachine from the template: %v", err)
	}

	// What the topology controller makes of the template for a Cluster
	// "demo-1": the template's spec.template (metadata and spec) as a
	// TerraformCluster.
	tc := &infrav1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{
			Name: "demo-1-abcde", Namespace: cc.Namespace,
			Labels:      merge(tmpl.Spec.Template.ObjectMeta.Labels, map[string]string{clusterv1.ClusterNameLabel: "demo-1", clusterv1.ClusterTopologyOwnedLabel: ""}),
			Annotations: tmpl.Spec.Template.ObjectMeta.Annotations,
		},
		Spec: tmpl.Spec.Template.Spec,
	}
	if err := c.Create(ctx, tc); err != nil {
		t.Fatalf("a TerraformCluster from the template: %v", err)
	}

	// Without the contract's labels, Cluster API cannot tell which of the
	// CRD's versions serves its contract, and refuses the reference.
	labelCRD(t, c, "terraformclustertemplates.infrastructure.cluster.x-k8s.io", nil)
	_, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: key})
	if err == nil || !strings.Contains(err.Error(), "contract version label(s) are either missing") {
		t.Errorf("the reconciler with an unlabelled CRD: %v, want a refusal for the missing contract labels", err)
	}
}

func merge(maps ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range maps {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}
