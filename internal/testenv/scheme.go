package testenv

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/captf/captf/api/v1alpha1"
)

func runtimeScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := infrav1.AddToScheme(s); err != nil {
		return nil, err
	}
	// Cluster API's Clusters and Machines, where its CRDs are installed.
	if err := clusterv1.AddToScheme(s); err != nil {
		return nil, err
	}
	// Tests read CRDs (their labels, their schemas) too.
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// Scheme is the scheme of Env.Client: Kubernetes', captf's, Cluster API's
// core kinds and CRDs.
func Scheme() (*runtime.Scheme, error) { return runtimeScheme() }
