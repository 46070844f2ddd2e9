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
	"sigs.k8s.io/controller-runtime/pkg/envtest"
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
		"CustomResourceDefinition/terraformmachines.infrastructure.cluster.x-k8s.io",
		"CustomResourceDefinition/terraformmachinetemplates.infrastructure.cluster.x-k8s.io",
		"CustomResourceDefinition/terraformmachinepools.infrastructure.cluster.x-k8s.io",
		"CustomResourceDefinition/terraformmachinepooltemplates.infrastructure.cluster.x-k8s.io",
		"CustomResourceDefinition/terraformmachinepoolmachines.infrastructure.cluster.x-k8s.io",
		"CustomResourceDefinition/terraformplans.infrastructure.cluster.x-k8s.io",
		"ValidatingWebhookConfiguration/captf-validating-webhook-configuration",
		"Service/captf-webhook-service",
		"Certificate/captf-serving-cert",
		"Issuer/captf-selfsigned-issuer",
		"ServiceAccount/captf-manager",
		"ClusterRole/captf-manager-role",
		"ClusterRoleBinding/captf-manager-rolebinding",
		"Deployment/captf-manager",
	} {
		if !slices.Contains(kinds, want) {
			t.Errorf("config/default lacks %s; it has %v", want, kinds)
		}
	}

	checkWebhookWiring(t, objs)

	// A real API server accepts every object (CRDs first, as kubectl does).
	env := testenv.Start(t, "../..")
	ctx := context.Background()
	if _, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{
		Paths: []string{"testdata/cert-manager-crds.yaml"}, ErrorIfPathMissing: true,
	}); err != nil {
		t.Fatalf("cert-manager's CRDs (stand-ins): %v", err)
	}
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

// checkWebhookWiring follows the TerraformPlan webhook through the built
// objects: the webhook configuration names the Service, the certificate
// names the Service's DNS name (kustomize does not rewrite those strings),
// and the manager serves the webhook with that certificate's Secret.
func checkWebhookWiring(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	find := func(kind string) *unstructured.Unstructured {
		for _, u := range objs {
			if u.GetKind() == kind {
				return u
			}
		}
		t.Fatalf("no %s in config/default", kind)
		return nil
	}
	svc := find("Service")
	vwc := find("ValidatingWebhookConfiguration")
	hooks := slice(vwc, "webhooks")
	var names []string
	for _, h := range hooks {
		hook := h.(map[string]any)
		name, _, _ := unstructured.NestedString(hook, "name")
		names = append(names, name)
		ref, _, _ := unstructured.NestedStringMap(hook, "clientConfig", "service")
		if ref["name"] != svc.GetName() || ref["namespace"] != svc.GetNamespace() {
			t.Errorf("webhook %s calls %s/%s, the Service is %s/%s", name, ref["namespace"], ref["name"], svc.GetNamespace(), svc.GetName())
		}
		if fp, _, _ := unstructured.NestedString(hook, "failurePolicy"); fp != "Fail" {
			t.Errorf("webhook %s: failurePolicy = %q, want Fail", name, fp)
		}
	}
	slices.Sort(names)
	if want := []string{"validation.terraformmachine.infrastructure.cluster.x-k8s.io", "validation.terraformmachinepool.infrastructure.cluster.x-k8s.io",
		"validation.terraformmachinepoolmachine.infrastructure.cluster.x-k8s.io",
		"validation.terraformmachinepooltemplate.infrastructure.cluster.x-k8s.io", "validation.terraformmachinetemplate.infrastructure.cluster.x-k8s.io",
		"validation.terraformplan.infrastructure.cluster.x-k8s.io"}; !slices.Equal(names, want) {
		t.Fatalf("webhooks %v, want %v", names, want)
	}
	cert := find("Certificate")
	dns, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	if want := svc.GetName() + "." + svc.GetNamespace() + ".svc"; !slices.Contains(dns, want) {
		t.Errorf("the certificate's dnsNames %v lack %s", dns, want)
	}
	if got, want := vwc.GetAnnotations()["cert-manager.io/inject-ca-from"], cert.GetNamespace()+"/"+cert.GetName(); got != want {
		t.Errorf("inject-ca-from = %q, want %q", got, want)
	}
	secret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	dep := find("Deployment")
	volumes := slice(dep, "spec", "template", "spec", "volumes")
	var mounted bool
	for _, v := range volumes {
		name, _, _ := unstructured.NestedString(v.(map[string]any), "secret", "secretName")
		mounted = mounted || name == secret
	}
	if !mounted {
		t.Errorf("the manager does not mount the certificate's Secret %s", secret)
	}
	containers := slice(dep, "spec", "template", "spec", "containers")
	args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	for _, want := range []string{"--enable-webhooks", "--manager-username=system:serviceaccount:$(POD_NAMESPACE):$(POD_SERVICE_ACCOUNT)"} {
		if !slices.Contains(args, want) {
			t.Errorf("the manager's args %v lack %s", args, want)
		}
	}
	// The webhook's variables come beside the manager's own, not in
	// place of them: GOMEMLIMIT follows the container's memory limit.
	env := map[string]map[string]any{}
	for _, e := range slice(&unstructured.Unstructured{Object: containers[0].(map[string]any)}, "env") {
		e := e.(map[string]any)
		from, _ := e["valueFrom"].(map[string]any)
		env[e["name"].(string)] = from
	}
	if got, _, _ := unstructured.NestedString(env["GOMEMLIMIT"], "resourceFieldRef", "resource"); got != "limits.memory" {
		t.Errorf("the manager's GOMEMLIMIT comes from %v, want the container's limits.memory", env["GOMEMLIMIT"])
	}
	for _, want := range []string{"POD_NAMESPACE", "POD_SERVICE_ACCOUNT"} {
		if env[want] == nil {
			t.Errorf("the manager's env lacks %s", want)
		}
	}
}

// slice reads a list without copying it (kustomize's maps hold Go ints,
// which unstructured.NestedSlice's deep copy refuses).
func slice(u *unstructured.Unstructured, path ...string) []any {
	v, _, _ := unstructured.NestedFieldNoCopy(u.Object, path...)
	s, _ := v.([]any)
	return s
}
