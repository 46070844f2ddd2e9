package terraformcluster

import (
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/testenv"
	"github.com/captf/captf/internal/testnode"
)

// exportsImage holds testdata/exports, whose exports output is the value
// of its variable exports.
const exportsImage = "example.test/exports:1"

// TestExportsPublished: after an apply the module's exports output is in
// status.exports as canonical JSON, read from the state; a change that
// makes it no object unpublishes it, and ExportsPublished says why.
func TestExportsPublished(t *testing.T) {
	module, _ := filepath.Abs("testdata/exports")
	h := startEnv(t, testenv.Start(t, "../../.."), nil, func(n *testnode.Node) {
		n.Images[exportsImage] = []testnode.Image{{Path: infrav1.PathModule, Dir: module}, n.Images[moduleImage][1]}
	})
	tc := h.create("exporting", infrav1.ApplyAutomatic, "", func(tc *infrav1.TerraformCluster) {
		tc.Spec.Image = exportsImage
		tc.Spec.Variables = []infrav1.Variable{{Name: "exports", Value: &apiextensionsv1.JSON{Raw: []byte(`{"zones": ["a", "b"], "network": "n-1"}`)}}}
	})
	published := func(reason string) func(*infrav1.TerraformCluster) bool {
		return func(tc *infrav1.TerraformCluster) bool {
			c := condition(tc, infrav1.ConditionExportsPublished)
			return ready(tc) && c != nil && c.Reason == reason && c.Status == map[bool]metav1.ConditionStatus{true: metav1.ConditionTrue, false: metav1.ConditionFalse}[reason == infrav1.ReasonExportsPublished]
		}
	}
	h.wait(tc, "the exports published", published(infrav1.ReasonExportsPublished))
	if got, want := string(tc.Status.Exports.Raw), `{"network":"n-1","zones":["a","b"]}`; got != want {
		t.Errorf("status.exports %s, want %s", got, want)
	}

	h.setVar(tc, "exports", `"not an object"`)
	h.wait(tc, "the exports unpublished", published(infrav1.ReasonExportsNotAnObject))
	if tc.Status.Exports != nil {
		t.Errorf("status.exports %s after the exports became a string", tc.Status.Exports.Raw)
	}
}
