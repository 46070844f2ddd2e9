package v1alpha1

// Annotations, labels, events, conditions and reasons of specs 001 and 004.
// Their spellings are the public contract.

const (
	// AnnotationApprovePlan is set by a person to the status.plan.planHash
	// they approve.
	AnnotationApprovePlan = "captf.io/approve-plan"
	// AnnotationApproveDestructivePlan is set by a person to the
	// status.plan.planHash of a plan the destructive-plan guard stopped
	// under applyPolicy Automatic (captf.io/approve-plan does as well).
	AnnotationApproveDestructivePlan = "captf.io/approve-destructive-plan"
	// AnnotationInterruptedApply marks an object whose apply Job ended
	// without a report (deleted, stopped at its deadline, killed): its next
	// apply plans first under the destructive-plan guard, even a first
	// apply. The manager removes it after a successful apply.
	AnnotationInterruptedApply = "captf.io/interrupted-apply"
	// AnnotationApprovedPlan marks an apply Job that carries an approved plan.
	AnnotationApprovedPlan = "captf.io/approved-plan"
	// AnnotationPlanChanged marks an apply Job that found another plan than
	// the approved one and applied nothing.
	AnnotationPlanChanged = "captf.io/plan-changed"

	// AnnotationProcessed marks a runner Job whose outcome the manager has
	// fully recorded (status, TerraformPlan, approval, events). Until then
	// the Job is the record of its outcome and is never forgotten.
	AnnotationProcessed = "captf.io/processed"
	// AnnotationPlan on an apply Job names the TerraformPlan it applies.
	AnnotationPlan = "captf.io/plan"
	// AnnotationPlanJob on a TerraformPlan names the plan Job that made it,
	// so status.plan can be rebuilt from the plan alone.
	AnnotationPlanJob = "captf.io/plan-job"

	// RunnerContainer is the container of a runner Job that runs terraform:
	// its log is terraform's output, its termination message the report.
	RunnerContainer = "terraform"

	// AnnotationImage on the durable inputs Secret holds the image reference.
	AnnotationImage = "captf.io/image"
	// AnnotationIdentity on the durable inputs Secret holds the identity.
	AnnotationIdentity = "captf.io/identity"
	// AnnotationImageDigest holds the digest the image resolved to: on the
	// durable inputs Secret, pinned after a successful apply; on a
	// TerraformPlan and its apply Job, the digest the plan Job ran.
	AnnotationImageDigest = "captf.io/image-digest"
	// AnnotationAcceptEmptyState on a TerraformCluster whose state is lost
	// (it applied, and its state Secret is gone) lets it start again from
	// an empty state: the next apply creates everything anew. The manager
	// removes it after that apply succeeded.
	AnnotationAcceptEmptyState = "captf.io/accept-empty-state"
	// AnnotationAppliedImage and AnnotationAppliedIdentity on the durable
	// inputs Secret hold the image (pinned to its digest) and the identity
	// of the last successful apply, whose files the Secret keeps under the
	// keys applied.main.tf.json and applied.terraform.tfvars.json: what a
	// destroy and a drift check run.
	AnnotationAppliedImage    = "captf.io/applied-image"
	AnnotationAppliedIdentity = "captf.io/applied-identity"
	// AnnotationDestroyWithCurrentInputs on a deleted TerraformCluster
	// whose state was applied with inputs the manager no longer has lets
	// its destroy run with the inputs the object renders now.
	AnnotationDestroyWithCurrentInputs = "captf.io/destroy-with-current-inputs"
	// AnnotationMovedMidRun marks an object that arrived by clusterctl move
	// while a runner Job of it ran on the source cluster (it carried the
	// source's clusterctl.cluster.x-k8s.io/block-move): the cut run may have
	// created infrastructure whose state did not move, so the object counts
	// as having applied before. The manager sets it and removes it after
	// the next successful apply.
	AnnotationMovedMidRun = "captf.io/moved-mid-run"
	// AnnotationStateMigratedFrom on the Secret of a state's chunk 0 names
	// the suffix the manager moved the state from, once the copy was
	// checked: what remains under that suffix may go.
	AnnotationStateMigratedFrom = "captf.io/state-migrated-from"
	// AnnotationApplied is "true" after the first successful apply.
	AnnotationApplied = "captf.io/applied"

	// LabelManaged marks every object the manager creates.
	LabelManaged = "captf.io/managed"
	// LabelOwnerKind and LabelOwnerName name the object a Secret belongs to.
	LabelOwnerKind = "captf.io/owner-kind"
	LabelOwnerName = "captf.io/owner-name"
	// LabelCluster is on every runner Job: the Cluster API cluster its
	// object belongs to (the cluster-name label, or a TerraformCluster's
	// own name), shortened as LabelOwnerName is. A cluster's apply finds
	// its machines' Jobs by it.
	LabelCluster = "captf.io/cluster"
)

// ApplyPolicy says whether a change is applied at once or after approval.
// +kubebuilder:validation:Enum=Automatic;Manual
type ApplyPolicy string

const (
	// ApplyAutomatic applies every change as soon as it is due.
	ApplyAutomatic ApplyPolicy = "Automatic"
	// ApplyManual plans every change but the first apply and applies it only
	// after a person approved the plan hash.
	ApplyManual ApplyPolicy = "Manual"
)

// Operation is what a runner Job does.
// +kubebuilder:validation:Enum=plan;apply;destroy;drift;refresh;restore
type Operation string

const (
	OperationPlan    Operation = "plan"
	OperationApply   Operation = "apply"
	OperationDestroy Operation = "destroy"
	// OperationDrift is a drift check: a refresh-only apply, then a plan
	// without refresh that is counted and never applied.
	OperationDrift Operation = "drift"
	// OperationRefresh is a pool's membership refresh: a refresh-only
	// apply, which writes a new state only when what the module reads
	// (its members) changed. It changes no infrastructure and is not
	// gated.
	OperationRefresh Operation = "refresh"
	// OperationRestore pushes a state backup back into the object's
	// terraform state: a backend-only root module, the backup's chunks,
	// state push -force, then state list. It is never gated.
	OperationRestore Operation = "restore"
)

// Condition types.
const (
	// ConditionReady is the summary: True once the infrastructure is
	// provisioned. Waiting for an approval never makes it False.
	ConditionReady = "Ready"
	// ConditionApplyJobSucceeded is about the last apply; Unknown while a
	// plan waits for approval.
	ConditionApplyJobSucceeded = "ApplyJobSucceeded"
	// ConditionDriftDetected says whether the last drift check found the
	// infrastructure changed outside terraform, and what is done about it.
	ConditionDriftDetected = "DriftDetected"
	// ConditionDriftJobSucceeded is about the last drift check's Job.
	ConditionDriftJobSucceeded = "DriftJobSucceeded"
	// ConditionInfrastructureHealthy is the module's health output, sampled
	// after each apply and drift check: only its state word.
	ConditionInfrastructureHealthy = "InfrastructureHealthy"
	// ConditionStateBackedUp says whether the state's newest serial has a
	// backup Secret.
	ConditionStateBackedUp = "StateBackedUp"
	// ConditionStateRestored is about the last restore asked for with
	// captf.io/restore-state.
	ConditionStateRestored = "StateRestored"
)

// State backups, restore, and lost or locked state.
const (
	// AnnotationRestoreState on a TerraformCluster names the serial of a
	// state backup to push back into its terraform state. A restore Job
	// runs once per serial (status.lastRestoredSerial); the manager
	// removes the annotation after a successful restore.
	AnnotationRestoreState = "captf.io/restore-state"
	// LabelStateBackup marks a state backup Secret; its value is the
	// state's serial.
	LabelStateBackup = "captf.io/state-backup"
	// LabelMove is clusterctl's move label: clusterctl move carries a
	// Secret that has it even without an owner reference to a moved object.
	LabelMove = "clusterctl.cluster.x-k8s.io/move"

	// ReasonBackedUp (StateBackedUp True): the newest serial has a backup.
	ReasonBackedUp = "BackedUp"
	// ReasonBackupsOff (StateBackedUp Unknown): the manager keeps no
	// backups (--state-backups=0).
	ReasonBackupsOff = "BackupsOff"
	// ReasonStateTooLarge (StateBackedUp False, and a Warning event): the
	// state does not fit in one Secret; it has no backup.
	ReasonStateTooLarge = "StateTooLarge"
	// ReasonBackupFailed (StateBackedUp False): the state could not be
	// read or its backup not written; retried.
	ReasonBackupFailed = "BackupFailed"

	// ReasonRestoring (StateRestored Unknown): a restore Job runs.
	ReasonRestoring = "Restoring"
	// ReasonRestored (StateRestored True, and a Normal event StateRestored).
	ReasonRestored = "Restored"
	// ReasonRestoreFailed (StateRestored False, and a Warning event
	// StateRestoreFailed): the restore Job failed; the same serial is not
	// tried again until the annotation is removed and set again.
	ReasonRestoreFailed = "RestoreFailed"
	// ReasonBackupNotFound (StateRestored False, and a Warning event): no
	// backup of the serial the annotation names.
	ReasonBackupNotFound    = "BackupNotFound"
	EventStateRestored      = "StateRestored"
	EventStateRestoreFailed = "StateRestoreFailed"
	EventBackupNotFound     = "BackupNotFound"
	EventStateTooLarge      = "StateTooLarge"

	// ReasonStateLocked (ApplyJobSucceeded False, and a Warning event):
	// the terraform state is locked by someone other than a finished Job
	// of the object; no Job starts until the lock is released.
	ReasonStateLocked = "StateLocked"
	EventStateLocked  = "StateLocked"
	// EventStateUnlocked (Normal): the manager released a lock that a pod
	// of the object's own, now gone, left behind.
	EventStateUnlocked = "StateUnlocked"
	// EventStateMigrated (Normal): the manager moved an object's state from
	// the suffix it had before names ending in -<digits> got a new one.
	EventStateMigrated = "StateMigrated"
)

// Reasons of InfrastructureHealthy, by the health output's state.
const (
	// ReasonHealthy: running (True).
	ReasonHealthy = "Healthy"
	// ReasonUnhealthy: failed (False); Ready is False too.
	ReasonUnhealthy = "Unhealthy"
	// ReasonHealthUnknown: unknown, a word that is none of these, or a
	// sensitive output (Unknown).
	ReasonHealthUnknown = "HealthUnknown"
	// ReasonProvisioning: pending (Unknown); sampled again after 30 s,
	// then less often, up to every 5 minutes.
	ReasonProvisioning = "Provisioning"
)

// Reasons of DriftDetected and DriftJobSucceeded, and the drift event.
const (
	// ReasonNoDrift: the last check found none, or an apply since brought
	// the infrastructure back to its configuration (False).
	ReasonNoDrift = "NoDrift"
	// ReasonDriftReported: drift found under action Report (True).
	ReasonDriftReported = "DriftReported"
	// ReasonDriftPending: drift found under action Remediate and
	// applyPolicy Manual; a plan that undoes it waits for approval (True).
	ReasonDriftPending = "DriftPending"
	// ReasonDriftRemediating: drift found under action Remediate and
	// applyPolicy Automatic; an apply undoes it (True).
	ReasonDriftRemediating = "DriftRemediating"
	// ReasonDriftNotChecked: drift checks are off, or none ran yet
	// (Unknown).
	ReasonDriftNotChecked = "DriftNotChecked"
	// ReasonDriftRemediationFailed: remediation failed as many times as
	// spec.jobs.failedJobsHistoryLimit since the last good check; it is
	// tried again after the next check that still finds drift (True).
	ReasonDriftRemediationFailed = "DriftRemediationFailed"
	// ReasonDriftCheckSucceeded and ReasonDriftCheckFailed are the
	// reasons of DriftJobSucceeded.
	ReasonDriftCheckSucceeded = "DriftCheckSucceeded"
	ReasonDriftCheckFailed    = "DriftCheckFailed"
	// EventDriftDetected is a Warning event naming the drifted addresses.
	EventDriftDetected = "DriftDetected"
	// EventRefreshFailed is a Warning event: a pool's membership refresh
	// Job failed (its step and error kind, never a value).
	EventRefreshFailed = "RefreshFailed"
)

// Condition reasons and event reasons of spec 001.
const (
	ReasonPlanAwaitingApproval = "PlanAwaitingApproval"
	ReasonPlanChanged          = "PlanChanged"
	EventPlanReady             = "PlanReady"
	EventPlanApproved          = "PlanApproved"
	EventPlanApplied           = "PlanApplied"
	EventPlanChanged           = "PlanChanged"
)

// ErrorKindPlanChanged is status.lastRun.error.kind of an apply Job that
// found another plan than the approved one.
const ErrorKindPlanChanged = "plan-changed"

// ErrorKindNeedsApproval is status.lastRun.error.kind of an apply that
// was to apply, without approval, only values an approval leaves out (a
// pool's rotated bootstrap data) and applied nothing because the change
// is more than that; ReasonNeedsApproval is then the reason of
// ApplyJobSucceeded=Unknown while a plan of it is made to wait for
// approval.
const (
	ErrorKindNeedsApproval = "needs-approval"
	ReasonNeedsApproval    = "NeedsApproval"
)

// The destructive-plan guard: status.lastRun.error.kind of a guarded apply
// that applied nothing because its plan deletes or replaces resources,
// the reason of ApplyJobSucceeded=False, and a Warning event naming them.
const (
	ErrorKindDestructivePlanBlocked = "destructive-plan-blocked"
	ReasonDestructivePlanBlocked    = "DestructivePlanBlocked"
	EventDestructivePlanBlocked     = "DestructivePlanBlocked"
)

// Fixed paths inside the runner Job: a module image bundles the module and
// the terraform or tofu binary at these paths (a contract for module
// authors), and the manager mounts the plan key and the rendered inputs.
// The runner links the module into its work folder as ./module, the source
// the rendered root module calls.
const (
	PathModule  = "/captf/module"
	PathRuntime = "/captf/runtime"
	PathPlanKey = "/captf/plan-key/key"
	PathInputs  = "/captf/inputs"
)

// A cluster's exports: what its module publishes to its machines and pools.
const (
	// ConditionExportsPublished says whether status.exports holds the
	// exports output of the module's state, and why not.
	ConditionExportsPublished = "ExportsPublished"
	// ReasonExportsPublished (True): status.exports holds the exports.
	ReasonExportsPublished = "ExportsPublished"
	// ReasonNoExports (True): the module declares no exports output;
	// machines and pools get an empty object.
	ReasonNoExports = "NoExports"
	// ReasonExportsSensitive (False): the exports output is sensitive, so
	// it is never published; its value is never shown.
	ReasonExportsSensitive = "ExportsSensitive"
	// ReasonExportsNotAnObject (False): the exports output is not an
	// object.
	ReasonExportsNotAnObject = "ExportsNotAnObject"
	// ReasonExportsTooLarge (False): the exports take more than
	// MaxExportsBytes as canonical JSON.
	ReasonExportsTooLarge = "ExportsTooLarge"
	// ReasonExportsUnreadable (False): the state could not be read.
	ReasonExportsUnreadable = "ExportsUnreadable"

	// MaxExportsBytes bounds status.exports (canonical JSON: keys sorted,
	// no spaces), so that a TerraformCluster stays a small object.
	MaxExportsBytes = 32 * 1024
)

// A pool's members: the provider IDs its module's provider_ids output
// holds, read from the state at each new serial.
const (
	// ConditionMembersPublished says whether spec.providerIDList and
	// status.replicas hold the provider_ids output of the pool's state,
	// and why not. While it is False they keep what was last published:
	// Cluster API deletes the Node of an ID that leaves the list.
	ConditionMembersPublished = "MembersPublished"
	// ReasonMembersPublished (True): the list holds the output's IDs.
	ReasonMembersPublished = "MembersPublished"
	// ReasonMembersMissing (False): the state has no provider_ids output.
	ReasonMembersMissing = "MembersMissing"
	// ReasonMembersSensitive (False): the output is sensitive, so it is
	// never published; its value is never shown.
	ReasonMembersSensitive = "MembersSensitive"
	// ReasonMembersInvalid (False): the output is not a list of at most
	// MaxProviderIDs distinct strings of 1 to 512 characters, or the state
	// could not be read; the message says which entry, never its value.
	ReasonMembersInvalid = "MembersInvalid"

	// ConditionMembersReplaceable says whether deleting a member's
	// Machine replaces the member: the pool's state has a member_addresses
	// output naming the resource of each member. While it is False, a
	// deleted member's object and Machine are made again and nothing is
	// replaced.
	ConditionMembersReplaceable = "MembersReplaceable"
	// ReasonMemberAddresses (True): the output names every member's
	// resource.
	ReasonMemberAddresses = "MemberAddresses"
	// ReasonMemberAddressesMissing (False): the state has no
	// member_addresses output.
	ReasonMemberAddressesMissing = "MemberAddressesMissing"
	// ReasonMemberAddressesInvalid (False): the output is not a map of
	// strings, or names no resource for some members; the message counts
	// them, never with a value.
	ReasonMemberAddressesInvalid = "MemberAddressesInvalid"

	// FinalizerMember holds a pool's member object, once its Machine is
	// deleted, until an apply of the pool replaced the member (or the
	// member left the pool's state, or its module cannot replace one).
	FinalizerMember = "captf.io/member"

	// MaxProviderIDs bounds a pool's spec.providerIDList.
	MaxProviderIDs = 10000
)

// Why a TerraformMachine or a TerraformMachinePool whose apply succeeded
// is not reported provisioned: what it publishes for Cluster API (a
// provider ID, a pool's members) is not what its own state's outputs
// hold. Each is the reason of Ready=False and ApplyJobSucceeded=False;
// status.initialization.provisioned stays unset, so Cluster API reads no
// provider ID of it.
const (
	// ReasonProviderIDMissing: the machine's state has no provider_id
	// output (a machine module must declare it, and give it a value).
	ReasonProviderIDMissing = "ProviderIDMissing"
	// ReasonProviderIDInvalid: the state's provider_id output is
	// sensitive, not a string of 1 to 512 characters, or the state could
	// not be read; the message never shows its value.
	ReasonProviderIDInvalid = "ProviderIDInvalid"
	// ReasonProviderIDMismatch: spec.providerID holds another ID than the
	// provider_id output of the object's own state (it came with the
	// object's creation, not from its apply).
	ReasonProviderIDMismatch = "ProviderIDMismatch"
	// ReasonMembersMismatch: a pool's spec.providerIDList is not the
	// provider_ids output of its own state.
	ReasonMembersMismatch = "MembersMismatch"
)

// ReasonDestroyInputsUnavailable (Ready False, and a Warning event): the
// object is deleted under AnnotationDestroyWithCurrentInputs, and what it
// renders from other objects cannot be had now (a machine's Machine or
// bootstrap data, gone with the Machine's deletion); the message names
// what. Nothing is destroyed and the object is kept.
const ReasonDestroyInputsUnavailable = "DestroyInputsUnavailable"

// ReasonMachinesRemain (Ready False): a deleted TerraformCluster waits for
// the TerraformMachines and TerraformMachinePools of its cluster to be gone before anything is
// destroyed or released, since they may run on what it would destroy.
const ReasonMachinesRemain = "MachinesRemain"

// What a TerraformMachine waits for before its first apply, each the
// reason of Ready=False; the kind's watches bring it back when it changed.
const (
	// ReasonWaitingForOwner: no Cluster API Machine is the machine's
	// controller owner yet, or the machine has no cluster-name label.
	ReasonWaitingForOwner = "WaitingForOwner"
	// ReasonWaitingForClusterInfrastructure: the machine's Cluster does
	// not exist, or its infrastructure is not provisioned yet.
	ReasonWaitingForClusterInfrastructure = "WaitingForClusterInfrastructure"
	// ReasonWaitingForExports: the cluster's TerraformCluster has not
	// published its exports (its condition ExportsPublished is not True).
	ReasonWaitingForExports = "WaitingForExports"
	// ReasonWaitingForBootstrapData: the Machine names no bootstrap data
	// Secret yet, or the Secret has no key value.
	ReasonWaitingForBootstrapData = "WaitingForBootstrapData"
	// ReasonClusterJobRuns: an apply or destroy of the machine's
	// TerraformCluster runs; a Job of the machine waits for it to end, so
	// Jobs of related state never run at once.
	ReasonClusterJobRuns = "ClusterJobRuns"
	// ReasonMachineJobRuns: an apply or destroy of a TerraformMachine or
	// TerraformMachinePool of the cluster runs; the cluster's apply or destroy waits for it to
	// end.
	ReasonMachineJobRuns = "MachineJobRuns"
)
