package terraformplan

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	infrav1 "github.com/captf/captf/api/v1alpha1"
)

var (
	specPath       = field.NewPath("spec")
	approvedPath   = specPath.Child("approved")
	approvedByPath = specPath.Child("approvedBy")
	phaseLabelPath = field.NewPath("metadata", "labels").Key(infrav1.LabelPlanPhase)
)

// validateCreate holds the rules of spec 002 for a new plan created by
// user.
func (v *Validator) validateCreate(user string, p *infrav1.TerraformPlan) field.ErrorList {
	errs := validateApprover(p)
	if user == v.ManagerUsername {
		return errs
	}
	phase, labelled := phaseLabel(p)
	switch {
	case !labelled, phase == infrav1.PlanPending, phase.Terminal():
	case phase == infrav1.PlanApproved && p.Spec.Approved:
	case phase == infrav1.PlanApproved:
		errs = append(errs, field.Forbidden(phaseLabelPath,
			"a plan that is not approved cannot be created in phase Approved"))
	default:
		errs = append(errs, field.NotSupported(phaseLabelPath, string(phase), []string{
			string(infrav1.PlanPending), string(infrav1.PlanApproved),
			string(infrav1.PlanApplied), string(infrav1.PlanSuperseded), string(infrav1.PlanFailed),
		}))
	}
	// clusterctl move creates finished plans again as the mover, with the
	// approvedBy of whoever approved them on the source cluster; a
	// finished plan can never be approved again, so its approvedBy is a
	// record only.
	if p.Spec.Approved && p.Spec.ApprovedBy != "" && !phase.Terminal() && p.Spec.ApprovedBy != user {
		errs = append(errs, field.Invalid(approvedByPath, p.Spec.ApprovedBy, fmt.Sprintf(
			"must be your own username %q: whoever creates an approved plan approves it, and approvedBy records who approved", user)))
	}
	return errs
}

// validateUpdate holds the rules of spec 002 for user's change of old
// into p.
func (v *Validator) validateUpdate(user string, old, p *infrav1.TerraformPlan) field.ErrorList {
	const immutable = "is immutable: the manager wrote it when it made the plan, and an approval approves exactly that plan"
	var errs field.ErrorList
	if !equality.Semantic.DeepEqual(old.Spec.TargetRef, p.Spec.TargetRef) {
		errs = append(errs, field.Forbidden(specPath.Child("targetRef"), immutable))
	}
	if old.Spec.PlanHash != p.Spec.PlanHash {
		errs = append(errs, field.Forbidden(specPath.Child("planHash"), immutable))
	}
	if old.Spec.InputsHash != p.Spec.InputsHash {
		errs = append(errs, field.Forbidden(specPath.Child("inputsHash"), immutable))
	}
	if old.Spec.Reason != p.Spec.Reason {
		errs = append(errs, field.Forbidden(specPath.Child("reason"), immutable))
	}
	if !equality.Semantic.DeepEqual(old.Spec.Summary, p.Spec.Summary) {
		errs = append(errs, field.Forbidden(specPath.Child("summary"), immutable))
	}
	errs = append(errs, validateApprover(p)...)

	switch {
	case old.Spec.Approved && !p.Spec.Approved:
		errs = append(errs, field.Forbidden(approvedPath, fmt.Sprintf(
			"an approval cannot be withdrawn: %s approved this plan", old.Spec.ApprovedBy)))
	case old.Spec.Approved && old.Spec.ApprovedBy != p.Spec.ApprovedBy:
		errs = append(errs, field.Forbidden(approvedByPath, fmt.Sprintf(
			"an approval cannot be changed: %s approved this plan", old.Spec.ApprovedBy)))
	case !old.Spec.Approved && p.Spec.Approved:
		if phase, _ := phaseLabel(old); phase.Terminal() {
			errs = append(errs, field.Forbidden(approvedPath, fmt.Sprintf(
				"the plan is %s (label %s), so it can no longer be approved; approve the plan its target names in status.pendingPlanRef.name",
				phase, infrav1.LabelPlanPhase)))
		}
		if p.Spec.ApprovedBy != "" && p.Spec.ApprovedBy != user {
			errs = append(errs, field.Invalid(approvedByPath, p.Spec.ApprovedBy, fmt.Sprintf(
				"must be your own username %q: approvedBy records who approved, not who is claimed to have (kubectl captf approve fills it in)", user)))
		}
	}

	oldPhase, oldLabelled := phaseLabel(old)
	phase, labelled := phaseLabel(p)
	if (oldPhase != phase || oldLabelled != labelled) && user != v.ManagerUsername {
		what := "change"
		if !labelled {
			what = "remove"
		}
		errs = append(errs, field.Forbidden(phaseLabelPath, fmt.Sprintf(
			"only the manager may %s the phase label; approve with spec.approved and the manager moves the phase", what)))
	}
	return errs
}

// validateApprover checks that approvedBy is set exactly when approved is
// true.
func validateApprover(p *infrav1.TerraformPlan) field.ErrorList {
	switch {
	case p.Spec.Approved && p.Spec.ApprovedBy == "":
		return field.ErrorList{field.Required(approvedByPath,
			"set it to your own username when you set approved to true")}
	case !p.Spec.Approved && p.Spec.ApprovedBy != "":
		return field.ErrorList{field.Forbidden(approvedByPath,
			"must be empty unless approved is true: it names who approved")}
	}
	return nil
}

// phaseLabel returns the plan's captf.io/plan-phase label and whether it
// has one.
func phaseLabel(p *infrav1.TerraformPlan) (infrav1.PlanPhase, bool) {
	v, ok := p.Labels[infrav1.LabelPlanPhase]
	return infrav1.PlanPhase(v), ok
}
