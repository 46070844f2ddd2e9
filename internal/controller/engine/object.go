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

// AnnotationBlockMove holds clusterctl move, once it paused the Cluster,
// until the annotation is gone from every object it discovered
// (clusterctlv1.BlockMoveAnnotation); clusterctl v1.14 gives up after a
// few minutes of waiting (an exponential backoff of ten steps from 5 s).
const AnnotationBlockMove = "clusterctl.cluster.x-k8s.io/block-move"

// blockMoveValue is the value of AnnotationBlockMove this object sets.
func blockMoveValue(obj Object) string {
	return "a runner Job of " + string(obj.GetUID()) + " runs"
}

// foreignBlockMove reports whether obj carries AnnotationBlockMove that it
// did not set itself: it was copied (by clusterctl move) while a Job of
// the object it was copied from ran. That Job is gone with the source.
func foreignBlockMove(obj Object) bool {
	v, ok := obj.GetAnnotations()[AnnotationBlockMove]
	return ok && v != blockMoveValue(obj)
}

// movedMidRun reports whether a run of obj was cut short by a move: it
// arrived with another object's AnnotationBlockMove, which the manager
// keeps as infrav1.AnnotationMovedMidRun once it removes the former. The
// run may have created infrastructure whose state did not move.
func movedMidRun(obj Object) bool {
	_, marked := obj.GetAnnotations()[infrav1.AnnotationMovedMidRun]
	return marked || foreignBlockMove(obj)
}

// ClusterName is the Cluster API cluster obj belongs to, its own name when
// it has no cluster-name label: the label its TerraformPlans carry.
func ClusterName(obj Object) string {
	if c := obj.GetLabels()[infrav1.LabelClusterName]; c != "" {
		return c
	}
	return obj.GetName()
}

// Interrupted reports whether obj's last apply ended without a report.
func Interrupted(obj Object) bool {
	_, ok := obj.GetAnnotations()[infrav1.AnnotationInterruptedApply]
	return ok
}
