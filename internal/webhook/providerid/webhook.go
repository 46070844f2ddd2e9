// Package providerid is the validating admission webhook of the fields a
// TerraformMachine and a TerraformMachinePool publish for Cluster API:
// spec.providerID (both) and spec.providerIDList (a pool) are the
// manager's to set, from the module's provider_id and provider_ids
// outputs, and nobody else may change them — Cluster API deletes the Node
// of an ID that leaves a pool's list. The CRDs' CEL rule (a providerID
// is set once) holds while the webhook is down; the webhook adds who may
// set them, which CEL cannot see. Creation is not checked: clusterctl
// move creates the objects with their published fields, and a new
// object's fields apply nothing.
package providerid

import (
	"context"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/captf/captf/api/v1alpha1"
)

// The paths below are controller-runtime's for the types, where
// SetupWithManager registers the webhooks.
// +kubebuilder:webhook:path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-terraformmachine,mutating=false,failurePolicy=fail,sideEffects=None,groups=infrastructure.cluster.x-k8s.io,resources=terraformmachines,verbs=update,versions=v1alpha1,name=validation.terraformmachine.infrastructure.cluster.x-k8s.io,admissionReviewVersions=v1,timeoutSeconds=10
// +kubebuilder:webhook:path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-terraformmachinepool,mutating=false,failurePolicy=fail,sideEffects=None,groups=infrastructure.cluster.x-k8s.io,resources=terraformmachinepools,verbs=update,versions=v1alpha1,name=validation.terraformmachinepool.infrastructure.cluster.x-k8s.io,admissionReviewVersions=v1,timeoutSeconds=10

// SetupWithManager registers the webhooks of both kinds on mgr's webhook
// server. managerUsername is the username the manager's requests carry,
// for a ServiceAccount "system:serviceaccount:<namespace>:<name>": only
// they set the published fields.
func SetupWithManager(mgr ctrl.Manager, managerUsername string) error {
	if managerUsername == "" {
		return errors.New("provider ID webhooks: the manager's username is required")
	}
	machines := &validator[*infrav1.TerraformMachine]{kind: "TerraformMachine", manager: managerUsername, changed: machineChanged}
	if err := ctrl.NewWebhookManagedBy(mgr, &infrav1.TerraformMachine{}).WithValidator(machines).Complete(); err != nil {
		return err
	}
	pools := &validator[*infrav1.TerraformMachinePool]{kind: "TerraformMachinePool", manager: managerUsername, changed: poolChanged}
	return ctrl.NewWebhookManagedBy(mgr, &infrav1.TerraformMachinePool{}).WithValidator(pools).Complete()
}

// machineChanged is the published field an update of a machine changes.
func machineChanged(old, m *infrav1.TerraformMachine) *field.Error {
	if old.Spec.ProviderID != m.Spec.ProviderID {
		return field.Forbidden(field.NewPath("spec", "providerID"), "only the manager sets it, from the module's provider_id output after the machine's apply")
	}
	return nil
}

// poolChanged is the published field an update of a pool changes.
func poolChanged(old, p *infrav1.TerraformMachinePool) *field.Error {
	if old.Spec.ProviderID != p.Spec.ProviderID {
		return field.Forbidden(field.NewPath("spec", "providerID"), "only the manager sets it, from the module's provider_id output after the pool's apply")
	}
	if !slices.Equal(old.Spec.ProviderIDList, p.Spec.ProviderIDList) {
		return field.Forbidden(field.NewPath("spec", "providerIDList"), "only the manager sets it, from the module's provider_ids output in the pool's state")
	}
	return nil
}

// validator refuses an update of a published field by anyone but the
// manager.
type validator[T client.Object] struct {
	kind, manager string
	// changed is the published field an update from old to new changes,
	// as the error that refuses it; nil when none.
	changed func(old, new T) *field.Error
}

// ValidateCreate allows every new object (the webhook is not called for
// creates; see the package comment).
func (v *validator[T]) ValidateCreate(context.Context, T) (admission.Warnings, error) {
	return nil, nil
}

func (v *validator[T]) ValidateUpdate(ctx context.Context, old, obj T) (admission.Warnings, error) {
	refused := v.changed(old, obj)
	if refused == nil {
		return nil, nil
	}
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("admission request: %w", err)
	}
	if req.UserInfo.Username == v.manager {
		return nil, nil
	}
	return nil, apierrors.NewInvalid(schema.GroupKind{Group: infrav1.GroupVersion.Group, Kind: v.kind}, obj.GetName(), field.ErrorList{refused})
}

// ValidateDelete allows every delete.
func (v *validator[T]) ValidateDelete(context.Context, T) (admission.Warnings, error) {
	return nil, nil
}
