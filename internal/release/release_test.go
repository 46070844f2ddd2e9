package release_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/version"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"
	clusterctl "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/config"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/repository"
	utilyaml "sigs.k8s.io/cluster-api/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/captf/captf/internal/release"
	"github.com/captf/captf/internal/testenv"
)

const (
	testVersion  = "v0.1.0"
	testRegistry = "ghcr.io/captf"
	// Not the components' own captf-system: clusterctl must move every
	// namespaced object, and every reference to one, into it.
	targetNamespace = "captf-test"
)

func TestManifestsRefuses(t *testing.T) {
	for _, tc := range []struct {
		reason string
		opts   release.Options
		want   string
	}{
		{"clusterctl wants a leading v", release.Options{Version: "0.1.0", Registry: testRegistry}, "leading v"},
		{"not a semantic version", release.Options{Version: "v0.1", Registry: testRegistry}, "version"},
		{"no registry", release.Options{Version: testVersion}, "no registry"},
		{"a registry without a host would pull from Docker Hub", release.Options{Version: testVersion, Registry: "captf"}, "canonical"},
		{"metadata.yaml has no series 0.2", release.Options{Version: "v0.2.0", Registry: testRegistry}, "no release series 0.2"},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			tc.opts.Config = "../../config"
			_, err := release.Manifests(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Manifests(%+v) = %v, want an error with %q", tc.opts, err, tc.want)
			}
		})
	}
}

// TestComponentsKeepContractLabels checks that the CRDs reach
// infrastructure-components.yaml with the labels by which Cluster API finds
// the version of each contract, and clusterctl's label that clusterctl move
// needs.
func TestComponentsKeepContractLabels(t *testing.T) {
	files, err := release.Manifests(release.Options{Config: "../../config", Version: testVersion, Registry: testRegistry})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := utilyaml.ToUnstructured(files[release.ComponentsFile])
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]string{}
	for _, u := range objs {
		if u.GetKind() == "CustomResourceDefinition" {
			got[u.GetName()] = u.GetLabels()
		}
	}
	contract := map[string]string{
		"cluster.x-k8s.io/v1beta1":   "v1alpha1",
		"cluster.x-k8s.io/v1beta2":   "v1alpha1",
		clusterctlv1.ClusterctlLabel: "",
	}
	want := map[string]map[string]string{
		"terraformclusters.infrastructure.cluster.x-k8s.io":             contract,
		"terraformclustertemplates.infrastructure.cluster.x-k8s.io":     contract,
		"terraformmachines.infrastructure.cluster.x-k8s.io":             contract,
		"terraformmachinetemplates.infrastructure.cluster.x-k8s.io":     contract,
		"terraformmachinepools.infrastructure.cluster.x-k8s.io":         contract,
		"terraformmachinepooltemplates.infrastructure.cluster.x-k8s.io": contract,
		"terraformmachinepoolmachines.infrastructure.cluster.x-k8s.io":  contract,
		"terraformclusteridentities.infrastructure.cluster.x-k8s.io":    {clusterctlv1.ClusterctlLabel: "", clusterctlv1.ClusterctlMoveHierarchyLabel: "true"},
		"terraformplans.infrastructure.cluster.x-k8s.io":                {clusterctlv1.ClusterctlLabel: ""},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the CRDs' labels (-want +got):\n%s", diff)
	}
}

// TestClusterctlInstallsRelease reads the release from a local clusterctl
// repository, as clusterctl init --infrastructure captf:v0.1.0 does, and
// applies what clusterctl would to a real API server with Cluster API's
// CRDs. TestFlavors generates clusters from the same repository.
func TestClusterctlInstallsRelease(t *testing.T) {
	dir := releaseRepository(t)
	ctx := context.Background()
	// A variable left unset takes its default. (clusterctl keeps its
	// config in a global, so each client is used before the next is made.)
	defaults, err := clusterctl.New(ctx, writeClusterctlConfig(t, dir, nil))
	if err != nil {
		t.Fatal(err)
	}
	comps, err := defaults.GetProviderComponents(ctx, "captf", clusterctlv1.InfrastructureProviderType,
		clusterctl.ComponentsOptions{Version: testVersion, TargetNamespace: targetNamespace})
	if err != nil {
		t.Fatalf("clusterctl's provider components with defaults: %v", err)
	}
	checkComponents(t, comps.Objs(), "--recheck-interval=10m")

	cfgPath := writeClusterctlConfig(t, dir, map[string]string{
		"CAPTF_RECHECK_INTERVAL": "5m",
	})
	cc, err := clusterctl.New(ctx, cfgPath)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("metadata", func(t *testing.T) {
		checkContract(ctx, t, cfgPath)
	})

	comps, err = cc.GetProviderComponents(ctx, "captf", clusterctlv1.InfrastructureProviderType,
		clusterctl.ComponentsOptions{Version: testVersion, TargetNamespace: targetNamespace})
	if err != nil {
		t.Fatalf("clusterctl's provider components: %v", err)
	}
	if diff := cmp.Diff([]string{"CAPTF_RECHECK_INTERVAL"}, comps.Variables()); diff != "" {
		t.Errorf("variables (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{testRegistry + "/captf-manager:" + testVersion}, comps.Images()); diff != "" {
		t.Errorf("images (-want +got):\n%s", diff)
	}
	objs := comps.Objs()
	checkComponents(t, objs, "--recheck-interval=5m")

	env := testenv.StartWithClusterAPI(t, "../..")
	applyComponents(ctx, t, env, objs)
}

// writeClusterctlConfig writes a clusterctl config that names the release
// in dir as the provider captf, with vars, and returns its path.
func writeClusterctlConfig(t *testing.T, dir string, vars map[string]string) string {
	t.Helper()
	cfg := map[string]any{
		"providers": []map[string]string{{
			"name": "captf",
			"type": string(clusterctlv1.InfrastructureProviderType),
			"url":  "file://" + filepath.Join(dir, release.ComponentsFile),
		}},
	}
	for k, v := range vars {
		cfg[k] = v
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "clusterctl.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkContract reads metadata.yaml as clusterctl init does before it
// installs a provider: the release's series implements the contract of
// the Cluster API this clusterctl belongs to.
func checkContract(ctx context.Context, t *testing.T, cfgPath string) {
	t.Helper()
	cfg, err := config.New(ctx, cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	provider, err := cfg.Providers().Get("captf", clusterctlv1.InfrastructureProviderType)
	if err != nil {
		t.Fatal(err)
	}
	repo, err := repository.New(ctx, provider, cfg)
	if err != nil {
		t.Fatal(err)
	}
	md, err := repo.Metadata(testVersion).Get(ctx)
	if err != nil {
		t.Fatalf("clusterctl's metadata: %v", err)
	}
	series := md.GetReleaseSeriesForVersion(version.MustParseSemantic(testVersion))
	if series == nil {
		t.Fatalf("metadata.yaml has no release series for %s: %+v", testVersion, md.ReleaseSeries)
	}
	if series.Contract != clusterv1.GroupVersion.Version {
		t.Errorf("the release series %d.%d implements %s, Cluster API's contract is %s", series.Major, series.Minor, series.Contract, clusterv1.GroupVersion.Version)
	}
}

// checkComponents checks the components as clusterctl would apply them:
// in the target namespace, with the release's images and the variable
// substituted, and the webhook's
// certificate and CA injection following the namespace.
func checkComponents(t *testing.T, objs []unstructured.Unstructured, recheck string) {
	t.Helper()
	var kinds []string
	for _, u := range objs {
		kinds = append(kinds, u.GetKind()+"/"+u.GetName())
		if ns := u.GetNamespace(); ns != "" && ns != targetNamespace {
			t.Errorf("%s/%s is in %s, not the target namespace", u.GetKind(), u.GetName(), ns)
		}
	}
	for _, want := range []string{
		"Namespace/" + targetNamespace,
		"CustomResourceDefinition/terraformclusters.infrastructure.cluster.x-k8s.io",
		"CustomResourceDefinition/terraformclustertemplates.infrastructure.cluster.x-k8s.io",
		"CustomResourceDefinition/terraformmachines.infrastructure.cluster.x-k8s.io",
		"CustomResourceDefinition/terraformmachinetemplates.infrastructure.cluster.x-k8s.io",
		"CustomResourceDefinition/terraformmachinepools.infrastructure.cluster.x-k8s.io",
		"CustomResourceDefinition/terraformmachinepooltemplates.infrastructure.cluster.x-k8s.io",
		"CustomResourceDefinition/terraformmachinepoolmachines.infrastructure.cluster.x-k8s.io",
		"CustomResourceDefinition/terraformclusteridentities.infrastructure.cluster.x-k8s.io",
		"CustomResourceDefinition/terraformplans.infrastructure.cluster.x-k8s.io",
		"ServiceAccount/captf-manager",
		"ClusterRole/captf-manager-role",
		"ClusterRoleBinding/captf-manager-rolebinding",
		"Role/captf-leader-election-role",
		"RoleBinding/captf-leader-election-role",
		"Service/captf-webhook-service",
		"Deployment/captf-manager",
		"ValidatingWebhookConfiguration/captf-validating-webhook-configuration",
		"Issuer/captf-selfsigned-issuer",
		"Certificate/captf-serving-cert",
	} {
		if !slices.Contains(kinds, want) {
			t.Errorf("the components lack %s; they have %v", want, kinds)
		}
	}
	for _, u := range objs {
		switch u.GetKind() {
		case "Deployment":
			containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
			c := containers[0].(map[string]any)
			if got, want := c["image"], testRegistry+"/captf-manager:"+testVersion; got != want {
				t.Errorf("the manager's image = %v, want %s", got, want)
			}
			args, _, _ := unstructured.NestedStringSlice(c, "args")
			for _, want := range []string{"--runner-image=" + testRegistry + "/captf-runner:" + testVersion, recheck, "--enable-webhooks"} {
				if !slices.Contains(args, want) {
					t.Errorf("the manager's args %v lack %s", args, want)
				}
			}
		case "Certificate":
			dns, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "dnsNames")
			if want := "captf-webhook-service." + targetNamespace + ".svc"; !slices.Contains(dns, want) {
				t.Errorf("the certificate's dnsNames %v lack %s", dns, want)
			}
		case "ValidatingWebhookConfiguration":
			if got, want := u.GetAnnotations()["cert-manager.io/inject-ca-from"], targetNamespace+"/captf-serving-cert"; got != want {
				t.Errorf("inject-ca-from = %q, want %q", got, want)
			}
		}
	}
}

// applyComponents applies the components as clusterctl does (server-side,
// Namespace first) and checks the API server accepted them. cert-manager's
// Issuer and Certificate are left out: the test API server has no
// cert-manager CRDs (clusterctl init installs cert-manager first).
func applyComponents(ctx context.Context, t *testing.T, env *testenv.Env, objs []unstructured.Unstructured) {
	t.Helper()
	for i := range objs {
		u := &objs[i]
		if u.GroupVersionKind().Group == "cert-manager.io" {
			continue
		}
		if err := env.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("clusterctl"), client.ForceOwnership); err != nil {
			t.Errorf("apply %s/%s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	get := func(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
		t.Helper()
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(apiVersion)
		u.SetKind(kind)
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u); err != nil {
			t.Fatalf("%s %s/%s: %v", kind, namespace, name, err)
		}
		return u
	}
	dep := get("apps/v1", "Deployment", targetNamespace, "captf-manager")
	if got, want := dep.GetLabels()[clusterv1.ProviderNameLabel], "infrastructure-captf"; got != want {
		t.Errorf("the Deployment's provider label = %q, want %q", got, want)
	}
	crd := get("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "terraformclusters.infrastructure.cluster.x-k8s.io")
	if got := crd.GetLabels()["cluster.x-k8s.io/v1beta2"]; got != "v1alpha1" {
		t.Errorf("the TerraformCluster CRD in the API server: label cluster.x-k8s.io/v1beta2 = %q", got)
	}
	vwc := get("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "", "captf-validating-webhook-configuration")
	hooks, _, _ := unstructured.NestedSlice(vwc.Object, "webhooks")
	if len(hooks) != 6 {
		t.Fatalf("webhooks = %d, want 6 (TerraformPlan, TerraformMachine, TerraformMachinePool, TerraformMachinePoolMachine, TerraformMachineTemplate, TerraformMachinePoolTemplate)", len(hooks))
	}
	for _, h := range hooks {
		if ns, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "service", "namespace"); ns != targetNamespace {
			t.Errorf("a webhook calls a Service in %q, want %q", ns, targetNamespace)
		}
	}

	// The RBAC lets the manager's ServiceAccount, in the target namespace,
	// do its work: reconcile TerraformClusters, TerraformMachines and
	// TerraformMachinePools anywhere (watching Cluster API's Machines and
	// MachinePools), run Jobs, and hold its leader lease.
	user := "system:serviceaccount:" + targetNamespace + ":captf-manager"
	for _, ra := range []authorizationv1.ResourceAttributes{
		{Verb: "watch", Group: "infrastructure.cluster.x-k8s.io", Resource: "terraformclusters"},
		{Verb: "patch", Group: "infrastructure.cluster.x-k8s.io", Resource: "terraformmachines", Namespace: "default"},
		{Verb: "patch", Group: "infrastructure.cluster.x-k8s.io", Resource: "terraformmachines", Subresource: "status", Namespace: "default"},
		{Verb: "watch", Group: "cluster.x-k8s.io", Resource: "machines"},
		{Verb: "patch", Group: "infrastructure.cluster.x-k8s.io", Resource: "terraformmachinepools", Namespace: "default"},
		{Verb: "patch", Group: "infrastructure.cluster.x-k8s.io", Resource: "terraformmachinepools", Subresource: "status", Namespace: "default"},
		{Verb: "watch", Group: "cluster.x-k8s.io", Resource: "machinepools"},
		{Verb: "patch", Group: "infrastructure.cluster.x-k8s.io", Resource: "terraformclusters", Subresource: "status", Namespace: "default"},
		{Verb: "create", Group: "batch", Resource: "jobs", Namespace: "default"},
		{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: targetNamespace},
	} {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               user,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + targetNamespace, "system:authenticated"},
			ResourceAttributes: &ra,
		}}
		if err := env.Client.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		if !sar.Status.Allowed {
			t.Errorf("%s may not %s %s/%s in %q: %s", user, ra.Verb, ra.Resource, ra.Subresource, ra.Namespace, sar.Status.Reason)
		}
	}
}

// TestReleaseNotes: the release's notes name its version's images, every
// flavor it ships, and how to sign each image and attest its SBOM by
// digest and how to verify both.
func TestReleaseNotes(t *testing.T) {
	files, err := release.Manifests(release.Options{Config: "../../config", Version: testVersion, Registry: testRegistry})
	if err != nil {
		t.Fatal(err)
	}
	notes := string(files[release.NotesFile])
	var want []string
	for _, name := range []string{release.ManagerImageName, release.RunnerImageName} {
		repo := testRegistry + "/" + name
		want = append(want,
			"- `"+repo+":"+testVersion+"`",
			"index=$(crane digest "+repo+":"+testVersion+")",
			"cosign sign --yes --recursive --key cosign.key "+repo+"@$index",
			"cosign attest --yes --key cosign.key --type spdxjson --predicate dist/images/"+name+".spdx.json "+repo+"@$index")
	}
	want = append(want,
		"clusterctl init --infrastructure captf:"+testVersion,
		"Flavors: `default`, `clusterclass`, `machinepool`.",
		"cosign verify-attestation --key cosign.pub --type spdxjson IMAGE@sha256:<index digest>")
	for _, w := range want {
		if !strings.Contains(notes, w) {
			t.Errorf("the release notes lack %q:\n%s", w, notes)
		}
	}
}
