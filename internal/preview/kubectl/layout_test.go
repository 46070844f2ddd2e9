package kubectl

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/captf/captf/internal/preview"
	"github.com/captf/captf/pkg/changeset"
)

// The layout a new user tries first: one manifest directory whose files,
// in name order, hold a Deployment in a namespace, a CRD, that Namespace,
// and an object of the CRD's kind in it. Read in file order, the
// Deployment and the Widget come before what they need.
var layout = map[string]string{
	"app.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: fresh-team
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.27
`,
	"crd.yaml": `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.test
spec:
  group: example.test
  scope: Namespaced
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
`,
	"namespace.yaml": `apiVersion: v1
kind: Namespace
metadata:
  name: fresh-team
`,
	"widget.yaml": `apiVersion: example.test/v1
kind: Widget
metadata:
  name: gadget
  namespace: fresh-team
spec:
  size: 3
`,
}

// note reads an entry's note through its JSON, as the change set carries
// it.
func note(t *testing.T, e changeset.Entry) string {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	s, _ := m["note"].(string)
	return s
}

// TestNamespaceAndCRDLayout: on a fresh API server, the plan of the layout
// creates all four objects with the member planned (the Deployment's and
// the Widget's dry runs wait for the Namespace and the CRD the member
// creates first); a moved change set applies nothing; the apply of the
// planned digest creates all four, the Widget served; a second plan has no
// changes.
func TestNamespaceAndCRDLayout(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()
	root := t.TempDir()
	dir := filepath.Join(root, "k8s")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for name, text := range layout {
		write(name, text)
	}
	s := &step{t: t, c: c, root: root, inputs: map[string]any{"manifest": "k8s", "kubeconfig": c.kubeconfig}}
	widget := func() error {
		w := &unstructured.Unstructured{}
		w.SetAPIVersion("example.test/v1")
		w.SetKind("Widget")
		return c.env.Client.Get(ctx, client.ObjectKey{Namespace: "fresh-team", Name: "gadget"}, w)
	}
	nothingApplied := func() {
		t.Helper()
		for what, err := range map[string]error{
			"Namespace":  c.env.Client.Get(ctx, client.ObjectKey{Name: "fresh-team"}, &corev1.Namespace{}),
			"CRD":        c.env.Client.Get(ctx, client.ObjectKey{Name: "widgets.example.test"}, &apiextensionsv1.CustomResourceDefinition{}),
			"Deployment": c.env.Client.Get(ctx, client.ObjectKey{Namespace: "fresh-team", Name: "web"}, &appsv1.Deployment{}),
		} {
			if !apierrors.IsNotFound(err) {
				t.Errorf("%s: %v, want not found: something was applied", what, err)
			}
		}
	}

	p := s.plan()
	var got []string
	for _, e := range p.Entries {
		got = append(got, e.Action+" "+e.Address)
	}
	if diff := cmp.Diff([]string{
		"create Namespace/fresh-team",
		"create CustomResourceDefinition/widgets.example.test",
		"create Deployment/fresh-team/web",
		"create Widget/fresh-team/gadget",
	}, got); diff != "" {
		t.Errorf("entries, in the order the apply takes (-want +got):\n%s", diff)
	}
	if len(p.Member.Holes) != 0 {
		t.Errorf("holes: %+v", p.Member.Holes)
	}
	notes := map[string]string{}
	for _, e := range p.Entries {
		notes[e.Address] = note(t, e)
	}
	if diff := cmp.Diff(map[string]string{
		"Namespace/fresh-team":                          "",
		"CustomResourceDefinition/widgets.example.test": "",
		"Deployment/fresh-team/web":                     "the dry run waits for Namespace/fresh-team, which this member creates first; the manifest binds the body",
		"Widget/fresh-team/gadget":                      "the dry run waits for Namespace/fresh-team and CustomResourceDefinition/widgets.example.test, which this member creates first; the manifest binds the body",
	}, notes); diff != "" {
		t.Errorf("notes (-want +got):\n%s", diff)
	}
	if a, ok := attr(entry(t, p, "Widget/fresh-team/gadget"), "spec.size"); !ok || string(a.After) != "3" {
		t.Errorf("the Widget's create lists spec.size as %+v", a)
	}

	// The manifest moves after the review: exit 3, nothing applied.
	write("app.yaml", strings.Replace(layout["app.yaml"], "nginx:1.27", "nginx:1.28", 1))
	if _, err := (Capability{}).Apply(ctx, s.request(), p); !errors.Is(err, preview.ErrMoved) {
		t.Fatalf("apply of a moved change set: %v, want preview.ErrMoved (exit 3)", err)
	}
	nothingApplied()
	write("app.yaml", layout["app.yaml"])

	s.apply(p)
	var dep appsv1.Deployment
	if err := c.env.Client.Get(ctx, client.ObjectKey{Namespace: "fresh-team", Name: "web"}, &dep); err != nil {
		t.Errorf("the Deployment: %v", err)
	}
	if err := widget(); err != nil {
		t.Errorf("the Widget is not served: %v", err)
	}

	p = s.plan()
	for _, e := range p.Entries {
		if e.Action != changeset.ActionNoOp {
			t.Errorf("after the apply: %s %s %+v", e.Action, e.Address, e.Attributes)
		}
	}
	if len(p.Entries) != 4 || len(p.Member.Holes) != 0 {
		t.Errorf("after the apply: %d entries, holes %+v", len(p.Entries), p.Member.Holes)
	}

	// Deletes go in the reverse order: the Deployment and the Widget
	// before the CRD that serves the Widget's kind.
	for _, name := range []string{"app.yaml", "crd.yaml", "widget.yaml"} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	s.inputs["delete"] = DeleteOwnedOnly
	p = s.plan()
	got = nil
	for _, e := range p.Entries {
		got = append(got, e.Action+" "+e.Address)
	}
	if diff := cmp.Diff([]string{
		"no-op Namespace/fresh-team",
		"delete Deployment/fresh-team/web",
		"delete Widget/fresh-team/gadget",
		"delete CustomResourceDefinition/widgets.example.test",
	}, got); diff != "" {
		t.Errorf("deletes (-want +got):\n%s", diff)
	}
	s.apply(p)
	// A CRD goes once its objects are gone (a finalizer): deleted is
	// enough.
	var crd apiextensionsv1.CustomResourceDefinition
	if err := c.env.Client.Get(ctx, client.ObjectKey{Name: "widgets.example.test"}, &crd); !apierrors.IsNotFound(err) && (err != nil || crd.DeletionTimestamp == nil) {
		t.Errorf("the CRD after its delete: %v, deletion %v", err, crd.DeletionTimestamp)
	}
	if err := c.env.Client.Get(ctx, client.ObjectKey{Namespace: "fresh-team", Name: "web"}, &dep); !apierrors.IsNotFound(err) {
		t.Errorf("the Deployment after its delete: %v", err)
	}
}
