package engine

import (
	"context"
	"fmt"
	"strings"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/runner"
	"github.com/captf/captf/pkg/fingerprint"
)

// The destructive-plan guard (spec 004). Under applyPolicy Automatic, an
// apply of an object that applied before (or whose last apply was
// interrupted) runs with --guard: it plans, with refresh, and applies that
// saved plan only if it deletes or replaces no resource. The guard's run
// mounts no plan key. When it stops a plan, a plan Job (with the key)
// plans again; a destructive plan waits for approval as a TerraformPlan
// with reason Destructive, and its approval runs the apply with
// --expect-plan, exactly as under Manual. A plan that no longer deletes
// anything does not wait: the guarded apply runs again.

// blocked reports whether run is a guarded apply the guard stopped.
func blocked(run *infrav1.RunStatus) bool {
	return run != nil && run.Error != nil && run.Error.Kind == infrav1.ErrorKindDestructivePlanBlocked
}

// refused reports whether run is an apply that applied nothing because
// it needs an approval: the guard stopped it, or it found more to apply
// than the values it could apply without one.
func refused(run *infrav1.RunStatus) bool {
	return blocked(run) || (run != nil && run.Error != nil && run.Error.Kind == infrav1.ErrorKindNeedsApproval)
}

// WaitsDestructive reports whether a plan the guard stopped waits.
func WaitsDestructive(obj Object) bool {
	p := obj.GetRunnerStatus().Plan
	return p != nil && p.Reason == infrav1.ReasonDestructive
}

// planReason is why a plan of obj waits for approval: the applyPolicy
// Manual, or under Automatic the guard, for a plan that deletes or
// replaces; "" for a plan under Automatic that need not wait.
func planReason(obj Object, p *fingerprint.Report) infrav1.PlanReason {
	switch {
	case obj.GetRunnerSpec().ApplyPolicy == infrav1.ApplyManual && blocked(obj.GetRunnerStatus().LastRun) && p.Destroy > 0:
		// Under Manual the guard runs only for values applied without
		// approval (unapprovedChangeOnly): their plan waits as what it is.
		return infrav1.ReasonDestructive
	case obj.GetRunnerSpec().ApplyPolicy == infrav1.ApplyManual:
		return infrav1.ReasonManual
	case p.Destroy > 0:
		// A replacement counts as an add and a destroy.
		return infrav1.ReasonDestructive
	}
	return ""
}

// destructiveEntries are the deletes and replacements among a report's
// resource entries.
func destructiveEntries(c *runner.Changes) []string {
	if c == nil {
		return nil
	}
	var out []string
	for _, e := range c.Resources {
		if strings.HasSuffix(e, " (replace)") || strings.HasSuffix(e, " (delete)") {
			out = append(out, e)
		}
	}
	return out
}

// blockedNote says what the guard stopped, by address, never a value.
func blockedNote(k Kind, job string, c *runner.Changes) string {
	note := fmt.Sprintf("Job %s planned first and applied nothing: the plan deletes or replaces resources", job)
	if c != nil {
		note += fmt.Sprintf(" (%d to replace, %d to delete: %s", c.Replace, c.Delete, strings.Join(destructiveEntries(c), ", "))
		if c.Truncated {
			note += ", …"
		}
		note += ")"
	}
	if !k.Plans() {
		return note + ". A plan of these changes is made next; annotate the object " + infrav1.AnnotationApproveDestructivePlan + " with its hash to apply it once (or set spec.allowDestructivePlans)."
	}
	return note + ". A plan of these changes is made next and waits for approval (or set spec.allowDestructivePlans)."
}

// markInterrupted sets captf.io/interrupted-apply on obj.
func (r *Reconciler) markInterrupted(ctx context.Context, obj Object) error {
	if Interrupted(obj) {
		return nil
	}
	err := r.PatchObject(ctx, obj, func(obj Object) {
		annotate(obj, infrav1.AnnotationInterruptedApply, "true")
	})
	if err != nil {
		return fmt.Errorf("mark the interrupted apply: %w", err)
	}
	return nil
}

// clearInterrupted removes captf.io/interrupted-apply after a successful
// apply.
func (r *Reconciler) clearInterrupted(ctx context.Context, obj Object) error {
	if !Interrupted(obj) {
		return nil
	}
	return r.removeAnnotation(ctx, obj, infrav1.AnnotationInterruptedApply)
}
