package kubectl

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// applyRank is where an object of a kind goes in the apply: Namespaces
// first, then CustomResourceDefinitions, then everything else, as
// kubectl, Helm, kapp and Flux order them. Deletes go the other way.
func applyRank(group, kind string) int {
	switch {
	case group == "" && kind == "Namespace":
		return 0
	case group == "apiextensions.k8s.io" && kind == "CustomResourceDefinition":
		return 1
	}
	return 2
}

func docRank(d document) int {
	group, _, hasGroup := strings.Cut(d.APIVersion, "/")
	if !hasGroup {
		group = "" // "v1": the core group
	}
	return applyRank(group, d.Kind)
}

// applyOrder returns the documents in the order the apply takes:
// Namespaces, then CRDs, then the rest, each group in manifest order.
func applyOrder(docs []document) []document {
	out := slices.Clone(docs)
	slices.SortStableFunc(out, func(a, b document) int { return docRank(a) - docRank(b) })
	return out
}

// definedBy finds the CustomResourceDefinition of the manifest that
// serves gvk, and returns the mapping it will give the kind and its ref;
// nil when none does.
func definedBy(docs []document, gvk schema.GroupVersionKind) (*meta.RESTMapping, *objectRef) {
	for _, d := range docs {
		if d.APIVersion != "apiextensions.k8s.io/v1" || d.Kind != "CustomResourceDefinition" {
			continue
		}
		spec, _ := d.Object["spec"].(map[string]any)
		names, _ := spec["names"].(map[string]any)
		plural, _ := names["plural"].(string)
		if spec["group"] != gvk.Group || names["kind"] != gvk.Kind || plural == "" || !servesVersion(spec, gvk.Version) {
			continue
		}
		scope := meta.RESTScopeRoot
		if spec["scope"] == "Namespaced" {
			scope = meta.RESTScopeNamespace
		}
		ref := objectRef{Group: "apiextensions.k8s.io", Kind: d.Kind, Name: d.Name}
		return &meta.RESTMapping{Resource: gvk.GroupVersion().WithResource(plural), GroupVersionKind: gvk, Scope: scope}, &ref
	}
	return nil, nil
}

func servesVersion(spec map[string]any, version string) bool {
	versions, _ := spec["versions"].([]any)
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if m["name"] == version && m["served"] == true {
			return true
		}
	}
	return false
}
