package crd

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/testenv"
)

// TestTerraformMachinePoolSchema: a pool changes in place (image,
// variables), unlike a machine; its own provider ID is set once; its
// members' list holds up to 10,000 IDs, no more, none empty; the
// membership interval is bounded. A template takes any change but
// the fields the manager publishes, which it refuses.
func TestTerraformMachinePoolSchema(t *testing.T) {
	env := testenv.Start(t, "../..")
	ctx := context.Background()
	p := &infrav1.TerraformMachinePool{
		ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: "default"},
		Spec: infrav1.TerraformMachinePoolSpec{RunnerSpec: infrav1.RunnerSpec{
			Image:     "registry.example/modules/pool:1.0",
			Variables: []infrav1.Variable{{Name: "size", Value: &apiextensionsv1.JSON{Raw: []byte(`"small"`)}}},
		}},
	}
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatalf("create: %v", err)
	}
	update := func(change func(*infrav1.TerraformMachinePool)) error {
		var fresh infrav1.TerraformMachinePool
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), &fresh); err != nil {
			t.Fatal(err)
		}
		change(&fresh)
		return env.Client.Update(ctx, &fresh)
	}
	ids := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("aws:///eu-west-1a/i-%017d", i)
		}
		return out
	}

	if err := update(func(p *infrav1.TerraformMachinePool) {
		p.Spec.Image = "registry.example/modules/pool:2.0"
		p.Spec.Variables[0].Value = &apiextensionsv1.JSON{Raw: []byte(`"large"`)}
		p.Spec.ProviderID = "aws:///eu-west-1/asg-workers"
		p.Spec.ProviderIDList = ids(10000)
		p.Spec.Membership.IntervalSeconds = ptr.To(int32(30))
	}); err != nil {
		t.Fatalf("a pool's change in place, its provider ID and 10,000 members: %v", err)
	}
	refused := []struct {
		name   string
		change func(*infrav1.TerraformMachinePool)
		want   string
	}{
		{"another provider ID", func(p *infrav1.TerraformMachinePool) { p.Spec.ProviderID = "aws:///eu-west-1/asg-other" }, "providerID is set once"},
		{"no provider ID", func(p *infrav1.TerraformMachinePool) { p.Spec.ProviderID = "" }, "providerID is set once"},
		{"10,001 members", func(p *infrav1.TerraformMachinePool) { p.Spec.ProviderIDList = ids(10001) }, "must have at most 10000 items"},
		{"an empty member", func(p *infrav1.TerraformMachinePool) { p.Spec.ProviderIDList = []string{""} }, "spec.providerIDList[0]"},
		{"a membership refresh every 5 s", func(p *infrav1.TerraformMachinePool) { p.Spec.Membership.IntervalSeconds = ptr.To(int32(5)) }, "spec.membership.intervalSeconds"},
	}
	for _, r := range refused {
		t.Run(r.name, func(t *testing.T) {
			if err := update(r.change); err == nil || !strings.Contains(err.Error(), r.want) {
				t.Errorf("update: err = %v, want a refusal naming %q", err, r.want)
			}
		})
	}

	tmpl := &infrav1.TerraformMachinePoolTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: "default"},
		Spec:       infrav1.TerraformMachinePoolTemplateSpec{Template: infrav1.TerraformMachinePoolTemplateResource{Spec: p.Spec}},
	}
	if err := env.Client.Create(ctx, tmpl); err != nil {
		t.Fatalf("create template: %v", err)
	}
	tmpl.Spec.Template.Spec.Image = "registry.example/modules/pool:3.0"
	if err := env.Client.Update(ctx, tmpl); err != nil {
		t.Errorf("a template's change: %v", err)
	}

	// A template names neither published field: every pool stamped out
	// of it would carry them to its MachinePool.
	const refusedIDs = "providerID and providerIDList are not allowed in a template"
	for name, set := range map[string]func(*infrav1.TerraformMachinePoolSpec){
		"providerID":     func(s *infrav1.TerraformMachinePoolSpec) { s.ProviderID = "aws:///eu-west-1/asg-other" },
		"providerIDList": func(s *infrav1.TerraformMachinePoolSpec) { s.ProviderIDList = []string{"aws:///eu-west-1a/i-victim"} },
	} {
		changed := tmpl.DeepCopy()
		set(&changed.Spec.Template.Spec)
		if err := env.Client.Update(ctx, changed); err == nil || !strings.Contains(err.Error(), refusedIDs) {
			t.Errorf("a template's %s set: err = %v, want %q", name, err, refusedIDs)
		}
		created := &infrav1.TerraformMachinePoolTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: "victims-" + strings.ToLower(name), Namespace: "default"},
			Spec:       infrav1.TerraformMachinePoolTemplateSpec{Template: infrav1.TerraformMachinePoolTemplateResource{Spec: p.Spec}},
		}
		set(&created.Spec.Template.Spec)
		if err := env.Client.Create(ctx, created); err == nil || !strings.Contains(err.Error(), refusedIDs) {
			t.Errorf("a template created with %s: err = %v, want %q", name, err, refusedIDs)
		}
	}
}
