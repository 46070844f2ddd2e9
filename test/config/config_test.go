// Package config checks that config/default builds (kustomize, as
// `kubectl apply -k config/default` does) into what installs the manager,
// and that the built manifests are accepted by a real API server.
package config

import (
	"context"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/captf/captf/internal/testenv"
)

func TestDefaultInstalls(t *testing.T) {
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), "../../config/default")
	if err != nil {
		t.Fatalf("kustomize build config/default: %v", err)
	}
	var kinds []string
	var objs []*unstructured.Unstructured
	for _, r := range resMap.Resources() {
		m, err := r.Map()
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: m}
		kinds = append(kinds, u.GetKind()+"/"+u.GetName())
		objs = append(objs, u)
	}
	for _, want := range []string{
		"Namespace/captf-system",
		"CustomResourceDefinition/terraformclusters.infrastructure.cluster.x-k8s.io",
		"CustomResourceDefinition/terraformclustertemplates.infrastructure.cluster.x-k8s.io",
		"ServiceAccount/captf-manager",
		"ClusterRole/captf-manager-role",
		"ClusterRoleBinding/captf-manager-rolebinding",
		"Deployment/captf-manager",
	} {
		if !slices.Contains(kinds, want) {
			t.Errorf("config/default lacks %s; it has %v", want, kinds)
		}
	}

	// A real API server accepts every object (CRDs first, as kubectl does).
	env := testenv.Start(t, "../..")
	ctx := context.Background()
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int {
		rank := func(u *unstructured.Unstructured) int {
			switch u.GetKind() {
			case "Namespace":
				return 0
			case "CustomResourceDefinition":
				return 1
			}
			return 2
		}
		return rank(a) - rank(b)
	})
	for _, u := range objs {
		if u.GetKind() == "CustomResourceDefinition" {
			continue // installed by testenv from the same files
		}
		if err := env.Client.Create(ctx, u); err != nil {
			t.Errorf("create %s/%s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	var sa unstructured.Unstructured
	sa.SetAPIVersion("v1")
	sa.SetKind("ServiceAccount")
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "captf-system", Name: "captf-manager"}, &sa); err != nil {
		t.Errorf("the manager's ServiceAccount: %v", err)
	}
}
