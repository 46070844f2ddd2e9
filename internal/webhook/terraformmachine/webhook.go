// Package terraformmachine is the validating admission webhook of
// TerraformMachine: spec.providerID is the manager's to set, from the
// module's provider_id output, and nobody else may change it. The CRD's
// CEL rule (set once, never changed) holds while the webhook is down; the
// webhook adds who may set it, which CEL cannot see. Creation is not
// checked: clusterctl move creates machines with their providerID, and a
// new object's providerID applies nothing.
package terraformmachine

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/captf/captf/api/v1alpha1"
)

// The path below is controller-runtime's for the type, where
// SetupWithManager registers the webhook.
// +kubebuilder:webhook:path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-terraformmachine,mutating=false,failurePolicy=fail,sideEffects=None,groups=infrastructure.cluster.x-k8s.io,resources=terraformmachines,verbs=update,versions=v1alpha1,name=validation.terraformmachine.infrastructure.cluster.x-k8s.io,admissionReviewVersions=v1,timeoutSeconds=10

// Validator validates changes of TerraformMachines.
type Validator struct {
	// ManagerUsername is the username the manager's requests carry, for a
	// ServiceAccount "system:serviceaccount:<namespace>:<name>": only the
	// manager sets spec.providerID.
	ManagerUsername string
}

var _ admission.Validator[*infrav1.TerraformMachine] = (*Validator)(nil)

// SetupWithManager registers the webhook on the manager's webhook server.
func (v *Validator) SetupWithManager(mgr ctrl.Manager) error {
	if v.ManagerUsername == "" {
		return errors.New("TerraformMachine webhook: the manager's username is required")
	}
	return ctrl.NewWebhookManagedBy(mgr, &infrav1.TerraformMachine{}).WithValidator(v).Complete()
}

// ValidateCreate allows every new machine (the webhook is not called for
// creates; see the package comment).
func (v *Validator) ValidateCreate(context.Context, *infrav1.TerraformMachine) (admission.Warnings, error) {
	return nil, nil
}

// ValidateUpdate refuses a change of spec.providerID by anyone but the
// manager.
func (v *Validator) ValidateUpdate(ctx context.Context, old, m *infrav1.TerraformMachine) (admission.Warnings, error) {
	if old.Spec.ProviderID == m.Spec.ProviderID {
		return nil, nil
	}
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("admission request: %w", err)
	}
	if req.UserInfo.Username == v.ManagerUsername {
		return nil, nil
	}
	return nil, apierrors.NewInvalid(schema.GroupKind{Group: infrav1.GroupVersion.Group, Kind: "TerraformMachine"}, m.Name, field.ErrorList{
		field.Forbidden(field.NewPath("spec", "providerID"), "only the manager sets it, from the module's provider_id output after the machine's apply"),
	})
}

// ValidateDelete allows every delete.
func (v *Validator) ValidateDelete(context.Context, *infrav1.TerraformMachine) (admission.Warnings, error) {
	return nil, nil
}
