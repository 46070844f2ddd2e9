package release_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	bootstrapadmission "sigs.k8s.io/cluster-api/bootstrap/kubeadm/webhooks/admission"
	clusterctl "sigs.k8s.io/cluster-api/cmd/clusterctl/client"
	kcpadmission "sigs.k8s.io/cluster-api/controlplane/kubeadm/webhooks/admission"
	"sigs.k8s.io/cluster-api/core/reconcilers/clusterclass"
	capiadmission "sigs.k8s.io/cluster-api/core/webhooks/admission"
	"sigs.k8s.io/cluster-api/feature"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/captf/captf/internal/release"
	"github.com/captf/captf/internal/testenv"
)

const (
	moduleImage  = "registry.example.com/modules/demo-cluster:1.0.0"
	machineImage = "registry.example.com/modules/demo-machine:1.0.0"
	poolImage    = "registry.example.com/modules/demo-pool:1.0.0"
	kubeVersion  = "v1.36.0"
)

// TestFlavors generates a cluster from each flavor of the release with
// clusterctl's own library, as clusterctl generate cluster --flavor does,
// and creates what it generates on a real API server that serves the CRDs
// of Cluster API and of its kubeadm providers. Cluster API's webhooks
// default and validate each object first: they run in this process,
// called as the API server would call them before a create. Every
// reference between the objects must name one of them, and the variables
// must reach the fields they are for.
func TestFlavors(t *testing.T) {
	if err := feature.MutableGates.Set(string(feature.ClusterTopology) + "=true"); err != nil {
		t.Fatal(err)
	}
	dir := releaseRepository(t)
	env := testenv.StartWithKubeadm(t, "../..")
	ctx := ctrl.LoggerInto(context.Background(), ctrl.Log)
	images := map[string]string{"CAPTF_MODULE_IMAGE": moduleImage, "CAPTF_MACHINE_IMAGE": machineImage}

	for _, tc := range []struct {
		flavor    string
		variables []string // beside CLUSTER_NAME, NAMESPACE, KUBERNETES_VERSION and the two counts
		objects   []string
		values    map[string]any // "Kind name field.path" → value
	}{{
		flavor:    "",
		variables: []string{"CAPTF_APPLY_POLICY", "CAPTF_MACHINE_IMAGE", "CAPTF_MODULE_IMAGE"},
		objects: []string{
			"Cluster demo", "TerraformCluster demo",
			"KubeadmControlPlane demo-control-plane", "TerraformMachineTemplate demo-control-plane",
			"MachineDeployment demo-md-0", "TerraformMachineTemplate demo-md-0", "KubeadmConfigTemplate demo-md-0",
		},
		values: map[string]any{
			"TerraformCluster demo spec.image":                                     moduleImage,
			"TerraformCluster demo spec.applyPolicy":                               "Manual",
			"KubeadmControlPlane demo-control-plane spec.replicas":                 float64(3),
			"KubeadmControlPlane demo-control-plane spec.version":                  kubeVersion,
			"TerraformMachineTemplate demo-control-plane spec.template.spec.image": machineImage,
			"MachineDeployment demo-md-0 spec.replicas":                            float64(2),
			"MachineDeployment demo-md-0 spec.template.spec.version":               kubeVersion,
			"TerraformMachineTemplate demo-md-0 spec.template.spec.image":          machineImage,
		},
	}, {
		flavor:    "machinepool",
		variables: []string{"CAPTF_APPLY_POLICY", "CAPTF_MACHINE_IMAGE", "CAPTF_MODULE_IMAGE", "CAPTF_POOL_IMAGE"},
		objects: []string{
			"Cluster demo-mp", "TerraformCluster demo-mp",
			"KubeadmControlPlane demo-mp-control-plane", "TerraformMachineTemplate demo-mp-control-plane",
			"MachinePool demo-mp-mp-0", "TerraformMachinePool demo-mp-mp-0", "KubeadmConfig demo-mp-mp-0",
		},
		values: map[string]any{
			"TerraformCluster demo-mp spec.image":                     moduleImage,
			"KubeadmControlPlane demo-mp-control-plane spec.replicas": float64(3),
			"MachinePool demo-mp-mp-0 spec.replicas":                  float64(2),
			"MachinePool demo-mp-mp-0 spec.template.spec.version":     kubeVersion,
			"TerraformMachinePool demo-mp-mp-0 spec.image":            poolImage,
			"TerraformMachinePool demo-mp-mp-0 spec.applyPolicy":      "Manual",
		},
	}, {
		flavor:    "clusterclass",
		variables: []string{"CAPTF_APPLY_POLICY", "CAPTF_MACHINE_IMAGE", "CAPTF_MODULE_IMAGE"},
		objects: []string{
			"ClusterClass captf", "TerraformClusterTemplate captf", "KubeadmControlPlaneTemplate captf-control-plane",
			"TerraformMachineTemplate captf-control-plane", "TerraformMachineTemplate captf-worker", "KubeadmConfigTemplate captf-worker",
			"Cluster demo-cc",
		},
		values: map[string]any{
			"TerraformClusterTemplate captf spec.template.spec.image":               moduleImage,
			"TerraformClusterTemplate captf spec.template.spec.applyPolicy":         "Manual",
			"TerraformMachineTemplate captf-control-plane spec.template.spec.image": machineImage,
			"TerraformMachineTemplate captf-worker spec.template.spec.image":        machineImage,
			"Cluster demo-cc spec.topology.version":                                 kubeVersion,
			"Cluster demo-cc spec.topology.controlPlane.replicas":                   float64(3),
		},
	}} {
		name := tc.flavor
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			vars := images
			if tc.flavor == "machinepool" {
				vars = map[string]string{"CAPTF_POOL_IMAGE": poolImage}
				for k, v := range images {
					vars[k] = v
				}
			}
			cluster := strings.TrimSuffix("demo-"+map[string]string{"": "", "machinepool": "mp", "clusterclass": "cc"}[tc.flavor], "-")
			tmpl := generate(ctx, t, dir, vars, tc.flavor, cluster)

			wantVars := append([]string{"CLUSTER_NAME", "CONTROL_PLANE_MACHINE_COUNT", "KUBERNETES_VERSION", "NAMESPACE", "WORKER_MACHINE_COUNT"}, tc.variables...)
			slices.Sort(wantVars)
			if diff := cmp.Diff(wantVars, tmpl.Variables()); diff != "" {
				t.Errorf("the flavor's variables (-want +got):\n%s", diff)
			}
			// The apply policy alone has a default: Manual, the safe one.
			for name, def := range tmpl.VariableMap() {
				want := map[string]string{"CAPTF_APPLY_POLICY": "Manual"}[name]
				if got := ptr.Deref(def, ""); got != want {
					t.Errorf("the default of %s = %q, want %q", name, got, want)
				}
			}

			objs := tmpl.Objs()
			var got []string
			byName := map[string]*unstructured.Unstructured{}
			for i := range objs {
				u := &objs[i]
				got = append(got, u.GetKind()+" "+u.GetName())
				byName[u.GetKind()+" "+u.GetName()] = u
				if u.GetNamespace() != "default" {
					t.Errorf("%s %s is in %q, not the target namespace", u.GetKind(), u.GetName(), u.GetNamespace())
				}
			}
			if diff := cmp.Diff(tc.objects, got); diff != "" {
				t.Fatalf("the flavor's objects (-want +got):\n%s", diff)
			}
			for _, u := range objs {
				for _, ref := range references(&u) {
					if _, ok := byName[ref]; !ok {
						t.Errorf("%s %s names %s, which the flavor does not make", u.GetKind(), u.GetName(), ref)
					}
				}
			}
			for key, want := range tc.values {
				f := strings.Fields(key)
				got, found, err := unstructured.NestedFieldNoCopy(byName[f[0]+" "+f[1]].Object, strings.Split(f[2], ".")...)
				if err != nil || !found || got != want {
					t.Errorf("%s = %v (%T), want %v", key, got, got, want)
				}
			}

			create(ctx, t, env.Client, objs)
		})
	}

	t.Run("a module image is required", func(t *testing.T) {
		cc, err := clusterctl.New(ctx, writeClusterctlConfig(t, dir, map[string]string{"CAPTF_MODULE_IMAGE": moduleImage}))
		if err != nil {
			t.Fatal(err)
		}
		_, err = cc.GetClusterTemplate(ctx, clusterctl.GetClusterTemplateOptions{
			ProviderRepositorySource: &clusterctl.ProviderRepositorySourceOptions{InfrastructureProvider: "captf:" + testVersion},
			ClusterName:              "demo", TargetNamespace: "default", KubernetesVersion: kubeVersion,
		})
		if err == nil || !strings.Contains(err.Error(), "CAPTF_MACHINE_IMAGE") {
			t.Errorf("a template without CAPTF_MACHINE_IMAGE: %v, want an error naming it", err)
		}
	})
	t.Run("the apply policy is a variable", func(t *testing.T) {
		vars := map[string]string{"CAPTF_APPLY_POLICY": "Automatic"}
		for k, v := range images {
			vars[k] = v
		}
		for _, u := range generate(ctx, t, dir, vars, "", "demo-auto").Objs() {
			if u.GetKind() == "TerraformCluster" {
				if got, _, _ := unstructured.NestedString(u.Object, "spec", "applyPolicy"); got != "Automatic" {
					t.Errorf("applyPolicy = %q, want Automatic", got)
				}
			}
		}
	})
}

// releaseRepository writes the release's files as clusterctl's local
// repository lays them out (<repo>/<provider label>/<version>/<file>) and
// returns the version's folder.
func releaseRepository(t *testing.T) string {
	t.Helper()
	files, err := release.Manifests(release.Options{Config: "../../config", Version: testVersion, Registry: testRegistry})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "infrastructure-captf", testVersion)
	if err := release.Write(dir, files); err != nil {
		t.Fatal(err)
	}
	return dir
}

// generate is clusterctl generate cluster NAME --infrastructure
// captf:<version> --flavor FLAVOR --kubernetes-version … with three
// control plane machines and two workers, in the namespace default.
func generate(ctx context.Context, t *testing.T, dir string, vars map[string]string, flavor, name string) clusterctl.Template {
	t.Helper()
	// clusterctl keeps its config in a global: each client is used before
	// the next is made.
	cc, err := clusterctl.New(ctx, writeClusterctlConfig(t, dir, vars))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := cc.GetClusterTemplate(ctx, clusterctl.GetClusterTemplateOptions{
		ProviderRepositorySource: &clusterctl.ProviderRepositorySourceOptions{InfrastructureProvider: "captf:" + testVersion, Flavor: flavor},
		ClusterName:              name,
		TargetNamespace:          "default",
		KubernetesVersion:        kubeVersion,
		ControlPlaneMachineCount: ptr.To[int64](3),
		WorkerMachineCount:       ptr.To[int64](2),
	})
	if err != nil {
		t.Fatalf("clusterctl's cluster template, flavor %q: %v", flavor, err)
	}
	return tmpl
}

// references are the objects u names, as "Kind name".
func references(u *unstructured.Unstructured) []string {
	var paths [][]string
	switch u.GetKind() {
	case "Cluster":
		paths = [][]string{{"spec", "infrastructureRef"}, {"spec", "controlPlaneRef"}}
	case "KubeadmControlPlane":
		paths = [][]string{{"spec", "machineTemplate", "spec", "infrastructureRef"}}
	case "MachineDeployment", "MachinePool":
		paths = [][]string{{"spec", "template", "spec", "bootstrap", "configRef"}, {"spec", "template", "spec", "infrastructureRef"}}
	case "ClusterClass":
		paths = [][]string{{"spec", "infrastructure", "templateRef"}, {"spec", "controlPlane", "templateRef"}, {"spec", "controlPlane", "machineInfrastructure", "templateRef"}}
		workers, _, _ := unstructured.NestedSlice(u.Object, "spec", "workers", "machineDeployments")
		for i := range workers {
			paths = append(paths, []string{"spec", "workers", "machineDeployments", fmt.Sprint(i), "bootstrap", "templateRef"},
				[]string{"spec", "workers", "machineDeployments", fmt.Sprint(i), "infrastructure", "templateRef"})
		}
	}
	var refs []string
	for _, p := range paths {
		if ref := nested(u.Object, p); ref != nil {
			refs = append(refs, fmt.Sprint(ref["kind"], " ", ref["name"]))
		}
	}
	return refs
}

// nested is the map at path in obj, where a number indexes a list.
func nested(obj map[string]any, path []string) map[string]any {
	var cur any = obj
	for _, p := range path {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[p]
		case []any:
			var i int
			if _, err := fmt.Sscan(p, &i); err != nil || i >= len(c) {
				return nil
			}
			cur = c[i]
		default:
			return nil
		}
	}
	m, _ := cur.(map[string]any)
	return m
}

// create creates objs as kubectl apply of clusterctl's output does, each
// first defaulted and validated by Cluster API's webhook of its kind. A
// ClusterClass is reconciled by Cluster API's ClusterClass reconciler,
// which must find its templates current for the contract, before the
// Cluster of the class is admitted: the Cluster's webhook checks its
// topology against the reconciled class.
func create(ctx context.Context, t *testing.T, c client.Client, objs []unstructured.Unstructured) {
	t.Helper()
	ctx = admission.NewContextWithRequest(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create}})
	// Templates and configs first, the ClusterClass next, the Cluster last,
	// as the API server's webhooks would need them.
	rank := func(u unstructured.Unstructured) int {
		switch u.GetKind() {
		case "ClusterClass":
			return 1
		case "Cluster":
			return 2
		}
		return 0
	}
	ordered := slices.Clone(objs)
	slices.SortStableFunc(ordered, func(a, b unstructured.Unstructured) int { return rank(a) - rank(b) })
	for i := range ordered {
		u := &ordered[i]
		if err := admit(ctx, c, u); err != nil {
			t.Fatalf("Cluster API's webhook refuses %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		if err := c.Create(ctx, u); err != nil {
			t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
		}
		if u.GetKind() == "ClusterClass" {
			reconcileClass(ctx, t, c, client.ObjectKeyFromObject(u))
		}
	}
}

// admit runs Cluster API's defaulting and validating webhooks of u's kind
// on u, in place. captf's kinds have no such webhook on create.
func admit(ctx context.Context, c client.Client, u *unstructured.Unstructured) error {
	switch u.GroupVersionKind().GroupKind() {
	case schema.GroupKind{Group: clusterv1.GroupVersion.Group, Kind: "Cluster"}:
		w := &capiadmission.Cluster{Client: c}
		return run(ctx, u, &clusterv1.Cluster{}, w, w)
	case schema.GroupKind{Group: clusterv1.GroupVersion.Group, Kind: "ClusterClass"}:
		return run(ctx, u, &clusterv1.ClusterClass{}, nil, &capiadmission.ClusterClass{Client: c})
	case schema.GroupKind{Group: clusterv1.GroupVersion.Group, Kind: "MachineDeployment"}:
		w := &capiadmission.MachineDeployment{}
		return run(ctx, u, &clusterv1.MachineDeployment{}, w, w)
	case schema.GroupKind{Group: clusterv1.GroupVersion.Group, Kind: "MachinePool"}:
		w := &capiadmission.MachinePool{}
		return run(ctx, u, &clusterv1.MachinePool{}, w, w)
	case schema.GroupKind{Group: controlplanev1.GroupVersion.Group, Kind: "KubeadmControlPlane"}:
		w := &kcpadmission.KubeadmControlPlane{}
		return run(ctx, u, &controlplanev1.KubeadmControlPlane{}, w, w)
	case schema.GroupKind{Group: controlplanev1.GroupVersion.Group, Kind: "KubeadmControlPlaneTemplate"}:
		return run(ctx, u, &controlplanev1.KubeadmControlPlaneTemplate{}, nil, &kcpadmission.KubeadmControlPlaneTemplate{})
	case schema.GroupKind{Group: bootstrapv1.GroupVersion.Group, Kind: "KubeadmConfig"}:
		return run(ctx, u, &bootstrapv1.KubeadmConfig{}, nil, &bootstrapadmission.KubeadmConfig{})
	case schema.GroupKind{Group: bootstrapv1.GroupVersion.Group, Kind: "KubeadmConfigTemplate"}:
		w := &bootstrapadmission.KubeadmConfigTemplate{}
		return run(ctx, u, &bootstrapv1.KubeadmConfigTemplate{}, w, w)
	}
	return nil
}

// run decodes u into obj, defaults it with d (when there is one),
// validates it with v, and writes it back into u.
func run[T runtime.Object](ctx context.Context, u *unstructured.Unstructured, obj T, d admission.Defaulter[T], v admission.Validator[T]) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
		return err
	}
	if d != nil {
		if err := d.Default(ctx, obj); err != nil {
			return fmt.Errorf("default: %w", err)
		}
	}
	if _, err := v.ValidateCreate(ctx, obj); err != nil {
		return fmt.Errorf("validate: %w", err)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	u.Object = m
	return nil
}

// reconcileClass runs Cluster API's ClusterClass reconciler on the class
// and checks that it found every template and its variables.
func reconcileClass(ctx context.Context, t *testing.T, c client.Client, key client.ObjectKey) {
	t.Helper()
	reconciler := &clusterclass.Reconciler{Client: c}
	// The first pass only records the Paused condition and asks again.
	for range 2 {
		if _, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
			t.Fatalf("Cluster API's ClusterClass reconciler: %v", err)
		}
	}
	var cc clusterv1.ClusterClass
	if err := c.Get(ctx, key, &cc); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{clusterv1.ClusterClassRefVersionsUpToDateCondition, clusterv1.ClusterClassVariablesReadyCondition} {
		if cond := meta.FindStatusCondition(cc.Status.Conditions, want); cond == nil || cond.Status != metav1.ConditionTrue {
			t.Errorf("ClusterClass condition %s: %+v", want, cond)
		}
	}
}
