package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/captf/captf/internal/render"
)

// ErrNeedsApproval says an apply without approval (Job.AppliedInputs)
// found more to apply than the values its approval leaves out; nothing
// was applied.
var ErrNeedsApproval = errors.New("the change needs an approval")

// applyUnapproved applies a change that needs no new approval because the
// approval hash leaves its values out (a pool's rotated bootstrap data),
// once it has shown, in this Job, that the change is only that:
//
//  1. the staged inputs differ from the last applied ones (in
//     Job.AppliedInputs) only in the values of Job.Unapproved, the root
//     module but for the inputs hash it records not at all;
//  2. after a refresh-only apply of the last applied inputs, which writes
//     the state a membership refresh writes, a plan of those inputs
//     without refresh changes nothing: no drift, no change that a data
//     source or a resource deleted outside terraform brings, no import,
//     move or forget;
//  3. then the staged inputs are planned against that same refreshed
//     state, and the saved plan is applied under the destructive-plan
//     guard.
//
// So what it applies is what the new values change and nothing else. When
// 1 or 2 fails, nothing is applied and the error wraps ErrNeedsApproval,
// naming variables and addresses only. The files it compares may have
// been edited by whoever can write Secrets: the check holds whatever they
// hold, as it tests them against the state.
func (j *Job) applyUnapproved(ctx context.Context, r *Runner) (*Changes, error) {
	applied, err := readInputs(j.AppliedInputs)
	if err != nil {
		return nil, fmt.Errorf("%w: the last applied inputs: %w", ErrNeedsApproval, err)
	}
	// It plans them too.
	if err := hideInputs(r.Log, applied); err != nil {
		return nil, err
	}
	staged, err := readInputs(j.Workdir)
	if err != nil {
		return nil, err
	}
	d, err := render.Compare(applied[0], applied[1], staged[0], staged[1])
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadInput, err)
	}
	if d.Root {
		return nil, fmt.Errorf("%w: the root module differs from the last applied one; nothing was applied", ErrNeedsApproval)
	}
	var others []string
	for _, n := range d.Variables {
		if !slices.Contains(j.Unapproved, n) {
			others = append(others, n)
		}
	}
	if len(others) > 0 {
		return nil, fmt.Errorf("%w: variables other than %s changed (%s); nothing was applied", ErrNeedsApproval, strings.Join(j.Unapproved, ", "), strings.Join(others, ", "))
	}
	if err := writeInputs(j.Workdir, applied); err != nil {
		return nil, err
	}
	if err := r.prepareUnplanned(ctx); err != nil {
		return nil, err
	}
	if err := r.ApplyRefreshOnly(ctx); err != nil {
		return nil, err
	}
	p, err := r.countedPlan(ctx, "-refresh=false")
	if err != nil {
		return nil, err
	}
	p.Close()
	if pending := append(slices.Clone(p.changes.Resources), p.others...); len(pending) > 0 {
		sort.Strings(pending)
		if len(pending) > MaxChangedResources {
			pending = append(pending[:MaxChangedResources], "…")
		}
		return nil, fmt.Errorf("%w: the last applied inputs plan changes of their own (%s); nothing was applied", ErrNeedsApproval, strings.Join(pending, ", "))
	}
	if err := writeInputs(j.Workdir, staged); err != nil {
		return nil, err
	}
	return r.guardedApply(ctx, nil, "-refresh=false")
}

// readInputs reads InputFiles from dir.
func readInputs(dir string) ([2][]byte, error) {
	var files [2][]byte
	for i, f := range InputFiles {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return files, fmt.Errorf("%w: inputs: %w", ErrBadInput, err)
		}
		files[i] = b
	}
	return files, nil
}

// writeInputs writes files as InputFiles in dir (the work folder).
func writeInputs(dir string, files [2][]byte) error {
	for i, f := range InputFiles {
		if err := os.WriteFile(filepath.Join(dir, f), files[i], 0o600); err != nil {
			return fmt.Errorf("stage inputs: %w", err)
		}
	}
	return nil
}

// stateOnlyChanges are the entries "<address> (<label>)" of what a plan
// changes of managed resources in the state alone, which CountChanges
// leaves out: imports, moves and forgets.
func stateOnlyChanges(p *tfjson.Plan) []string {
	var out []string
	for _, rc := range p.ResourceChanges {
		if rc.Mode != tfjson.ManagedResourceMode || rc.Change == nil {
			continue
		}
		switch {
		case slices.Contains(rc.Change.Actions, tfjson.ActionForget):
			out = append(out, rc.Address+" (forget)")
		case rc.Change.Importing != nil:
			out = append(out, rc.Address+" (import)")
		case rc.PreviousAddress != "" && rc.PreviousAddress != rc.Address:
			out = append(out, rc.Address+" (move)")
		}
	}
	return out
}
