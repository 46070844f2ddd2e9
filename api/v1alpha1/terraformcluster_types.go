package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// APIEndpoint is where the workload cluster's API server answers: the
// Cluster API infrastructure contract's spec.controlPlaneEndpoint.
type APIEndpoint struct {
	// +optional
	Host string `json:"host,omitempty"`
	// +optional
	Port int32 `json:"port,omitempty"`
}

// TerraformClusterSpec is what a TerraformCluster runs.
type TerraformClusterSpec struct {
	RunnerSpec `json:",inline"`

	// ControlPlaneEndpoint is set by the manager from the module's outputs
	// control_plane_endpoint_host and control_plane_endpoint_port.
	// +optional
	ControlPlaneEndpoint APIEndpoint `json:"controlPlaneEndpoint,omitempty"`
}

// PlanReference names a TerraformPlan in the object's namespace.
type PlanReference struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// Initialization is the Cluster API contract's provisioning status.
type Initialization struct {
	// Provisioned is true once the first apply succeeded.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// FailureDomain is a place where the workload cluster's machines can run
// apart from others (a zone, a rack): the Cluster API v1beta2 contract's
// status.failureDomains entry, read from the module's output
// failure_domains.
type FailureDomain struct {
	// Name is the failure domain's name, as the machines' providers know it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`
	// ControlPlane says whether control plane machines may run there.
	// +optional
	ControlPlane *bool `json:"controlPlane,omitempty"`
	// Attributes are free-form facts about the failure domain.
	// +optional
	Attributes map[string]string `json:"attributes,omitempty"`
}

// TerraformClusterStatus is what the manager observed.
// +kubebuilder:validation:MinProperties=1
type TerraformClusterStatus struct {
	RunnerStatus `json:",inline"`

	// FailureDomains are the failure domains the module's output
	// failure_domains names after the last successful apply; Cluster API
	// spreads machines over them.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	// +optional
	FailureDomains []FailureDomain `json:"failureDomains,omitempty"`
	// Exports is the module's exports output as the state holds it after
	// the last apply (an object, canonical JSON), what the cluster's
	// machines and pools read; unset when the module declares none or it
	// cannot be published (the condition ExportsPublished says why).
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	// +optional
	Exports *apiextensionsv1.JSON `json:"exports,omitempty"`
}

// StateBackup is one backup of the terraform state, kept in the Secret
// captf-state-backup-<suffix>-<serial>.
type StateBackup struct {
	// Serial is the state's serial.
	Serial int64 `json:"serial"`
	// Time is when the backup was taken.
	Time metav1.Time `json:"time"`
	// Bytes is the size of the state as the backend stores it
	// (compressed).
	Bytes int64 `json:"bytes"`
}

// TerraformCluster is a Cluster API infrastructure cluster provisioned by a
// Terraform or OpenTofu root module in a runner Job.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tfc,categories=captf;cluster-api
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io="
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta1=v1alpha1"
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Policy",type=string,JSONPath=`.spec.applyPolicy`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Plan",type=string,JSONPath=`.status.plan.planHash`,priority=1
// +kubebuilder:printcolumn:name="Job",type=string,JSONPath=`.status.activeJob.operation`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TerraformCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec TerraformClusterSpec `json:"spec"`
	// +optional
	Status TerraformClusterStatus `json:"status,omitempty"`
}

// TerraformClusterList is a list of TerraformClusters.
//
// +kubebuilder:object:root=true
type TerraformClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerraformCluster `json:"items"`
}

// TerraformClusterTemplateSpec holds the template.
type TerraformClusterTemplateSpec struct {
	Template TerraformClusterTemplateResource `json:"template"`
}

// TerraformClusterTemplateResource is what a ClusterClass stamps out.
type TerraformClusterTemplateResource struct {
	// +optional
	ObjectMeta TemplateMeta         `json:"metadata,omitempty"`
	Spec       TerraformClusterSpec `json:"spec"`
}

// TemplateMeta is the metadata a template carries to the objects it makes.
type TemplateMeta struct {
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// TerraformClusterTemplate is a template for TerraformClusters, for
// Cluster API's ClusterClass.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=tfct,categories=captf;cluster-api
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io="
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta1=v1alpha1"
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
type TerraformClusterTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec TerraformClusterTemplateSpec `json:"spec"`
}

// TerraformClusterTemplateList is a list of TerraformClusterTemplates.
//
// +kubebuilder:object:root=true
type TerraformClusterTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerraformClusterTemplate `json:"items"`
}

// GetRunnerSpec is the part of the spec the run engine reads.
func (c *TerraformCluster) GetRunnerSpec() *RunnerSpec { return &c.Spec.RunnerSpec }

// GetRunnerStatus is the part of the status the run engine writes.
func (c *TerraformCluster) GetRunnerStatus() *RunnerStatus { return &c.Status.RunnerStatus }
