package terraformcluster

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/captf/api/v1alpha1"
)

// Condition reasons of this controller beyond spec 001's.
const (
	ReasonApplied       = "Applied"
	ReasonApplying      = "Applying"
	ReasonPlanning      = "Planning"
	ReasonApplyFailed   = "ApplyFailed"
	ReasonPlanFailed    = "PlanFailed"
	ReasonInvalidInputs = "InvalidInputs"
	// ReasonImagePullFailed: the active Job's pod cannot pull an image.
	ReasonImagePullFailed = "ImagePullFailed"
	ReasonProvisioned     = "Provisioned"
	ReasonDestroying      = "Destroying"
	ReasonDestroyFailed   = "DestroyFailed"
	// ReasonDriftChecking: a drift Job runs (DriftJobSucceeded Unknown).
	ReasonDriftChecking = "DriftChecking"
)

// EventRetained: the object was deleted under deletionPolicy Retain.
const EventRetained = "Retained"

// unknown marks a condition Unknown in setCondition.
const unknown = 2

// setCondition sets a condition True (true), False (false) or Unknown
// (unknown) with the object's generation.
func setCondition[B bool | int](tc *infrav1.TerraformCluster, typ string, status B, reason, message string) {
	s := metav1.ConditionFalse
	switch v := any(status).(type) {
	case bool:
		if v {
			s = metav1.ConditionTrue
		}
	case int:
		s = metav1.ConditionUnknown
	}
	meta.SetStatusCondition(&tc.Status.Conditions, metav1.Condition{
		Type: typ, Status: s, Reason: reason, Message: message, ObservedGeneration: tc.Generation,
	})
}

// condition is tc's condition typ, nil when it has none.
func condition(tc *infrav1.TerraformCluster, typ string) *metav1.Condition {
	return meta.FindStatusCondition(tc.Status.Conditions, typ)
}

// setProvisioned records that the infrastructure is as the spec says.
func setProvisioned(tc *infrav1.TerraformCluster) {
	t := true
	tc.Status.Ready = true
	tc.Status.Initialization = &infrav1.Initialization{Provisioned: &t}
	setCondition(tc, infrav1.ConditionReady, true, ReasonProvisioned, "The last apply succeeded and nothing is due.")
	setCondition(tc, infrav1.ConditionApplyJobSucceeded, true, ReasonApplied, "The inputs are applied.")
}
