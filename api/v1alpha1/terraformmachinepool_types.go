package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TerraformMachinePoolSpec is what a TerraformMachinePool runs, and what
// the manager publishes of the pool: its own ID and its members' IDs.
type TerraformMachinePoolSpec struct {
	RunnerSpec `json:",inline"`

	// ProviderID is the pool's own ID (an autoscaling group, a managed
	// node group, a scale set), from the module's output provider_id: set
	// by the manager, once. Cluster API does not read it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +optional
	ProviderID string `json:"providerID,omitempty"`

	// ProviderIDList are the provider IDs of the pool's members, as their
	// Nodes know them: kept current by the manager from the module's
	// output provider_ids, after every apply and at each membership
	// refresh. Cluster API deletes the Node of an ID that leaves it.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10000
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=512
	// +optional
	ProviderIDList []string `json:"providerIDList,omitempty"`

	// Membership is how often the pool's members are read again: they
	// change outside any apply (an autoscaler, a replaced instance).
	// +optional
	Membership MembershipSpec `json:"membership,omitempty,omitzero"`
}

// MembershipSpec is how a pool's members are kept current.
type MembershipSpec struct {
	// IntervalSeconds is the time between two membership refreshes of a
	// provisioned pool right after an apply, after a refresh that found
	// the members changed, and while the owner MachinePool's replicas
	// differ from the members. Unset: 60.
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=86400
	// +optional
	IntervalSeconds *int32 `json:"intervalSeconds,omitempty"`

	// MaxIntervalSeconds is the longest time between two membership
	// refreshes: while the members stay as they are, the time between
	// two refreshes grows with how long they have (it doubles each time)
	// up to this. Unset: 600, or intervalSeconds if that is longer.
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=86400
	// +optional
	MaxIntervalSeconds *int32 `json:"maxIntervalSeconds,omitempty"`
}

// TerraformMachinePoolStatus is what the manager observed.
// +kubebuilder:validation:MinProperties=1
type TerraformMachinePoolStatus struct {
	RunnerStatus `json:",inline"`

	// Replicas is the number of members the pool had at its last
	// membership read (the length of spec.providerIDList).
	// +optional
	Replicas int32 `json:"replicas"`

	// LastMembershipRefresh is when the last membership refresh Job
	// finished, whether it succeeded or not.
	// +optional
	LastMembershipRefresh *metav1.Time `json:"lastMembershipRefresh,omitempty"`

	// MembershipChangedAt is when the manager last read members of the
	// pool's state that differ from those it had published.
	// +optional
	MembershipChangedAt *metav1.Time `json:"membershipChangedAt,omitempty"`

	// InfrastructureMachineKind is TerraformMachinePoolMachine once the
	// pool is provisioned: the manager makes one such object for each of
	// its members, and Cluster API's MachinePool controller a Machine for
	// each of those.
	// +optional
	InfrastructureMachineKind string `json:"infrastructureMachineKind,omitempty"`

	// ReplacedMembers are the UIDs of the member objects whose members
	// the last apply replaced, as its state records: their objects are
	// then let go, and their Machines' deletion finishes.
	// +optional
	// +kubebuilder:validation:MaxItems=10000
	// +listType=set
	ReplacedMembers []string `json:"replacedMembers,omitempty"`
}

// TerraformMachinePool is a Cluster API infrastructure machine pool: one
// root module that runs many nodes, provisioned by Terraform or OpenTofu
// in a runner Job. Unlike a machine it changes in place: new inputs are
// planned and applied (under applyPolicy Manual, approved as a
// TerraformPlan).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tfmp,categories=captf;cluster-api
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io="
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta1=v1alpha1"
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.metadata.labels['cluster\.x-k8s\.io/cluster-name']`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.status.replicas`
// +kubebuilder:printcolumn:name="Job",type=string,JSONPath=`.status.activeJob.operation`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TerraformMachinePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:validation:XValidation:rule="!has(oldSelf.providerID) || (has(self.providerID) && self.providerID == oldSelf.providerID)",message="providerID is set once"
	Spec TerraformMachinePoolSpec `json:"spec"`
	// +optional
	Status TerraformMachinePoolStatus `json:"status,omitempty"`
}

// TerraformMachinePoolList is a list of TerraformMachinePools.
//
// +kubebuilder:object:root=true
type TerraformMachinePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerraformMachinePool `json:"items"`
}

// TerraformMachinePoolTemplateSpec holds the template.
type TerraformMachinePoolTemplateSpec struct {
	Template TerraformMachinePoolTemplateResource `json:"template"`
}

// TerraformMachinePoolTemplateResource is what a ClusterClass stamps out
// for each MachinePool.
type TerraformMachinePoolTemplateResource struct {
	// +optional
	ObjectMeta TemplateMeta `json:"metadata,omitempty"`
	// Spec is each pool's spec. It names no providerID nor
	// providerIDList: the manager sets a pool's from that pool's own
	// state, and Cluster API binds a Node to an ID of a MachinePool's
	// infrastructure list.
	// +kubebuilder:validation:XValidation:rule="!has(self.providerID) && !has(self.providerIDList)",message="providerID and providerIDList are not allowed in a template: the manager sets each pool's from its own state"
	Spec TerraformMachinePoolSpec `json:"spec"`
}

// TerraformMachinePoolTemplate is a template for TerraformMachinePools,
// for ClusterClass. Its spec cannot change once it is created: a change
// is a new template. The manager's webhook refuses a change of spec; it
// lets Cluster API's topology dry runs through, which a CEL rule could
// not.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=tfmpt,categories=captf;cluster-api
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io="
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta1=v1alpha1"
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
type TerraformMachinePoolTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec TerraformMachinePoolTemplateSpec `json:"spec"`
}

// TerraformMachinePoolTemplateList is a list of
// TerraformMachinePoolTemplates.
//
// +kubebuilder:object:root=true
type TerraformMachinePoolTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerraformMachinePoolTemplate `json:"items"`
}

// GetRunnerSpec is the part of the spec the run engine reads.
func (p *TerraformMachinePool) GetRunnerSpec() *RunnerSpec { return &p.Spec.RunnerSpec }

// GetRunnerStatus is the part of the status the run engine writes.
func (p *TerraformMachinePool) GetRunnerStatus() *RunnerStatus { return &p.Status.RunnerStatus }
