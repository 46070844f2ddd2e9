package preview

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"

	"github.com/captf/captf/pkg/changeset"
)

var (
	// ErrPlanFailed says a member of the fresh plan failed: nothing was
	// applied.
	ErrPlanFailed = errors.New("a member's plan failed")
	// ErrApplyFailed says a member's apply failed; its dependents were not
	// applied.
	ErrApplyFailed = errors.New("an apply failed")
	// ErrHeld says members were held back: they were planned again after
	// their upstream applied, and that plan needs its own approval.
	ErrHeld = errors.New("members are held for their own approval")
)

// Component outcomes of an apply.
const (
	OutcomeApplied = "applied"
	OutcomeFailed  = "failed"
	OutcomeMoved   = "moved"
	// OutcomeBlocked: an upstream failed or moved, so nothing of the
	// component was applied.
	OutcomeBlocked = "blocked"
	// OutcomeHeld: the component waits for its own approval.
	OutcomeHeld = "held"
)

// Applied is what an apply did.
type Applied struct {
	// Fresh is the plan made before anything was applied.
	Fresh *Preview
	// Components says per component in the change what happened, in the
	// order they were considered.
	Components []ComponentOutcome
	// Next is the plan made after this round when members were held: its
	// digest is the one the next apply needs.
	Next *Preview
}

// ComponentOutcome is what happened to one component.
type ComponentOutcome struct {
	Component string `json:"component"`
	Outcome   string `json:"outcome"`
	// Error names no value.
	Error string `json:"error,omitempty"`
}

// Close removes the scratch directories of both plans.
func (a *Applied) Close() {
	if a.Fresh != nil {
		a.Fresh.Close()
	}
	if a.Next != nil {
		a.Next.Close()
	}
}

// ApplyChangeSet plans every member again before applying any. A failed
// member or a digest other than expect applies nothing. Otherwise the
// components are applied in dependency order, each step in its order and
// each planning step exactly as planned; a failure blocks only the
// components that depend on it. Held components are planned again once
// their upstream applied, and that plan is returned in Next for its own
// approval. The returned error wraps ErrMoved, ErrPlanFailed,
// ErrApplyFailed or ErrHeld; Applied is nil only when nothing was planned.
func ApplyChangeSet(ctx context.Context, o Options, expect string) (*Applied, error) {
	fresh, err := PlanChangeSet(ctx, o)
	if err != nil {
		return nil, err
	}
	out := &Applied{Fresh: fresh}
	var failed []string
	for _, m := range fresh.Document.Members {
		if m.Status == changeset.StatusFailed {
			failed = append(failed, m.Name)
		}
	}
	if len(failed) > 0 {
		return out, fmt.Errorf("%w: %v; nothing was applied", ErrPlanFailed, failed)
	}
	if fresh.Document.Digest != expect {
		return out, fmt.Errorf("%w: the change set now digests to %s, not the approved %s; nothing was applied", ErrMoved, fresh.Document.Digest, expect)
	}
	state := map[string]string{}
	applied := map[string]Outputs{}
	var errs []error
	held := false
	for _, level := range fresh.Components {
		for _, c := range level {
			outcome := fresh.applyComponent(ctx, c, state, applied)
			state[c.Name] = outcome.Outcome
			out.Components = append(out.Components, outcome)
			switch outcome.Outcome {
			case OutcomeHeld:
				held = true
			case OutcomeMoved:
				errs = append(errs, fmt.Errorf("%s: %w", c.Name, ErrMoved))
			case OutcomeFailed:
				errs = append(errs, fmt.Errorf("%s: %w", c.Name, ErrApplyFailed))
			}
		}
	}
	if held {
		fmt.Fprintln(o.Log, "captf: planning again for the held members")
		next, err := PlanChangeSet(ctx, o)
		if err != nil {
			errs = append(errs, fmt.Errorf("plan after the first round: %w", err))
		} else {
			out.Next = next
			errs = append(errs, fmt.Errorf("%w: approve %s to apply them", ErrHeld, next.Document.Digest))
		}
	}
	return out, errors.Join(errs...)
}

// applyComponent applies the steps of c in order, unless an upstream in
// the change did not apply or c waits on one.
func (p *Preview) applyComponent(ctx context.Context, c *Component, state map[string]string, applied map[string]Outputs) ComponentOutcome {
	res := ComponentOutcome{Component: c.Name}
	for _, d := range c.DependsOn {
		switch state[d] {
		case OutcomeFailed, OutcomeMoved, OutcomeBlocked:
			res.Outcome = OutcomeBlocked
			res.Error = "upstream " + d + " did not apply"
			return res
		}
	}
	for _, d := range c.DependsOn {
		if state[d] == OutcomeHeld {
			res.Outcome = OutcomeHeld
			return res
		}
	}
	members := map[*Step]*member{}
	for _, m := range p.members {
		if m.comp != c {
			continue
		}
		if m.doc.Status == changeset.StatusHeld {
			res.Outcome = OutcomeHeld
			return res
		}
		if m.step != nil {
			members[m.step] = m
		}
	}
	for _, s := range c.Steps {
		if members[s] == nil && s.Kind != ShellKind {
			res.Outcome = OutcomeFailed
			res.Error = fmt.Sprintf("step %s: captf cannot apply %s steps yet (the digest binds them); nothing of %s was applied", s.Name, s.Kind, c.Name)
			return res
		}
	}
	lookup := func(ctx context.Context, ref StackOutput) ([]byte, bool) {
		if v, ok := p.opts.Seed[ref.Component][ref.Name]; ok {
			return v, true
		}
		if p.inChange[ref.Component] {
			// What the upstream's apply returned, else what its plan
			// said it would expose (an apply may return fewer).
			if v, ok := applied[ref.Component][ref.Name]; ok {
				return v, true
			}
			v, ok := p.planned[ref.Component][ref.Name]
			return v, ok
		}
		v, ok := p.liveOutputs(ctx, ref.Component)[ref.Name]
		return v, ok
	}
	outs := Outputs{}
	applied[c.Name] = outs
	for _, s := range c.Steps {
		var err error
		if m := members[s]; m != nil {
			fmt.Fprintf(p.opts.Log, "captf: applying %s (%s)\n", m.doc.Name, s.Kind)
			var req Request
			req, _, err = p.request(ctx, c, s, lookup, "plan")
			if err == nil {
				var got Outputs
				got, err = m.capability.Apply(ctx, req, m.plan)
				for k, v := range got {
					outs[k] = v
				}
			}
		} else {
			fmt.Fprintf(p.opts.Log, "captf: running %s step %s of %s\n", s.Kind, s.Name, c.Name)
			err = p.runShell(ctx, c, s)
		}
		if err != nil {
			res.Outcome = OutcomeFailed
			if errors.Is(err, ErrMoved) {
				res.Outcome = OutcomeMoved
			}
			res.Error = fmt.Sprintf("step %s: %v", s.Name, err)
			return res
		}
	}
	res.Outcome = OutcomeApplied
	return res
}

// runShell runs a shell step's command with sh -c in the repository root,
// with the environment's vars, and the component, step and environment
// names as CAPTF_COMPONENT, CAPTF_STEP and CAPTF_ENVIRONMENT.
func (p *Preview) runShell(ctx context.Context, c *Component, s *Step) error {
	run, _ := s.Inputs["run"].(string)
	cmd := exec.CommandContext(ctx, "sh", "-c", run)
	cmd.Dir = p.opts.Root
	cmd.Stdout, cmd.Stderr = p.opts.Output, p.opts.Output
	env := os.Environ()
	keys := make([]string, 0, len(p.env.Vars))
	for k := range p.env.Vars {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		env = append(env, k+"="+p.env.Vars[k])
	}
	cmd.Env = append(env, "CAPTF_COMPONENT="+c.Name, "CAPTF_STEP="+s.Name, "CAPTF_ENVIRONMENT="+p.env.Name)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("shell: %w", err)
	}
	return nil
}
