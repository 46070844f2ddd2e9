package engine

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
)

// Object is an API object the run engine reconciles: any kind whose spec
// embeds infrav1.RunnerSpec and whose status embeds infrav1.RunnerStatus.
type Object interface {
	client.Object
	GetRunnerSpec() *infrav1.RunnerSpec
	GetRunnerStatus() *infrav1.RunnerStatus
}

// annotate sets an annotation of obj, making the map when it has none.
func annotate(obj client.Object, key, value string) {
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[key] = value
	obj.SetAnnotations(a)
}
