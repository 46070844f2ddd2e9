// Package terraformplan is the validating admission webhook of
// TerraformPlan (spec 002, "Validation"): it checks who approves a plan,
// that an approval names its approver truthfully, that a finished plan is
// never approved, and that only the manager moves a plan's phase label.
// The CRD's CEL rules repeat the rules that need no requester, so they
// hold while the webhook is down.
package terraformplan

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
// +kubebuilder:webhook:path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-terraformplan,mutating=false,failurePolicy=fail,sideEffects=None,groups=infrastructure.cluster.x-k8s.io,resources=terraformplans,verbs=create;update,versions=v1alpha1,name=validation.terraformplan.infrastructure.cluster.x-k8s.io,admissionReviewVersions=v1,timeoutSeconds=10

// Validator validates TerraformPlans on create and update.
type Validator struct {
	// ManagerUsername is the username the manager's requests carry, for a
	// ServiceAccount "system:serviceaccount:<namespace>:<name>". Only the
	// manager may create a plan in any phase and move its phase label.
	ManagerUsername string
}

var _ admission.Validator[*infrav1.TerraformPlan] = (*Validator)(nil)

// SetupWithManager registers the webhook on the manager's webhook server.
func (v *Validator) SetupWithManager(mgr ctrl.Manager) error {
	if v.ManagerUsername == "" {
		return errors.New("TerraformPlan webhook: the manager's username is required")
	}
	return ctrl.NewWebhookManagedBy(mgr, &infrav1.TerraformPlan{}).WithValidator(v).Complete()
}

// ValidateCreate checks a new plan against the requester.
func (v *Validator) ValidateCreate(ctx context.Context, p *infrav1.TerraformPlan) (admission.Warnings, error) {
	user, err := requester(ctx)
	if err != nil {
		return nil, err
	}
	return nil, invalid(p, v.validateCreate(user, p))
}

// ValidateUpdate checks a change of a plan against the stored plan and the
// requester.
func (v *Validator) ValidateUpdate(ctx context.Context, old, p *infrav1.TerraformPlan) (admission.Warnings, error) {
	user, err := requester(ctx)
	if err != nil {
		return nil, err
	}
	return nil, invalid(p, v.validateUpdate(user, old, p))
}

// ValidateDelete allows every delete: the manager prunes plans and the
// garbage collector deletes them with their target.
func (v *Validator) ValidateDelete(context.Context, *infrav1.TerraformPlan) (admission.Warnings, error) {
	return nil, nil
}

func requester(ctx context.Context) (string, error) {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return "", fmt.Errorf("admission request: %w", err)
	}
	return req.UserInfo.Username, nil
}

// invalid turns errs into the API server's 422 Invalid, which names the
// plan and each field.
func invalid(p *infrav1.TerraformPlan, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(schema.GroupKind{Group: infrav1.GroupVersion.Group, Kind: "TerraformPlan"}, p.Name, errs)
}
