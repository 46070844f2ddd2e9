package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// InfrastructureMachineKindPool is the kind a TerraformMachinePool names
// in status.infrastructureMachineKind: Cluster API's MachinePool
// controller makes a Machine for each object of it that carries the
// pool's labels.
const InfrastructureMachineKindPool = "TerraformMachinePoolMachine"

// TerraformMachinePoolMachineSpec is one member of a TerraformMachinePool.
type TerraformMachinePoolMachineSpec struct {
	// ProviderID is the member's provider ID, as its Node knows it: one
	// entry of its pool's spec.providerIDList, set by the manager when it
	// makes the object; it never changes.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="providerID never changes"
	ProviderID string `json:"providerID"`
}

// TerraformMachinePoolMachineStatus is what the manager reports of a
// member for Cluster API.
type TerraformMachinePoolMachineStatus struct {
	// Ready is the Cluster API v1beta1 contract's flag: the member is in
	// its pool's state.
	// +optional
	Ready bool `json:"ready,omitempty"`
	// Initialization is the Cluster API v1beta2 contract's equivalent.
	// +optional
	Initialization *Initialization `json:"initialization,omitempty"`
	// Conditions: Ready.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// TerraformMachinePoolMachine is one member of a TerraformMachinePool, as
// an infrastructure machine of Cluster API: the manager makes one for each
// provider ID of the pool's state, so that Cluster API's MachinePool
// controller makes a Machine for it (health checks, drain, kubectl get
// machines). It runs no Jobs and holds no state: the pool's module makes
// and removes members. Deleting one asks the pool to remove that member
// (captf_remove_members), through the pool's plan and approval.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tfmpm,categories=captf;cluster-api
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io="
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta1=v1alpha1"
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.metadata.labels['cluster\.x-k8s\.io/cluster-name']`
// +kubebuilder:printcolumn:name="Pool",type=string,JSONPath=`.metadata.labels['cluster\.x-k8s\.io/pool-name']`
// +kubebuilder:printcolumn:name="Provider ID",type=string,JSONPath=`.spec.providerID`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TerraformMachinePoolMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec TerraformMachinePoolMachineSpec `json:"spec"`
	// +optional
	Status TerraformMachinePoolMachineStatus `json:"status,omitempty"`
}

// TerraformMachinePoolMachineList is a list of TerraformMachinePoolMachines.
//
// +kubebuilder:object:root=true
type TerraformMachinePoolMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerraformMachinePoolMachine `json:"items"`
}
