// Package crd tests the generated CRDs on a real kube-apiserver: defaults,
// schema and CEL rules hold without any webhook or manager.
package crd

import (
	"context"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/testenv"
)

func cluster(name string, mutate func(*infrav1.TerraformCluster)) *infrav1.TerraformCluster {
	c := &infrav1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: infrav1.TerraformClusterSpec{RunnerSpec: infrav1.RunnerSpec{
			Image:     "registry.example/modules/net:1.0",
			Variables: []infrav1.Variable{{Name: "region", Value: &apiextensionsv1.JSON{Raw: []byte(`"eu-west-1"`)}}},
		}},
	}
	if mutate != nil {
		mutate(c)
	}
	return c
}

func TestTerraformClusterSchema(t *testing.T) {
	env := testenv.Start(t, "../..")
	ctx := context.Background()

	c := cluster("defaults", nil)
	if err := env.Client.Create(ctx, c); err != nil {
		t.Fatalf("create: %v", err)
	}
	if c.Spec.ApplyPolicy != infrav1.ApplyAutomatic {
		t.Errorf("applyPolicy defaults to %q, want Automatic", c.Spec.ApplyPolicy)
	}
	if d := c.Spec.Jobs.ActiveDeadlineSeconds; d == nil || *d != 3600 {
		t.Errorf("job.activeDeadlineSeconds defaults to %v, want 3600", d)
	}
	// applyPolicy is mutable.
	c.Spec.ApplyPolicy = infrav1.ApplyManual
	if err := env.Client.Update(ctx, c); err != nil {
		t.Errorf("switch to Manual: %v", err)
	}

	refused := []struct {
		name   string
		mutate func(*infrav1.TerraformCluster)
		want   string
	}{
		{"bad-policy", func(c *infrav1.TerraformCluster) { c.Spec.ApplyPolicy = "Sometimes" }, "Unsupported value"},
		{"no-image", func(c *infrav1.TerraformCluster) { c.Spec.Image = "" }, "spec.image"},
		{"value-and-from", func(c *infrav1.TerraformCluster) {
			c.Spec.Variables[0].ValueFrom = &infrav1.VariableSource{}
		}, "spec.variables[0]: Too many"},
		{"neither-value", func(c *infrav1.TerraformCluster) { c.Spec.Variables[0].Value = nil }, "should have at least 2 properties"},
		{"duplicate-variable", func(c *infrav1.TerraformCluster) {
			c.Spec.Variables = append(c.Spec.Variables, c.Spec.Variables[0])
		}, "Duplicate value"},
		{"bad-variable-name", func(c *infrav1.TerraformCluster) { c.Spec.Variables[0].Name = "has space" }, "spec.variables[0].name"},
		{"short-deadline", func(c *infrav1.TerraformCluster) {
			d := int64(5)
			c.Spec.Jobs.ActiveDeadlineSeconds = &d
		}, "activeDeadlineSeconds"},
	}
	for _, r := range refused {
		t.Run(r.name, func(t *testing.T) {
			err := env.Client.Create(ctx, cluster(r.name, r.mutate))
			if err == nil || !strings.Contains(err.Error(), r.want) {
				t.Errorf("create: err = %v, want a refusal naming %q", err, r.want)
			}
		})
	}
}

func TestTerraformClusterTemplate(t *testing.T) {
	env := testenv.Start(t, "../..")
	tmpl := &infrav1.TerraformClusterTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "tmpl", Namespace: "default"},
		Spec: infrav1.TerraformClusterTemplateSpec{Template: infrav1.TerraformClusterTemplateResource{
			Spec: cluster("x", nil).Spec,
		}},
	}
	if err := env.Client.Create(context.Background(), tmpl); err != nil {
		t.Fatalf("create: %v", err)
	}
	if tmpl.Spec.Template.Spec.ApplyPolicy != infrav1.ApplyAutomatic {
		t.Errorf("template applyPolicy defaults to %q", tmpl.Spec.Template.Spec.ApplyPolicy)
	}
}

// TestProviderLabels: Cluster API finds the infrastructure types by the
// contract labels on their CRDs (which versions satisfy which contract),
// and clusterctl finds every CRD of the provider, for move among others,
// by the clusterctl label.
func TestProviderLabels(t *testing.T) {
	env := testenv.Start(t, "../..")
	ctx := context.Background()
	contract := map[string]bool{"terraformclusters": true, "terraformclustertemplates": true, "terraformmachines": true, "terraformmachinetemplates": true,
		"terraformmachinepools": true, "terraformmachinepooltemplates": true, "terraformmachinepoolmachines": true}
	for _, plural := range []string{"terraformclusters", "terraformclustertemplates", "terraformmachines", "terraformmachinetemplates",
		"terraformmachinepools", "terraformmachinepooltemplates", "terraformmachinepoolmachines", "terraformclusteridentities", "terraformplans"} {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := env.Client.Get(ctx, client.ObjectKey{Name: plural + "." + infrav1.GroupVersion.Group}, &crd); err != nil {
			t.Fatal(err)
		}
		if v, ok := crd.Labels["clusterctl.cluster.x-k8s.io"]; !ok || v != "" {
			t.Errorf("%s: no clusterctl label: %v", plural, crd.Labels)
		}
		for _, c := range []string{"cluster.x-k8s.io/v1beta1", "cluster.x-k8s.io/v1beta2"} {
			if got := crd.Labels[c]; contract[plural] != (got == infrav1.GroupVersion.Version) {
				t.Errorf("%s: label %s = %q", plural, c, got)
			}
		}
	}
}
