package v1alpha1

import (
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
	// Ready is the Cluster API v1beta1 contract's flag: the infrastructure
	// is provisioned.
	// +optional
	Ready bool `json:"ready,omitempty"`
	// Initialization is the Cluster API v1beta2 contract's equivalent.
	// +optional
	Initialization *Initialization `json:"initialization,omitempty"`
	// FailureDomains are the failure domains the module's output
	// failure_domains names after the last successful apply; Cluster API
	// spreads machines over them.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	// +optional
	FailureDomains []FailureDomain `json:"failureDomains,omitempty"`
	// Plan is the plan that waits for approval under applyPolicy Manual.
	// +optional
	Plan *PlanStatus `json:"plan,omitempty"`
	// PendingPlanRef names the live TerraformPlan: the plan that waits for
	// an approval or whose approved apply is due.
	// +optional
	PendingPlanRef *PlanReference `json:"pendingPlanRef,omitempty"`
	// ActiveJob is the runner Job in progress.
	// +optional
	ActiveJob *ActiveJob `json:"activeJob,omitempty"`
	// LastRun is the outcome of the last finished runner Job.
	// +optional
	LastRun *RunStatus `json:"lastRun,omitempty"`
	// Failures counts the runs that failed since the last successful apply;
	// while it is not zero an apply is due, after a backoff that doubles
	// with each failure. A plan that moved is not a failure.
	// +optional
	Failures int32 `json:"failures,omitempty"`
	// LastDriftCheck is when the last drift check finished, whatever it
	// found; the next is due spec.drift.intervalSeconds later.
	// +optional
	LastDriftCheck *metav1.Time `json:"lastDriftCheck,omitempty"`
	// StateBackups are the backups of the terraform state the manager
	// keeps, newest first: one Secret per state serial.
	// +kubebuilder:validation:MaxItems=100
	// +optional
	StateBackups []StateBackup `json:"stateBackups,omitempty"`
	// StateSerial is the serial of the terraform state the manager last
	// read and backed up (or found too large to back up).
	// +optional
	StateSerial *int64 `json:"stateSerial,omitempty"`
	// LastRestoredSerial is the serial the last restore Job pushed back,
	// whatever its outcome: a restore of the same serial does not run
	// again until captf.io/restore-state is removed and set again.
	// +optional
	LastRestoredSerial *int64 `json:"lastRestoredSerial,omitempty"`
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
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
