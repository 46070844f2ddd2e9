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

	// IdentityRef names the credentials the module runs with: a Secret in
	// the object's namespace, or a cluster-scoped TerraformClusterIdentity
	// that allows the namespace. The runner Job gets its keys as
	// environment variables and as files under /var/run/captf/credentials.
	// +optional
	IdentityRef *IdentityReference `json:"identityRef,omitempty"`

	// ApplyPolicy is Automatic (every change applies when due) or Manual
	// (every change but the first apply waits for an approved plan hash).
	// +kubebuilder:default=Automatic
	// +optional
	ApplyPolicy ApplyPolicy `json:"applyPolicy,omitempty"`

	// Jobs sets what every runner Job runs with: service account, pull
	// secrets, resources, environment, placement, deadline, the user it
	// runs as and how many finished Jobs are kept.
	// +optional
	Jobs JobSettings `json:"jobs,omitempty"`

	// DeletionPolicy says what deleting the object does to its
	// infrastructure: Destroy (a destroy Job runs first) or Retain (the
	// object goes, the infrastructure and its terraform state Secret stay).
	// +kubebuilder:default=Destroy
	// +optional
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`
	// AllowDestructivePlans turns the destructive-plan guard off. With it
	// off (the default), an applyPolicy Automatic apply of an object that
	// applied before plans first and applies nothing if the plan deletes
	// or replaces a resource: that plan waits for approval instead, as a
	// TerraformPlan with reason Destructive. Under Manual every plan waits
	// anyway. lifecycle { prevent_destroy } in the module holds either way.
	// +optional
	AllowDestructivePlans bool `json:"allowDestructivePlans,omitempty"`
	// Drift says how often the manager checks the infrastructure for
	// changes made outside terraform, and what it does when it finds some.
	// +optional
	Drift DriftSpec `json:"drift,omitempty"`
}

// DriftSpec is how drift is checked and handled.
type DriftSpec struct {
	// IntervalSeconds is the time between two drift checks of a
	// provisioned object; 0 turns them off. Unset: the manager's
	// --drift-interval (30 minutes unless set).
	// +kubebuilder:validation:Minimum=0
	// +optional
	IntervalSeconds *int32 `json:"intervalSeconds,omitempty"`
	// Action is Report (drift is reported in status and events) or
	// Remediate (an apply brings the infrastructure back to its
	// configuration; under applyPolicy Manual its plan waits for approval).
	// +kubebuilder:default=Report
	// +optional
	Action DriftAction `json:"action,omitempty"`
}

// DriftAction is what the manager does with drift it found.
// +kubebuilder:validation:Enum=Report;Remediate
type DriftAction string

const (
	// DriftActionReport reports drift and changes nothing.
	DriftActionReport DriftAction = "Report"
	// DriftActionRemediate applies the configuration again when drift is
	// found.
	DriftActionRemediate DriftAction = "Remediate"
)

// DeletionPolicy is what deleting an object does to its infrastructure.
// +kubebuilder:validation:Enum=Destroy;Retain
type DeletionPolicy string

const (
	// DeletionDestroy runs a destroy Job before the object goes.
	DeletionDestroy DeletionPolicy = "Destroy"
	// DeletionRetain keeps the infrastructure and its state.
	DeletionRetain DeletionPolicy = "Retain"
)

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
	// Kind is Secret (in the object's namespace) or
	// TerraformClusterIdentity (cluster-scoped).
	// +kubebuilder:validation:Enum=Secret;TerraformClusterIdentity
	Kind string `json:"kind"`
	// Name of the identity object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// Identity kinds.
const (
	IdentityKindSecret                   = "Secret"
	IdentityKindTerraformClusterIdentity = "TerraformClusterIdentity"
)

// JobSettings are the settings of every runner Job.
type JobSettings struct {
	// ServiceAccountName runs the Job's pod.
	// +optional
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// ImagePullSecrets pull the module image (and the runner image).
	// +kubebuilder:validation:MaxItems=16
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
	// ActiveDeadlineSeconds bounds one run.
	// +kubebuilder:validation:Minimum=60
	// +kubebuilder:default=3600
	// +optional
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`
	// Resources of the runner container; without them the manager asks for
	// 250m CPU and 512Mi of memory and limits memory to 2Gi.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
	// Env adds environment variables to the runner container, for example
	// a provider's settings or a proxy. Names starting TF_ or KUBE_ are
	// refused: they would change what terraform does (its arguments, its
	// log, its state backend) behind the plan's back.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(e, !e.name.startsWith('TF_') && !e.name.startsWith('KUBE_'))",message="env: names starting TF_ or KUBE_ would change what terraform does; set them in the module or the module image"
	// +listType=map
	// +listMapKey=name
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`
	// NodeSelector places the runner Jobs' pods.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations of the runner Jobs' pods.
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// SecurityContext sets who the pod runs as; never root. The containers
	// always run with a read-only root filesystem, no privilege escalation
	// and no capabilities.
	// +optional
	SecurityContext *JobSecurityContext `json:"securityContext,omitempty"`
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

// JobSecurityContext is who a runner Job's pod runs as. Root (0) is
// refused; unset fields default to 65532.
type JobSecurityContext struct {
	// +kubebuilder:validation:Minimum=1
	// +optional
	RunAsUser *int64 `json:"runAsUser,omitempty"`
	// +kubebuilder:validation:Minimum=1
	// +optional
	RunAsGroup *int64 `json:"runAsGroup,omitempty"`
	// FSGroup owns the mounted volumes (the credentials, the plan key).
	// +kubebuilder:validation:Minimum=1
	// +optional
	FSGroup *int64 `json:"fsGroup,omitempty"`
}

// PlanStatus is a plan that waits for approval. It never holds a value.
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
	// Reason is why the plan waits: Manual (the applyPolicy), or
	// Destructive (under Automatic, the plan deletes or replaces a
	// resource and the destructive-plan guard stopped it).
	// +optional
	Reason PlanReason `json:"reason,omitempty"`
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
	// Drift is what a drift check found: counts by action and addresses,
	// never a value.
	// +optional
	Drift *DriftReport `json:"drift,omitempty"`
}

// DriftReport is what a drift check found: the resources whose real
// state no longer matches the configuration, counted by the action an
// apply would take to bring them back. Imports, moves and output changes
// are not drift.
type DriftReport struct {
	Create  int32 `json:"create"`
	Update  int32 `json:"update"`
	Replace int32 `json:"replace"`
	Delete  int32 `json:"delete"`
	// Resources are up to 20 entries "<address> (<action>)", sorted.
	// +kubebuilder:validation:MaxItems=20
	// +optional
	Resources []string `json:"resources,omitempty"`
	// Truncated is set when more than 20 resources drifted.
	// +optional
	Truncated bool `json:"truncated,omitempty"`
}

// RunError is why a run did not succeed, without a value.
type RunError struct {
	// Kind is a stable word: plan-changed, bad-input, failed, deadline.
	Kind string `json:"kind"`
	// +optional
	Message string `json:"message,omitempty"`
}

// RunnerStatus is the status every kind the run engine reconciles shares:
// the Cluster API contract's provisioning flags, the plan that waits, the
// Job in progress and the last one's outcome, drift, state backups and
// conditions. Each kind's status embeds it inline, so its JSON is the
// same as if the fields were the kind's own.
type RunnerStatus struct {
	// Ready is the Cluster API v1beta1 contract's flag: the infrastructure
	// is provisioned.
	// +optional
	Ready bool `json:"ready,omitempty"`
	// Initialization is the Cluster API v1beta2 contract's equivalent.
	// +optional
	Initialization *Initialization `json:"initialization,omitempty"`
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
	// read and backed up (or found too large to back up; with backups
	// off, last read).
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
