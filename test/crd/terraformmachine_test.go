package crd

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/testenv"
)

func machine(name string) *infrav1.TerraformMachine {
	return &infrav1.TerraformMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: infrav1.TerraformMachineSpec{RunnerSpec: infrav1.RunnerSpec{
			Image:     "registry.example/modules/node:1.0",
			Variables: []infrav1.Variable{{Name: "size", Value: &apiextensionsv1.JSON{Raw: []byte(`"small"`)}}},
		}},
	}
}

// TestTerraformMachineImmutable: what defines a machine — image,
// variables, variable sources, identity — cannot change after creation;
// the provider ID is set once; the rest (apply policy, Job settings,
// deletion policy, drift) can change. A template holds no such rule, so
// ClusterClass can patch it (it rotates templates whose spec changed).
func TestTerraformMachineImmutable(t *testing.T) {
	env := testenv.Start(t, "../..")
	ctx := context.Background()
	m := machine("node-0")
	if err := env.Client.Create(ctx, m); err != nil {
		t.Fatalf("create: %v", err)
	}
	update := func(change func(*infrav1.TerraformMachine)) error {
		var fresh infrav1.TerraformMachine
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), &fresh); err != nil {
			t.Fatal(err)
		}
		change(&fresh)
		return env.Client.Update(ctx, &fresh)
	}
	refused := []struct {
		name   string
		change func(*infrav1.TerraformMachine)
		want   string
	}{
		{"image", func(m *infrav1.TerraformMachine) { m.Spec.Image = "registry.example/modules/node:2.0" }, "image is immutable"},
		{"a variable's value", func(m *infrav1.TerraformMachine) {
			m.Spec.Variables[0].Value = &apiextensionsv1.JSON{Raw: []byte(`"large"`)}
		}, "variables are immutable"},
		{"a variable more", func(m *infrav1.TerraformMachine) {
			m.Spec.Variables = append(m.Spec.Variables, infrav1.Variable{Name: "disk", Value: &apiextensionsv1.JSON{Raw: []byte(`20`)}})
		}, "variables are immutable"},
		{"variablesFrom", func(m *infrav1.TerraformMachine) {
			m.Spec.VariablesFrom = []infrav1.VariablesSource{{Kind: "ConfigMap", Selector: metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}}}}
		}, "variablesFrom is immutable"},
		{"identityRef", func(m *infrav1.TerraformMachine) {
			m.Spec.IdentityRef = &infrav1.IdentityReference{Kind: infrav1.IdentityKindSecret, Name: "creds"}
		}, "identityRef is immutable"},
	}
	for _, r := range refused {
		t.Run(r.name, func(t *testing.T) {
			if err := update(r.change); err == nil || !strings.Contains(err.Error(), r.want) {
				t.Errorf("update: err = %v, want a refusal naming %q", err, r.want)
			}
		})
	}
	if err := update(func(m *infrav1.TerraformMachine) {
		m.Spec.ApplyPolicy = infrav1.ApplyManual
		m.Spec.DeletionPolicy = infrav1.DeletionRetain
		m.Spec.Jobs.Env = []corev1.EnvVar{{Name: "HTTPS_PROXY", Value: "http://proxy:3128"}}
	}); err != nil {
		t.Errorf("a change of what does not define the machine: %v", err)
	}

	if err := update(func(m *infrav1.TerraformMachine) { m.Spec.ProviderID = "captftest:///node-0" }); err != nil {
		t.Fatalf("set providerID: %v", err)
	}
	for _, id := range []string{"captftest:///node-1", ""} {
		if err := update(func(m *infrav1.TerraformMachine) { m.Spec.ProviderID = id }); err == nil || !strings.Contains(err.Error(), "providerID is set once") {
			t.Errorf("providerID changed to %q: err = %v", id, err)
		}
	}

	tmpl := &infrav1.TerraformMachineTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "nodes", Namespace: "default"},
		Spec:       infrav1.TerraformMachineTemplateSpec{Template: infrav1.TerraformMachineTemplateResource{Spec: machine("x").Spec}},
	}
	if err := env.Client.Create(ctx, tmpl); err != nil {
		t.Fatalf("create template: %v", err)
	}
	tmpl.Spec.Template.Spec.Image = "registry.example/modules/node:2.0"
	if err := env.Client.Update(ctx, tmpl); err != nil {
		t.Errorf("a template's image: %v", err)
	}

	// A template names no provider ID: every machine stamped out of it
	// would carry it to its Machine.
	const refusedID = "providerID is not allowed in a template"
	tmpl.Spec.Template.Spec.ProviderID = "captftest:///victim"
	if err := env.Client.Update(ctx, tmpl); err == nil || !strings.Contains(err.Error(), refusedID) {
		t.Errorf("a template's providerID set: err = %v, want %q", err, refusedID)
	}
	withID := &infrav1.TerraformMachineTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "victims", Namespace: "default"},
		Spec:       infrav1.TerraformMachineTemplateSpec{Template: infrav1.TerraformMachineTemplateResource{Spec: machine("x").Spec}},
	}
	withID.Spec.Template.Spec.ProviderID = "captftest:///victim"
	if err := env.Client.Create(ctx, withID); err == nil || !strings.Contains(err.Error(), refusedID) {
		t.Errorf("a template created with a providerID: err = %v, want %q", err, refusedID)
	}
}
