package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/render"
)

// A held change (spec 002: a pool's ExportsChange plan). Under either
// policy, a change of the kind's held variable (Kind.Held: a pool's
// cluster's exports) whose plan deletes or replaces waits as a plan with
// reason ExportsChange, whose approval binds the approval hash of the
// input set (in spec.inputsHash) rather than a plan hash. While it waits
// the object keeps applying with the value the last apply ran, so its
// other changes (a scale) go on under Automatic. Approved, the apply runs
// under the destructive-plan guard with --allow-deletes-hash: it may
// delete or replace for exactly that input set. The plan is moot when the
// change is withdrawn (the value is the applied one again) or replaced
// (the inputs no longer have its approval hash).

// held is what the last successful apply ran of a held variable that
// changed since: the value, and that apply's run.
type held struct {
	value   json.RawMessage
	applied *appliedRun
}

// heldChange is the change of obj's held variable between what the last
// successful apply ran (its state records stateHash) and root; nil when
// the kind holds none, nothing was applied, the durable inputs do not say
// what was, or the value is the same.
func (r *Reconciler) heldChange(ctx context.Context, obj Object, root *render.Root, stateHash string) (*held, error) {
	name := r.kind().Held()
	if name == "" || stateHash == "" || stateHash == root.InputsHash {
		return nil, nil
	}
	applied, err := r.appliedInputs(ctx, r.Client, obj, stateHash)
	if err != nil || applied == nil {
		return nil, err
	}
	was, err := variable(applied.root.Vars, name)
	if err != nil {
		return nil, err
	}
	now, err := variable(root.Vars, name)
	if err != nil || bytes.Equal(was, now) {
		return nil, err
	}
	return &held{value: was, applied: applied}, nil
}

// reconcileHeld takes the reconcile of an object with a due apply while
// an ExportsChange plan of its current inputs waits or was approved, and
// says so (handled). Otherwise it drops an ExportsChange plan that is
// moot, and reports whether the held variable changed (a plan of these
// inputs is then an ExportsChange plan if it deletes or replaces).
func (r *Reconciler) reconcileHeld(ctx context.Context, obj Object, key []byte, root *render.Root, state *stateRead) (res ctrl.Result, handled, changed bool, err error) {
	stateHash := state.InputsHash()
	change, err := r.heldChange(ctx, obj, root, stateHash)
	if err != nil {
		return ctrl.Result{}, false, false, err
	}
	st := obj.GetRunnerStatus()
	p := st.Plan
	waiting := p != nil && p.Reason == infrav1.ReasonExportsChange
	if waiting && (change == nil || p.InputsHash != root.ApprovalHash) {
		// Withdrawn or replaced: the plan is moot (syncPlans supersedes
		// its TerraformPlan).
		st.Plan, p, waiting = nil, nil, false
	}
	if change == nil {
		return ctrl.Result{}, false, false, nil
	}
	if !waiting {
		// Its plan may have been lost from status (a failed write, a
		// move): take it up again.
		if p, err = r.reattach(ctx, obj, root); err != nil || p == nil || p.Reason != infrav1.ReasonExportsChange {
			return ctrl.Result{}, false, true, err
		}
	}
	by, err := r.approvedBy(ctx, obj, p.PlanHash)
	if err != nil {
		return ctrl.Result{}, true, true, err
	}
	if by != "" {
		req := jobRequest{op: infrav1.OperationApply, guard: true, approved: true, approvedHash: p.PlanHash, allowDeletes: p.InputsHash, digest: p.ImageDigest,
			reviewedDeletes: reviewedDeletes(p), reviewedDestroy: p.Destroy, lineage: state.lineage()}
		if ref := st.PendingPlanRef; ref != nil {
			req.plan = ref.Name
		}
		return ctrl.Result{}, true, true, r.startJob(ctx, obj, root, req)
	}
	// It waits; meanwhile the object applies with what was applied of the
	// held variable. Under Manual every change waits for an approval, so
	// nothing else runs but the idle Jobs; nor after the guard stopped
	// the held inputs (the plan's approval covers them).
	heldRoot, err := r.renderHeld(ctx, obj, key, change.value)
	if err != nil {
		return ctrl.Result{}, true, true, err
	}
	idle := func() (*appliedRun, error) { return change.applied, nil }
	if heldRoot.InputsHash == stateHash || policy(obj) == infrav1.ApplyManual || blocked(st.LastRun) {
		res, err := r.idleJobs(ctx, obj, state, idle)
		return res, true, true, err
	}
	return ctrl.Result{}, true, true, r.startJob(ctx, obj, heldRoot, jobRequest{op: infrav1.OperationApply, guard: !obj.GetRunnerSpec().AllowDestructivePlans, lineage: state.lineage()})
}

// renderHeld renders obj with the kind's held variable set to value, what
// the last successful apply ran.
func (r *Reconciler) renderHeld(ctx context.Context, obj Object, key []byte, value json.RawMessage) (*render.Root, error) {
	own, wait, err := r.kind().Inputs(ctx, r.Client, obj)
	if err != nil {
		return nil, err
	}
	if wait != nil {
		return nil, fmt.Errorf("%w: %s", errInputs, wait.Message)
	}
	if err := r.appliedValues(ctx, obj, own); err != nil {
		return nil, err
	}
	v := own[r.kind().Held()]
	v.Value = value
	own[r.kind().Held()] = v
	return r.renderWith(ctx, obj, key, own)
}

// reviewedDeletes are the addresses a plan's summary lists as deleted or
// replaced (entries "<address> (<labels>)"): what the approval of an
// ExportsChange plan lets its apply delete (--reviewed-delete).
func reviewedDeletes(p *infrav1.PlanStatus) []string {
	var out []string
	for _, e := range p.Resources {
		i := strings.LastIndex(e, " (")
		if i < 0 || !strings.HasSuffix(e, ")") {
			continue
		}
		for _, label := range strings.Split(e[i+2:len(e)-1], ", ") {
			if label == "delete" || label == "replace" {
				out = append(out, e[:i])
				break
			}
		}
	}
	return out
}
