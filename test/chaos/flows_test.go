package chaos

import (
	"time"

	infrav1 "github.com/captf/captf/api/v1alpha1"
)

// flow is one of the manager's flows (issue 9): setup runs without
// faults, act is the part the faults hit.
type flow struct {
	name  string
	setup func(*run) error
	act   func(*run) error
	// phases are how many TerraformPlans end in each phase; Superseded is
	// not counted (any number of moot plans is fine).
	phases map[infrav1.PlanPhase]int
	// webhook: act makes a TerraformPlan, so the webhook matters.
	webhook bool
	// drift: the object is of the drift module (driftImage).
	drift bool
	// rooted: the object is of the provider-root module (rootedImage).
	rooted bool
	// fresh: setup makes no object; act creates it, so no state is
	// written before the faulted part.
	fresh bool
	// check is what the flow's own outcome must be, beyond the invariants
	// every flow keeps (invariants_test.go).
	check func(*run) []violation
	// of is the object the invariants every flow keeps are about, when it
	// is not the run's TerraformCluster (clusterSubject).
	of *subject
	// clusterAPI: the flow needs Cluster API's CRDs (its Cluster and
	// Machine), so the manager reconciles TerraformMachines.
	clusterAPI bool
}

// subject is the object the flow's invariants are about.
func (fl *flow) subject() subject {
	if fl.of != nil {
		return *fl.of
	}
	return clusterSubject
}

// provider: the flow's modules need the captftest provider (a Cluster
// API flow's machine module does).
func (fl *flow) provider() bool { return fl.drift || fl.rooted || fl.clusterAPI }

// firstApplied creates the object under Manual and waits for its first
// apply, which is not gated.
func firstApplied(r *run) error {
	if err := r.create(infrav1.ApplyManual); err != nil {
		return err
	}
	_, err := r.wait("first apply", ready)
	return err
}

var flows = []*flow{
	{
		// The first apply is not gated; what it leaves behind must gate
		// the next change, so the flow goes on until that change waits.
		name:  "first-apply",
		setup: func(*run) error { return nil },
		act: func(r *run) error {
			if err := firstApplied(r); err != nil {
				return err
			}
			if err := r.setVars(map[string]string{"size": `"large"`}); err != nil {
				return err
			}
			_, err := r.wait("the next change awaits approval", waiting(infrav1.ReasonPlanAwaitingApproval, ""))
			return err
		},
		phases: map[infrav1.PlanPhase]int{infrav1.PlanPending: 1},
		fresh:  true,
	},
	{
		name:  "approve-annotation",
		setup: firstApplied,
		act: func(r *run) error {
			if err := r.setVars(map[string]string{"size": `"large"`}); err != nil {
				return err
			}
			r.planned()
			tc, err := r.wait("plan awaits approval", waiting(infrav1.ReasonPlanAwaitingApproval, ""))
			if err != nil {
				return err
			}
			if err := r.approveAnnotation(tc.Status.Plan.PlanHash); err != nil {
				return err
			}
			_, err = r.wait("approved apply", applied)
			return err
		},
		phases:  map[infrav1.PlanPhase]int{infrav1.PlanApplied: 1},
		webhook: true,
	},
	{
		name:  "approve-plan-object",
		setup: firstApplied,
		act: func(r *run) error {
			if err := r.setVars(map[string]string{"size": `"large"`}); err != nil {
				return err
			}
			r.planned()
			tc, err := r.wait("plan awaits approval", waiting(infrav1.ReasonPlanAwaitingApproval, ""))
			if err != nil {
				return err
			}
			if err := r.approvePlan(tc); err != nil {
				return err
			}
			_, err = r.wait("approved apply", applied)
			return err
		},
		phases:  map[infrav1.PlanPhase]int{infrav1.PlanApplied: 1},
		webhook: true,
	},
	{
		// The module's clock makes every plan differ: the approved plan
		// is stale when applied, nothing is applied, the new plan waits.
		name:  "plan-changed",
		setup: firstApplied,
		act: func(r *run) error {
			if err := r.setVars(map[string]string{"size": `"small"`, "moving": "true"}); err != nil {
				return err
			}
			r.planned()
			tc, err := r.wait("plan awaits approval", waiting(infrav1.ReasonPlanAwaitingApproval, ""))
			if err != nil {
				return err
			}
			// plantimestamp() has a resolution of one second.
			time.Sleep(1100 * time.Millisecond)
			approved := tc.Status.Plan.PlanHash
			if err := r.approveAnnotation(approved); err != nil {
				return err
			}
			_, err = r.wait("the changed plan waits", waiting(infrav1.ReasonPlanChanged, approved))
			return err
		},
		phases:  map[infrav1.PlanPhase]int{infrav1.PlanFailed: 1, infrav1.PlanPending: 1},
		webhook: true,
	},
	{
		// An approval of a plan that became moot stays and approves the
		// same plan when it comes back (spec 001).
		name:  "leftover-approval",
		setup: firstApplied,
		act: func(r *run) error {
			if err := r.setVars(map[string]string{"size": `"large"`}); err != nil {
				return err
			}
			tc, err := r.wait("plan for large", waiting(infrav1.ReasonPlanAwaitingApproval, ""))
			if err != nil {
				return err
			}
			large := tc.Status.Plan.PlanHash
			if err := r.setVars(map[string]string{"size": `"medium"`}); err != nil {
				return err
			}
			if _, err := r.wait("plan for medium", waiting(infrav1.ReasonPlanAwaitingApproval, large)); err != nil {
				return err
			}
			if err := r.approveAnnotation(large); err != nil {
				return err
			}
			time.Sleep(2 * time.Second)
			if err := r.setVars(map[string]string{"size": `"large"`}); err != nil {
				return err
			}
			_, err = r.wait("applied with the leftover approval", applied)
			return err
		},
		phases: map[infrav1.PlanPhase]int{infrav1.PlanApplied: 1},
	},
	{
		// Switching to Automatic applies what waited; the plan is moot.
		name:  "switch-to-automatic",
		setup: firstApplied,
		act: func(r *run) error {
			if err := r.setVars(map[string]string{"size": `"large"`}); err != nil {
				return err
			}
			r.planned()
			if _, err := r.wait("plan awaits approval", waiting(infrav1.ReasonPlanAwaitingApproval, "")); err != nil {
				return err
			}
			if err := r.toAutomatic(); err != nil {
				return err
			}
			_, err := r.wait("applied under Automatic", applied)
			return err
		},
		phases:  map[infrav1.PlanPhase]int{},
		webhook: true,
	},
	{
		name:   "delete",
		setup:  firstApplied,
		act:    deleted,
		phases: map[infrav1.PlanPhase]int{},
	},
}

// deleted deletes the object and waits until it is gone (destroyed, or
// under Retain released).
func deleted(r *run) error {
	tc, err := r.get()
	if err != nil {
		return err
	}
	if err := r.f.env.Client.Delete(r.ctx, tc); err != nil {
		return err
	}
	_, err = r.wait("the object deleted and released", gone)
	return err
}

func flowNamed(name string) *flow {
	for _, f := range flows {
		if f.name == name {
			return f
		}
	}
	return nil
}
