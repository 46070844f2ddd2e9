package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RunnerSpec says what a runner Job runs and how: the module image, its
// variables, the credentials identity, the apply policy and Job settings.
// TerraformCluster and TerraformClusterTemplate share it.
// +kubebuilder:validation:XValidation:rule="!has(self.variables) || self.variables.all(v, self.variables.exists_one(w, w.name == v.name))",message="variable names must be unique"
type RunnerSpec struct {
	// Image is the module image: it bundles the root module at
	// /captf/module and the terraform or tofu binary at /captf/runtime.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image"`

	// Variables are the root module's input variables, inline or each from a
	// key of a ConfigMap or Secret.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=256
	// +optional
	Variables []Variable `json:"variables,omitempty"`

	// VariablesFrom adds every key of the ConfigMaps and Secrets whose labels
	// match as a variable (the value is a JSON document or, failing that, a
	// string). Inline variables win over these.
	// +kubebuilder:validation:MaxItems=16
	// +optional
	VariablesFrom []VariablesSource `json:"variablesFrom,omitempty"`

	// Identity names the credentials the module runs with.
	// +optional
	Identity *IdentityReference `json:"identity,omitempty"`

	// ApplyPolicy is Automatic (every change applies when due) or Manual
	// (every change but the first apply waits for an approved plan hash).
	// +kubebuilder:default=Automatic
	// +optional
	ApplyPolicy ApplyPolicy `json:"applyPolicy,omitempty"`

	// Job sets the runner Jobs' service account, deadline and resources.
	// +optional
	Job JobSettings `json:"job,omitempty"`
}

// Variable is one input variable of the root module: its name and exactly
// one of value and valueFrom. (value holds any JSON, which CEL cannot
// name, so the rule is a count of properties.)
// +kubebuilder:validation:MinProperties=2
// +kubebuilder:validation:MaxProperties=2
type Variable struct {
	// Name is the variable's name in the root module.
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_-]*$`
	// +kubebuilder:validation:MaxLength=128
	Name string `json:"name"`

	// Value is the variable's value as JSON: a string, number, bool, list or
	// object.
	// +optional
	Value *apiextensionsv1.JSON `json:"value,omitempty"`

	// ValueFrom reads the value from a key of a ConfigMap or Secret in the
	// object's namespace.
	// +optional
	ValueFrom *VariableSource `json:"valueFrom,omitempty"`
}

// VariableSource is one key of a ConfigMap or a Secret.
// +kubebuilder:validation:XValidation:rule="has(self.configMapKeyRef) != has(self.secretKeyRef)",message="exactly one of configMapKeyRef and secretKeyRef is required"
type VariableSource struct {
	// +optional
	ConfigMapKeyRef *corev1.ConfigMapKeySelector `json:"configMapKeyRef,omitempty"`
	// +optional
	SecretKeyRef *corev1.SecretKeySelector `json:"secretKeyRef,omitempty"`
}

// VariablesSource selects ConfigMaps or Secrets by label.
type VariablesSource struct {
	// Kind is ConfigMap or Secret.
	// +kubebuilder:validation:Enum=ConfigMap;Secret
	Kind string `json:"kind"`
	// Selector matches the labels of the objects to read.
	Selector metav1.LabelSelector `json:"selector"`
}

// IdentityReference names the credentials identity.
type IdentityReference struct {
	// Kind of the identity object, for example Secret.
	// +kubebuilder:validation:MinLength=1
	Kind string `json:"kind"`
	// Name of the identity object.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// JobSettings are the settings of every runner Job.
type JobSettings struct {
	// ServiceAccountName runs the Job's pod.
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// ActiveDeadlineSeconds bounds one run.
	// +kubebuilder:validation:Minimum=60
	// +kubebuilder:default=3600
	// +optional
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`
	// Resources of the runner container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
	// SuccessfulJobsHistoryLimit is how many finished Jobs that succeeded
	// the manager keeps (with their pods and logs); older ones are deleted.
	// The plan Job of the plan that waits for approval is always kept, as
	// its log is where a reviewer reads the planned values.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=3
	// +optional
	SuccessfulJobsHistoryLimit *int32 `json:"successfulJobsHistoryLimit,omitempty"`
	// FailedJobsHistoryLimit is how many finished Jobs that failed the
	// manager keeps.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=3
	// +optional
	FailedJobsHistoryLimit *int32 `json:"failedJobsHistoryLimit,omitempty"`
}

// PlanStatus is a plan that waits for approval (spec 001, "What
// status.plan holds"). It never holds a value.
type PlanStatus struct {
	// InputsHash is the h2: inputs hash the plan was made for.
	InputsHash string `json:"inputsHash"`
	// Job is the plan Job.
	Job string `json:"job"`
	// PlanHash is the p2: hash to approve.
	PlanHash string `json:"planHash"`
	// Add, Change and Destroy count the planned resource changes; a
	// replacement counts as one add and one destroy.
	Add     int32 `json:"add"`
	Change  int32 `json:"change"`
	Destroy int32 `json:"destroy"`
	// OutputChanges counts the outputs that change.
	OutputChanges int32 `json:"outputChanges"`
	// Resources are up to 50 entries "<address> (<labels>)", sorted.
	// +kubebuilder:validation:MaxItems=50
	// +optional
	Resources []string `json:"resources,omitempty"`
	// Truncated is set when more than 50 resources changed.
	// +optional
	Truncated bool `json:"truncated,omitempty"`
	// CreatedAt is when the manager recorded the plan.
	CreatedAt metav1.Time `json:"createdAt"`
	// ImageDigest is the digest of the module image the plan Job ran, as
	// its pod reported it; the approved apply runs on exactly that digest.
	// Empty when the node reported none.
	// +optional
	ImageDigest string `json:"imageDigest,omitempty"`
}

// ActiveJob is the runner Job in progress.
type ActiveJob struct {
	Name      string    `json:"name"`
	Operation Operation `json:"operation"`
}

// RunStatus is the outcome of the last finished runner Job.
type RunStatus struct {
	Job       string    `json:"job"`
	Operation Operation `json:"operation"`
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
	Succeeded  bool         `json:"succeeded"`
	// Error says why the run did not succeed.
	// +optional
	Error *RunError `json:"error,omitempty"`
}

// RunError is why a run did not succeed, without a value.
type RunError struct {
	// Kind is a stable word: plan-changed, bad-input, failed, deadline.
	Kind string `json:"kind"`
	// +optional
	Message string `json:"message,omitempty"`
}
