package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TerraformMachineSpec is what a TerraformMachine runs, and the provider
// ID the manager publishes.
// +kubebuilder:validation:XValidation:rule="!has(self.drift) || !has(self.drift.action) || self.drift.action != 'Remediate'",message="drift.action Remediate is not allowed on a machine: drift is reported, and Cluster API replaces a machine rather than patching it"
type TerraformMachineSpec struct {
	RunnerSpec `json:",inline"`

	// ProviderID is the machine's ID as the workload cluster's Node knows
	// it (spec.providerID of the Node): set by the manager, once, from the
	// module's output provider_id.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +optional
	ProviderID string `json:"providerID,omitempty"`
}

// MachineAddress is an address of a machine: the Cluster API contract's
// status.addresses entry, read from the module's output addresses.
type MachineAddress struct {
	// Type is Hostname, ExternalIP, InternalIP, ExternalDNS or
	// InternalDNS.
	// +kubebuilder:validation:Enum=Hostname;ExternalIP;InternalIP;ExternalDNS;InternalDNS
	Type string `json:"type"`
	// Address is the address itself.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Address string `json:"address"`
}

// TerraformMachineStatus is what the manager observed.
// +kubebuilder:validation:MinProperties=1
type TerraformMachineStatus struct {
	RunnerStatus `json:",inline"`

	// Addresses are the machine's addresses from the module's output
	// addresses after the last successful apply.
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Addresses []MachineAddress `json:"addresses,omitempty"`
	// FailureDomain is the failure domain the machine landed in, from the
	// module's output failure_domain.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +optional
	FailureDomain string `json:"failureDomain,omitempty"`
}

// TerraformMachine is a Cluster API infrastructure machine provisioned by
// a Terraform or OpenTofu root module in a runner Job. What defines it —
// its image, variables, variable sources and identity — cannot change
// after creation: a changed machine is a new Machine, as Cluster API rolls
// machines out.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tfm,categories=captf;cluster-api
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io="
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta1=v1alpha1"
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.metadata.labels['cluster\.x-k8s\.io/cluster-name']`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="ProviderID",type=string,JSONPath=`.spec.providerID`
// +kubebuilder:printcolumn:name="Job",type=string,JSONPath=`.status.activeJob.operation`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TerraformMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:validation:XValidation:rule="self.image == oldSelf.image",message="image is immutable: a changed machine is a new Machine"
	// +kubebuilder:validation:XValidation:rule="has(self.variables) == has(oldSelf.variables) && (!has(self.variables) || self.variables == oldSelf.variables)",message="variables are immutable: a changed machine is a new Machine"
	// +kubebuilder:validation:XValidation:rule="has(self.variablesFrom) == has(oldSelf.variablesFrom) && (!has(self.variablesFrom) || self.variablesFrom == oldSelf.variablesFrom)",message="variablesFrom is immutable: a changed machine is a new Machine"
	// +kubebuilder:validation:XValidation:rule="has(self.identityRef) == has(oldSelf.identityRef) && (!has(self.identityRef) || self.identityRef == oldSelf.identityRef)",message="identityRef is immutable: a changed machine is a new Machine"
	// +kubebuilder:validation:XValidation:rule="!has(oldSelf.providerID) || (has(self.providerID) && self.providerID == oldSelf.providerID)",message="providerID is set once"
	Spec TerraformMachineSpec `json:"spec"`
	// +optional
	Status TerraformMachineStatus `json:"status,omitempty"`
}

// TerraformMachineList is a list of TerraformMachines.
//
// +kubebuilder:object:root=true
type TerraformMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerraformMachine `json:"items"`
}

// TerraformMachineTemplateSpec holds the template.
type TerraformMachineTemplateSpec struct {
	Template TerraformMachineTemplateResource `json:"template"`
}

// TerraformMachineTemplateResource is what a MachineDeployment, a
// MachineSet or a KubeadmControlPlane stamps out for each Machine.
type TerraformMachineTemplateResource struct {
	// +optional
	ObjectMeta TemplateMeta `json:"metadata,omitempty"`
	// Spec is each machine's spec. It names no providerID: the manager
	// sets a machine's from that machine's own state, and Cluster API
	// binds a Node to the ID a Machine's infrastructure names.
	// +kubebuilder:validation:XValidation:rule="!has(self.providerID)",message="providerID is not allowed in a template: the manager sets each machine's from its own state"
	Spec TerraformMachineSpec `json:"spec"`
}

// TerraformMachineTemplate is a template for TerraformMachines. Its spec
// cannot change once it is created: a change is a new template that the
// MachineDeployment (or ClusterClass) is pointed at, and Cluster API rolls
// the machines out to it. The manager's webhook refuses a change of spec;
// it lets Cluster API's topology dry runs through, which a CEL rule could
// not.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=tfmt,categories=captf;cluster-api
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io="
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta1=v1alpha1"
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
type TerraformMachineTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec TerraformMachineTemplateSpec `json:"spec"`
}

// TerraformMachineTemplateList is a list of TerraformMachineTemplates.
//
// +kubebuilder:object:root=true
type TerraformMachineTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerraformMachineTemplate `json:"items"`
}

// GetRunnerSpec is the part of the spec the run engine reads.
func (m *TerraformMachine) GetRunnerSpec() *RunnerSpec { return &m.Spec.RunnerSpec }

// GetRunnerStatus is the part of the status the run engine writes.
func (m *TerraformMachine) GetRunnerStatus() *RunnerStatus { return &m.Status.RunnerStatus }
