package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/captf/api/v1alpha1"
)

func TestReadsIndex(t *testing.T) {
	secret := func(name string) infrav1.Variable {
		return infrav1.Variable{Name: "s-" + name, ValueFrom: &infrav1.VariableSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: "k"}}}
	}
	configMap := func(name string) infrav1.Variable {
		return infrav1.Variable{Name: "c-" + name, ValueFrom: &infrav1.VariableSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: "k"}}}
	}
	inline := infrav1.Variable{Name: "size", Value: &apiextensionsv1.JSON{Raw: []byte(`"small"`)}}
	selector := func(kind string) infrav1.VariablesSource {
		return infrav1.VariablesSource{Kind: kind, Selector: metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}}
	}
	tests := []struct {
		reason string
		vars   []infrav1.Variable
		from   []infrav1.VariablesSource
		id     *infrav1.IdentityReference
		want   []string
	}{
		{"inline values read no source", []infrav1.Variable{inline}, nil, nil, []string{}},
		{"valueFrom by kind and name", []infrav1.Variable{inline, secret("token"), configMap("sizes")}, nil, nil, []string{"ConfigMap/sizes", "Secret/token"}},
		{"one key per source, read twice", []infrav1.Variable{secret("token"), secret("token")}, nil, nil, []string{"Secret/token"}},
		{"a selector may match any name of its kind", nil, []infrav1.VariablesSource{selector("Secret"), selector("ConfigMap"), selector("Secret")}, nil, []string{"ConfigMap/*", "Secret/*"}},
		{"both", []infrav1.Variable{configMap("sizes")}, []infrav1.VariablesSource{selector("Secret")}, nil, []string{"ConfigMap/sizes", "Secret/*"}},
		{"an identity of kind Secret by name", nil, nil, &infrav1.IdentityReference{Kind: infrav1.IdentityKindSecret, Name: "cloud"}, []string{"Secret/cloud"}},
		{"a TerraformClusterIdentity by name, and as any", []infrav1.Variable{secret("token")}, nil, &infrav1.IdentityReference{Kind: infrav1.IdentityKindTerraformClusterIdentity, Name: "shared"},
			[]string{"Secret/token", "TerraformClusterIdentity/*", "TerraformClusterIdentity/shared"}},
	}
	for _, tt := range tests {
		t.Run(tt.reason, func(t *testing.T) {
			tc := &infrav1.TerraformCluster{Spec: infrav1.TerraformClusterSpec{RunnerSpec: infrav1.RunnerSpec{Variables: tt.vars, VariablesFrom: tt.from, IdentityRef: tt.id}}}
			if diff := cmp.Diff(tt.want, readsIndex(tc)); diff != "" {
				t.Errorf("readsIndex (-want +got):\n%s", diff)
			}
		})
	}
	if got := readsIndex(&corev1.Secret{}); got != nil {
		t.Errorf("readsIndex of a Secret: %v, want nil", got)
	}
}
