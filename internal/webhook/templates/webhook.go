// Package templates is the validating admission webhook that keeps the
// spec of a TerraformMachineTemplate and of a TerraformMachinePoolTemplate
// as it was created, the way Cluster API expects of infrastructure
// templates: a Machine is cloned from its template once, so an edited
// template would reach only the machines made after the edit, and no
// rollout would follow. A change is a new template that a
// MachineDeployment (or a ClusterClass) is pointed at, which rolls the
// machines out.
//
// Why a webhook and not a CEL rule (self == oldSelf on spec): Cluster
// API's topology controller finds out whether a template of a ClusterClass
// changed by a server-side apply dry run of the new spec over the current
// template, with the annotation topology.cluster.x-k8s.io/dry-run. That
// request must pass, or the controller fails before it can rotate the
// template. A CRD's CEL rule sees neither the request's dryRun nor, on
// spec, the object's annotations, so it would refuse that dry run; the
// webhook lets it through (as Cluster API's Docker provider does) and
// refuses every other change of spec. Metadata edits (labels,
// annotations, the owner references Cluster API adds) pass.
package templates

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/cluster-api/util/topology"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/captf/captf/api/v1alpha1"
)

// The paths below are controller-runtime's for the types, where
// SetupWithManager registers the webhooks. Only updates are checked.
// +kubebuilder:webhook:path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-terraformmachinetemplate,mutating=false,failurePolicy=fail,sideEffects=None,groups=infrastructure.cluster.x-k8s.io,resources=terraformmachinetemplates,verbs=update,versions=v1alpha1,name=validation.terraformmachinetemplate.infrastructure.cluster.x-k8s.io,admissionReviewVersions=v1,timeoutSeconds=10
// +kubebuilder:webhook:path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-terraformmachinepooltemplate,mutating=false,failurePolicy=fail,sideEffects=None,groups=infrastructure.cluster.x-k8s.io,resources=terraformmachinepooltemplates,verbs=update,versions=v1alpha1,name=validation.terraformmachinepooltemplate.infrastructure.cluster.x-k8s.io,admissionReviewVersions=v1,timeoutSeconds=10

// SetupWithManager registers the webhooks of both template kinds on mgr's
// webhook server.
func SetupWithManager(mgr ctrl.Manager) error {
	machines := &immutable[*infrav1.TerraformMachineTemplate]{
		kind: "TerraformMachineTemplate",
		spec: func(t *infrav1.TerraformMachineTemplate) any { return t.Spec },
		use:  "point the MachineDeployment, MachineSet or control plane (spec.machineTemplate), or the ClusterClass, at it; Cluster API then rolls the machines out",
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &infrav1.TerraformMachineTemplate{}).WithValidator(machines).Complete(); err != nil {
		return err
	}
	pools := &immutable[*infrav1.TerraformMachinePoolTemplate]{
		kind: "TerraformMachinePoolTemplate",
		spec: func(t *infrav1.TerraformMachinePoolTemplate) any { return t.Spec },
		use:  "point the ClusterClass's machine pool class at it",
	}
	return ctrl.NewWebhookManagedBy(mgr, &infrav1.TerraformMachinePoolTemplate{}).WithValidator(pools).Complete()
}

// immutable refuses an update of a template's spec, but for the topology
// controller's dry run.
type immutable[T client.Object] struct {
	kind string
	// spec is the part of a template that may not change.
	spec func(T) any
	// use says what to do instead, in the refusal's message.
	use string
}

var (
	_ admission.Validator[*infrav1.TerraformMachineTemplate]     = (*immutable[*infrav1.TerraformMachineTemplate])(nil)
	_ admission.Validator[*infrav1.TerraformMachinePoolTemplate] = (*immutable[*infrav1.TerraformMachinePoolTemplate])(nil)
)

// ValidateCreate allows every create.
func (v *immutable[T]) ValidateCreate(context.Context, T) (admission.Warnings, error) {
	return nil, nil
}

// ValidateUpdate refuses a change of spec, unless it is the topology
// controller's server-side apply dry run.
func (v *immutable[T]) ValidateUpdate(ctx context.Context, old, obj T) (admission.Warnings, error) {
	if equality.Semantic.DeepEqual(v.spec(old), v.spec(obj)) {
		return nil, nil
	}
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("admission request: %w", err)
	}
	if topology.IsDryRunRequest(req, obj) {
		return nil, nil
	}
	msg := fmt.Sprintf("a %s's spec cannot change: the machines already made from it would keep the old spec and no rollout would follow. Create a new template and %s", v.kind, v.use)
	return nil, apierrors.NewInvalid(schema.GroupKind{Group: infrav1.GroupVersion.Group, Kind: v.kind}, obj.GetName(), field.ErrorList{field.Forbidden(field.NewPath("spec"), msg)})
}

// ValidateDelete allows every delete.
func (v *immutable[T]) ValidateDelete(context.Context, T) (admission.Warnings, error) {
	return nil, nil
}
