package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Labels the manager puts on every TerraformPlan (spec 002, "Labels").
// Their keys and values are frozen for v1alpha1.
const (
	// LabelClusterName is Cluster API's label naming the cluster a plan
	// belongs to.
	LabelClusterName = "cluster.x-k8s.io/cluster-name"
	// LabelDestructive is "true" when the plan deletes or replaces a
	// resource, else "false".
	LabelDestructive = "captf.io/destructive"
	// LabelPlanPhase holds the plan's phase (a PlanPhase). Unlike
	// status.phase it moves with the plan through clusterctl move, so the
	// webhook reads it to tell a finished plan; only the manager may change
	// it.
	LabelPlanPhase = "captf.io/plan-phase"
	// LabelPlanReason holds spec.reason.
	LabelPlanReason = "captf.io/plan-reason"
)

// PlanPhase is where a TerraformPlan is in its life (spec 002, "Phases").
// +kubebuilder:validation:Enum=Pending;Approved;Applied;Superseded;Failed
type PlanPhase string

const (
	// PlanPending waits for an approval.
	PlanPending PlanPhase = "Pending"
	// PlanApproved is approved; its apply is due or running, and a failed
	// step or a deadline keeps it here while the apply is retried.
	PlanApproved PlanPhase = "Approved"
	// PlanApplied was applied: the apply planned exactly these changes.
	PlanApplied PlanPhase = "Applied"
	// PlanSuperseded was replaced by a newer plan or became moot.
	PlanSuperseded PlanPhase = "Superseded"
	// PlanFailed was approved, but the apply found other changes and
	// applied nothing.
	PlanFailed PlanPhase = "Failed"
)

// Terminal reports whether a plan in this phase is finished: it can no
// longer be approved.
func (p PlanPhase) Terminal() bool {
	return p == PlanApplied || p == PlanSuperseded || p == PlanFailed
}

// PlanReason is why a plan waits for an approval (spec 002, "Reasons").
// +kubebuilder:validation:Enum=Manual;Destructive;ExportsChange
type PlanReason string

const (
	// ReasonManual: the target's applyPolicy is Manual, so every change but
	// the first apply waits for an approval.
	ReasonManual PlanReason = "Manual"
	// ReasonDestructive: the applyPolicy is Automatic, but the plan deletes
	// or replaces a resource, which the destructive-plan guard stops.
	ReasonDestructive PlanReason = "Destructive"
	// ReasonExportsChange: a pool's plan after a change of its cluster's
	// exports; the approval binds spec.inputsHash (--allow-deletes-hash).
	ReasonExportsChange PlanReason = "ExportsChange"
)

// Condition types of a TerraformPlan (spec 002, "Conditions").
const (
	// ConditionApproved is True once the manager acted on spec.approved,
	// False while the plan waits or when an approval was ignored.
	ConditionApproved = "Approved"
	// ConditionApplied is True once the plan was applied, False when it
	// never will be (superseded, or the apply found other changes), Unknown
	// while it may still be.
	ConditionApplied = "Applied"
)

// Condition reasons of a TerraformPlan.
const (
	// ReasonAwaitingApproval: nobody approved the plan yet.
	ReasonAwaitingApproval = "AwaitingApproval"
	// ReasonApprovalAccepted: the approval was accepted; the apply is due.
	ReasonApprovalAccepted = "ApprovalAccepted"
	// ReasonApprovalIgnored: the approval landed on a plan that was already
	// superseded; the target's PlanSuperseded event names the current plan.
	ReasonApprovalIgnored = "ApprovalIgnored"
	// ReasonApplying: the approved apply is running or will be retried
	// after a failed step or a deadline.
	ReasonApplying = "Applying"
	// ReasonPlanApplied: the apply planned exactly these changes and
	// applied them.
	ReasonPlanApplied = "Applied"
	// ReasonPlanSuperseded: a newer plan replaced this one, or it became
	// moot.
	ReasonPlanSuperseded = "Superseded"
	// ReasonApplyPlanChanged: the apply found other changes than the
	// approved ones and applied nothing.
	ReasonApplyPlanChanged = "PlanChanged"
)

// EventPlanSuperseded is the warning event on the target that names its
// current plan when an approval was ignored.
const EventPlanSuperseded = "PlanSuperseded"

// PlanTargetReference names the TerraformCluster or TerraformMachinePool,
// in the plan's namespace, that the plan was made for.
type PlanTargetReference struct {
	// Kind is TerraformCluster or TerraformMachinePool.
	// +kubebuilder:validation:Enum=TerraformCluster;TerraformMachinePool
	Kind string `json:"kind"`
	// Name of the target.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// PlanSummary is what a plan changes: counts and addresses, never a value.
// +kubebuilder:validation:MinProperties=1
type PlanSummary struct {
	// Create counts the resources the plan creates.
	// +kubebuilder:validation:Minimum=0
	Create int32 `json:"create"`
	// Update counts the resources the plan updates in place.
	// +kubebuilder:validation:Minimum=0
	Update int32 `json:"update"`
	// Replace counts the resources the plan replaces (deletes and creates).
	// +kubebuilder:validation:Minimum=0
	Replace int32 `json:"replace"`
	// Delete counts the resources the plan deletes.
	// +kubebuilder:validation:Minimum=0
	Delete int32 `json:"delete"`
	// OutputChanges counts the outputs that change, where any do.
	// +kubebuilder:validation:Minimum=0
	// +optional
	OutputChanges int32 `json:"outputChanges,omitempty"`
	// Resources are up to 50 entries "<address> (<labels>)", sorted by
	// address, as in status.plan.resources of the target.
	// +kubebuilder:validation:MaxItems=50
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=1024
	// +listType=atomic
	// +optional
	Resources []string `json:"resources,omitempty"`
}

// Destructive reports whether the plan deletes or replaces a resource.
func (s PlanSummary) Destructive() bool {
	return s.Delete > 0 || s.Replace > 0
}

// TerraformPlanSpec is one plan. The manager writes every field but
// approved and approvedBy when it creates the plan; none of them changes
// afterwards. A person approves by setting approved and approvedBy.
//
// +kubebuilder:validation:XValidation:rule="has(self.approvedBy) == (has(self.approved) && self.approved)",message="approvedBy is required exactly when approved is true"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.approved) || !oldSelf.approved || (has(self.approved) && self.approved && has(self.approvedBy) && self.approvedBy == oldSelf.approvedBy)",message="an approval can be neither withdrawn nor changed"
type TerraformPlanSpec struct {
	// TargetRef names the object the plan was made for.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="targetRef is immutable"
	TargetRef PlanTargetReference `json:"targetRef"`

	// PlanHash is the p2: hash of the plan: its keyed fingerprint of every
	// address, action and touched value; the apply runs with --expect-plan
	// set to it.
	// +kubebuilder:validation:Pattern=`^p2:[0-9a-f]{64}$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="planHash is immutable"
	PlanHash string `json:"planHash"`

	// InputsHash is the h2: hash of the inputs the plan was made for.
	// +kubebuilder:validation:Pattern=`^h2:[0-9a-f]{64}$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="inputsHash is immutable"
	InputsHash string `json:"inputsHash"`

	// Reason is why the plan waits for an approval.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="reason is immutable"
	Reason PlanReason `json:"reason"`

	// Summary is what the plan changes.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="summary is immutable"
	Summary PlanSummary `json:"summary"`

	// Approved approves the plan. It can change only from unset or false to
	// true, and never back.
	// +optional
	Approved bool `json:"approved,omitempty"`

	// ApprovedBy is the username of whoever set approved; the webhook
	// checks it against the request. Required exactly when approved is
	// true.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +optional
	ApprovedBy string `json:"approvedBy,omitempty"`
}

// TerraformPlanStatus is what the manager observed. You do not write it.
// +kubebuilder:validation:MinProperties=1
type TerraformPlanStatus struct {
	// Phase is Pending, Approved, Applied, Superseded or Failed; the label
	// captf.io/plan-phase holds the same value.
	// +optional
	Phase PlanPhase `json:"phase,omitempty"`

	// ObservedGeneration is the generation the status reflects.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions are Approved and Applied, each with its
	// observedGeneration.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// TerraformPlan is one plan that the manager made for a target and that
// waits for an approval before it is applied. It never carries
// a value, only addresses, actions, counts and keyed hashes.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tfplan,categories=captf
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io="
// +kubebuilder:selectablefield:JSONPath=`.spec.targetRef.name`
// +kubebuilder:selectablefield:JSONPath=`.spec.targetRef.kind`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.spec.targetRef.name`
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.spec.targetRef.kind`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.spec.reason`
// +kubebuilder:printcolumn:name="Create",type=integer,JSONPath=`.spec.summary.create`
// +kubebuilder:printcolumn:name="Update",type=integer,JSONPath=`.spec.summary.update`
// +kubebuilder:printcolumn:name="Replace",type=integer,JSONPath=`.spec.summary.replace`
// +kubebuilder:printcolumn:name="Delete",type=integer,JSONPath=`.spec.summary.delete`
// +kubebuilder:printcolumn:name="Approved-By",type=string,JSONPath=`.spec.approvedBy`,priority=1
// +kubebuilder:printcolumn:name="Plan",type=string,JSONPath=`.spec.planHash`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TerraformPlan struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec TerraformPlanSpec `json:"spec"`
	// +optional
	Status TerraformPlanStatus `json:"status,omitempty"`
}

// TerraformPlanList is a list of TerraformPlans.
//
// +kubebuilder:object:root=true
type TerraformPlanList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerraformPlan `json:"items"`
}

func init() {
	schemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &TerraformPlan{}, &TerraformPlanList{})
		return nil
	})
}
