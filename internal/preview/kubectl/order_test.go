package kubectl

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestApplyOrder(t *testing.T) {
	docs := []document{
		{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
		{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition", Name: "widgets.example.test"},
		{APIVersion: "v1", Kind: "ConfigMap", Name: "settings"},
		{APIVersion: "v1", Kind: "Namespace", Name: "b"},
		{APIVersion: "example.test/v1", Kind: "Widget", Name: "gadget"},
		{APIVersion: "v1", Kind: "Namespace", Name: "a"},
		// Another group's kind named Namespace is no Namespace.
		{APIVersion: "example.test/v1", Kind: "Namespace", Name: "fake"},
	}
	var got []string
	for _, d := range applyOrder(docs) {
		got = append(got, d.Kind+"/"+d.Name)
	}
	want := []string{"Namespace/b", "Namespace/a", "CustomResourceDefinition/widgets.example.test", "Deployment/web", "ConfigMap/settings", "Widget/gadget", "Namespace/fake"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	if docs[0].Kind != "Deployment" {
		t.Error("applyOrder reordered its argument")
	}
}

func TestDefinedBy(t *testing.T) {
	crd := document{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition", Name: "widgets.example.test", Object: map[string]any{
		"spec": map[string]any{
			"group": "example.test", "scope": "Namespaced",
			"names": map[string]any{"kind": "Widget", "plural": "widgets"},
			"versions": []any{
				map[string]any{"name": "v1", "served": true},
				map[string]any{"name": "v0", "served": false},
			},
		},
	}}
	m, ref := definedBy([]document{crd}, schema.GroupVersionKind{Group: "example.test", Version: "v1", Kind: "Widget"})
	if m == nil || m.Resource != (schema.GroupVersionResource{Group: "example.test", Version: "v1", Resource: "widgets"}) ||
		m.Scope != meta.RESTScopeNamespace || ref.address() != "CustomResourceDefinition/widgets.example.test" {
		t.Errorf("v1: %+v %+v", m, ref)
	}
	for _, gvk := range []schema.GroupVersionKind{
		{Group: "example.test", Version: "v0", Kind: "Widget"}, // not served
		{Group: "example.test", Version: "v2", Kind: "Widget"},
		{Group: "other.test", Version: "v1", Kind: "Widget"},
		{Group: "example.test", Version: "v1", Kind: "Gadget"},
	} {
		if m, _ := definedBy([]document{crd}, gvk); m != nil {
			t.Errorf("%v: %+v, want none", gvk, m)
		}
	}
}
