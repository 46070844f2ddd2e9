package engine

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/runner"
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
func setCondition[B bool | int](obj Object, typ string, status B, reason, message string) {
	s := metav1.ConditionFalse
	switch v := any(status).(type) {
	case bool:
		if v {
			s = metav1.ConditionTrue
		}
	case int:
		s = metav1.ConditionUnknown
	}
	meta.SetStatusCondition(&obj.GetRunnerStatus().Conditions, metav1.Condition{
		Type: typ, Status: s, Reason: reason, Message: message, ObservedGeneration: obj.GetGeneration(),
	})
}

// condition is obj's condition typ, nil when it has none.
func condition(obj Object, typ string) *metav1.Condition {
	return meta.FindStatusCondition(obj.GetRunnerStatus().Conditions, typ)
}

// setProvisioned records that the infrastructure is as the spec says.
func setProvisioned(obj Object) {
	t := true
	obj.GetRunnerStatus().Ready = true
	obj.GetRunnerStatus().Initialization = &infrav1.Initialization{Provisioned: &t}
	if h := condition(obj, infrav1.ConditionInfrastructureHealthy); h != nil && h.Status == metav1.ConditionFalse {
		setCondition(obj, infrav1.ConditionReady, false, infrav1.ReasonUnhealthy, unhealthy)
	} else {
		setCondition(obj, infrav1.ConditionReady, true, ReasonProvisioned, "The last apply succeeded and nothing is due.")
	}
	setCondition(obj, infrav1.ConditionApplyJobSucceeded, true, ReasonApplied, appliedMessage)
}

// appliedMessage is ApplyJobSucceeded's message once the inputs are
// applied.
const appliedMessage = "The inputs are applied."

// IsProvisioned reports whether obj's first apply succeeded
// (status.initialization.provisioned).
func IsProvisioned(obj Object) bool {
	i := obj.GetRunnerStatus().Initialization
	return i != nil && i.Provisioned != nil && *i.Provisioned
}

// unhealthy is Ready's message while the health output says failed.
const unhealthy = "Provisioned, but the module's health output says failed."

// setHealth records the state word of the module's health output
// (runner.Health*) in InfrastructureHealthy; "" (the module has none)
// removes the condition. Once provisioned, failed health makes Ready False.
func setHealth(obj Object, state string) {
	const from = "The module's health output says "
	switch state {
	case "":
		meta.RemoveStatusCondition(&obj.GetRunnerStatus().Conditions, infrav1.ConditionInfrastructureHealthy)
	case runner.HealthRunning:
		setCondition(obj, infrav1.ConditionInfrastructureHealthy, true, infrav1.ReasonHealthy, from+"running.")
	case runner.HealthFailed:
		setCondition(obj, infrav1.ConditionInfrastructureHealthy, false, infrav1.ReasonUnhealthy, from+"failed.")
	case runner.HealthPending:
		setCondition(obj, infrav1.ConditionInfrastructureHealthy, unknown, infrav1.ReasonProvisioning, from+"pending; it is sampled again after 30 s, then less often, up to every 5 minutes.")
	default:
		setCondition(obj, infrav1.ConditionInfrastructureHealthy, unknown, infrav1.ReasonHealthUnknown,
			from+"unknown, or holds no known state word (running, pending, failed), or is sensitive.")
	}
	healthReady(obj)
}

// healthReady makes Ready follow the health of provisioned infrastructure:
// False while it is failed, back to True when it is no longer.
func healthReady(obj Object) {
	if !IsProvisioned(obj) {
		return
	}
	h, ready := condition(obj, infrav1.ConditionInfrastructureHealthy), condition(obj, infrav1.ConditionReady)
	switch {
	case h != nil && h.Status == metav1.ConditionFalse:
		setCondition(obj, infrav1.ConditionReady, false, infrav1.ReasonUnhealthy, unhealthy)
	case ready != nil && ready.Reason == infrav1.ReasonUnhealthy:
		setCondition(obj, infrav1.ConditionReady, true, ReasonProvisioned, "Provisioned, and the module's health output no longer says failed.")
	}
}
