package templates

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/core/reconcilers/topology/cluster/structuredmerge"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/testenv"
)

// TestTemplatesImmutable: through the real API server, a change of a
// TerraformMachineTemplate's or TerraformMachinePoolTemplate's spec is
// refused with a message that says what to do instead, by a patch and by
// a server-side apply; labels, annotations and owner references change
// freely; Cluster API's topology controller's server-side apply dry run
// (field manager capi-topology, the annotation
// topology.cluster.x-k8s.io/dry-run) passes, as does Cluster API's own
// topology patch helper, which sees the change of spec; the same apply
// not dry run, or dry run without the annotation, is refused. A CRD's CEL
// rule on spec could not tell the dry run apart.
func TestTemplatesImmutable(t *testing.T) {
	env := testenv.StartWithWebhooks(t, "../../..")
	env.ServeWebhooks(t, SetupWithManager)
	ctx := context.Background()
	alice := env.ClientAs(t, "alice", "system:masters")
	runner := infrav1.RunnerSpec{Image: "registry.example.com/m:1"}

	cases := []struct {
		kind string
		obj  client.Object
		// image is the stored spec's module image.
		image func(client.Object) string
		// use is what the refusal tells to do instead.
		use string
	}{{
		kind: "TerraformMachineTemplate",
		obj: &infrav1.TerraformMachineTemplate{ObjectMeta: metav1.ObjectMeta{Name: "workers-1", Namespace: "default"},
			Spec: infrav1.TerraformMachineTemplateSpec{Template: infrav1.TerraformMachineTemplateResource{Spec: infrav1.TerraformMachineSpec{RunnerSpec: runner}}}},
		image: func(o client.Object) string { return o.(*infrav1.TerraformMachineTemplate).Spec.Template.Spec.Image },
		use:   "Create a new template and point the MachineDeployment",
	}, {
		kind: "TerraformMachinePoolTemplate",
		obj: &infrav1.TerraformMachinePoolTemplate{ObjectMeta: metav1.ObjectMeta{Name: "pool-1", Namespace: "default"},
			Spec: infrav1.TerraformMachinePoolTemplateSpec{Template: infrav1.TerraformMachinePoolTemplateResource{Spec: infrav1.TerraformMachinePoolSpec{RunnerSpec: runner}}}},
		image: func(o client.Object) string {
			return o.(*infrav1.TerraformMachinePoolTemplate).Spec.Template.Spec.Image
		},
		use: "Create a new template and point the ClusterClass's machine pool class",
	}}
	for _, tc := range cases {
		t.Run(tc.kind, func(t *testing.T) {
			if err := alice.Create(ctx, tc.obj); err != nil {
				t.Fatalf("alice creates it: %v", err)
			}
			refused := func(what string, err error) {
				t.Helper()
				want := "spec: Forbidden: a " + tc.kind + "'s spec cannot change: the machines already made from it would keep the old spec and no rollout would follow. " + tc.use
				if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
					t.Errorf("%s: %v, want the refusal %q", what, err, want)
				}
			}
			patch := func(p string) error {
				return alice.Patch(ctx, tc.obj.DeepCopyObject().(client.Object), client.RawPatch("application/merge-patch+json", []byte(p)))
			}
			refused("a patch of the image", patch(`{"spec":{"template":{"spec":{"image":"registry.example.com/m:2"}}}}`))
			refused("a patch of the template's labels", patch(`{"spec":{"template":{"metadata":{"labels":{"tier":"b"}}}}}`))

			// Metadata changes freely, as Cluster API's controllers change it.
			if err := patch(`{"metadata":{"labels":{"team":"a"},"annotations":{"note":"b"},"ownerReferences":[{"apiVersion":"cluster.x-k8s.io/v1beta2","kind":"Cluster","name":"c","uid":"4f1c3a52-0c1e-4f55-9a0e-5b7c2f1d9e01"}]}}`); err != nil {
				t.Errorf("alice changes the labels, annotations and owners: %v", err)
			}

			// The topology controller's dry run passes; the same apply
			// made for real, or without the annotation, does not.
			apply := func(annotated bool, opts ...client.ApplyOption) (*unstructured.Unstructured, error) {
				u := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": infrav1.GroupVersion.String(), "kind": tc.kind,
					"metadata": map[string]any{"name": tc.obj.GetName(), "namespace": "default"},
					"spec":     map[string]any{"template": map[string]any{"spec": map[string]any{"image": "registry.example.com/m:3"}}},
				}}
				if annotated {
					u.SetAnnotations(map[string]string{clusterv1.TopologyDryRunAnnotation: ""})
				}
				err := alice.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), append(opts, client.FieldOwner("capi-topology"), client.ForceOwnership)...)
				return u, err
			}
			u, err := apply(true, client.DryRunAll)
			if err != nil {
				t.Errorf("the topology controller's dry run: %v", err)
			} else if image, _, _ := unstructured.NestedString(u.Object, "spec", "template", "spec", "image"); image != "registry.example.com/m:3" {
				t.Errorf("the dry run answered the image %q", image)
			}
			// Cluster API's own topology code, which decides a template
			// rotation, sees the change of spec through the webhook.
			current := &unstructured.Unstructured{}
			current.SetGroupVersionKind(infrav1.GroupVersion.WithKind(tc.kind))
			if err := alice.Get(ctx, client.ObjectKeyFromObject(tc.obj), current); err != nil {
				t.Fatal(err)
			}
			desired := current.DeepCopy()
			if err := unstructured.SetNestedField(desired.Object, "registry.example.com/m:4", "spec", "template", "spec", "image"); err != nil {
				t.Fatal(err)
			}
			if helper, err := structuredmerge.NewServerSidePatchHelper(ctx, current, desired, alice, noCache{}); err != nil {
				t.Errorf("Cluster API's topology patch helper: %v", err)
			} else if !helper.HasSpecChanges() {
				t.Error("Cluster API's topology patch helper sees no change of spec")
			}

			_, err = apply(false, client.DryRunAll)
			refused("a dry run without the topology annotation", err)
			_, err = apply(true)
			refused("the topology controller's apply, not dry run", err)

			got := tc.obj.DeepCopyObject().(client.Object)
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(tc.obj), got); err != nil {
				t.Fatal(err)
			}
			if image := tc.image(got); image != "registry.example.com/m:1" {
				t.Errorf("the stored image is %q", image)
			}
			if got.GetLabels()["team"] != "a" || len(got.GetOwnerReferences()) != 1 {
				t.Errorf("the stored labels %v, owners %v", got.GetLabels(), got.GetOwnerReferences())
			}
		})
	}
}

// noCache is a cache of Cluster API's topology patch helper that holds
// nothing, so that every check runs its server-side apply dry run.
type noCache struct{}

func (noCache) Add(string)              {}
func (noCache) Has(string, string) bool { return false }
