// Package runner is the plan and approved-apply pipeline that the captf CLI
// and the runner Job share: the key check, terraform's init, validate, plan
// and show, the fingerprint, the comparison with an approved hash, and the
// apply of exactly the plan that was compared.
package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/captf/captf/internal/planconfig"
	"github.com/captf/captf/internal/redact"
	"github.com/captf/captf/internal/tfexec"
	"github.com/captf/captf/internal/tfplan"
	"github.com/captf/captf/pkg/fingerprint"
)

// Runner runs one root module under one plan key.
type Runner struct {
	TF     *tfexec.Terraform
	Hasher *fingerprint.Hasher
	// VarFiles are passed to plan as -var-file. Values come from files so a
	// command line never carries one.
	VarFiles []string
	// Progress receives the output of init and validate when they fail.
	Progress io.Writer
	// TempDir is where plan files are made, each in a private directory
	// of its own; the system's temporary directory when empty.
	TempDir string
	// Init, when set, skips init while the root is initialised for what
	// it holds now (see InitStamp). Nil: init every time, as the Job does
	// in its fresh working directory.
	Init *InitStamp
	// NoValidate leaves out the validate step: plan validates the
	// configuration itself and fails on the same errors.
	NoValidate bool
	// Schemas, when set, has Plan read the saved plan file itself with the
	// providers' schemas it caches, rather than run show -json; a plan it
	// cannot read goes to show -json as before.
	Schemas *SchemaCache
	// RuntimeKey, when set, has Plan also bind what the apply runs outside
	// the plan (Planned.Runtime), keyed with it; Hasher must have Detail
	// and Sections "variables" and "configuration".
	RuntimeKey []byte
	// CheckRuntime, when set, runs after the fresh plan hashed to the
	// approved one and before it is applied; an error (wrapping
	// ErrRuntimeChanged) applies nothing.
	CheckRuntime func(approved string, fresh *Planned) error
	// Log, when set, is the log TF writes to (TF.Stdout and TF.Stderr are
	// its Writers): each plan's output is held there until the values the
	// plan marks sensitive are read from the plan's JSON, then written
	// with them hidden, as is all that follows. A plan is then read with
	// show -json, not with Schemas.
	Log *redact.Log
	// Lineage, when set, is the lineage of the state the run must plan
	// from: a plan made from a state of another lineage (the state was
	// deleted, or replaced, after the run was decided on) is applied
	// nowhere, and the error wraps ErrStateReplaced.
	Lineage string
	// replaceWith, when set, gives the -replace flags of every plan the
	// run makes, once init ran (a Job's --replace-member, read from the
	// state); replace holds them then.
	replaceWith func(context.Context) ([]string, error)
	replace     []string
}

// ErrStateReplaced says the state a run planned from is not of the
// lineage it was started for; nothing was applied.
var ErrStateReplaced = errors.New("the state is not the one this run was started for")

// checkLineage returns an error wrapping ErrStateReplaced when r.Lineage
// is set and the saved plan at file was made from a state of another
// lineage. terraform itself refuses to apply the file once the state
// changes after it (tfexec.ErrStalePlan), so a plan that passes here is
// applied to the state the run was started for, or not at all.
func (r *Runner) checkLineage(file string) error {
	if r.Lineage == "" {
		return nil
	}
	prior, err := tfplan.PriorState(file)
	if err != nil {
		return fmt.Errorf("the state the plan was made from: %w", err)
	}
	if prior.Lineage != r.Lineage {
		what := "another state's"
		if prior.Lineage == "" {
			what = "no state (the backend held none)"
		}
		return fmt.Errorf("%w: the plan was made from %s, not from the state the manager read when it started the run: the state was deleted or replaced since; nothing was applied", ErrStateReplaced, what)
	}
	return nil
}

// applyPlanned plans into a private file, with extra flags (-destroy,
// -refresh-only), and applies exactly that file once checkLineage passed:
// what a destroy, a refresh or an ungated apply runs when the run must
// show that it plans from the state it was started for (r.Lineage).
func (r *Runner) applyPlanned(ctx context.Context, extra ...string) error {
	dir, err := os.MkdirTemp(r.TempDir, "captf-plan-*")
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "plan.tfplan")
	if err := r.TF.Plan(ctx, file, slices.Concat(extra, r.replace)...); err != nil {
		return err
	}
	if err := r.checkLineage(file); err != nil {
		return err
	}
	return r.TF.Apply(ctx, file)
}

// ApplyAuto is an ungated apply: in one step, or planned first and
// applied as planned when r.Lineage is set (applyPlanned).
func (r *Runner) ApplyAuto(ctx context.Context) error {
	if r.Lineage == "" && len(r.replace) == 0 {
		return r.TF.ApplyAuto(ctx)
	}
	return r.applyPlanned(ctx)
}

// ApplyRefreshOnly records in the state what every resource really is and
// changes no infrastructure; planned first when r.Lineage is set.
func (r *Runner) ApplyRefreshOnly(ctx context.Context) error {
	if r.Lineage == "" {
		return r.TF.ApplyRefreshOnly(ctx)
	}
	return r.applyPlanned(ctx, "-refresh-only")
}

// Destroy destroys everything the state holds; planned first when
// r.Lineage is set.
func (r *Runner) Destroy(ctx context.Context) error {
	if r.Lineage == "" {
		return r.TF.Destroy(ctx)
	}
	return r.applyPlanned(ctx, "-destroy")
}

// Planned is a fingerprinted plan and its saved plan file. Close removes the
// file; the plan file and the plan JSON never stay in the root module.
type Planned struct {
	*fingerprint.Result
	// Runtime are the blocks the apply runs outside the plan, with their
	// keyed digests, when Runner.RuntimeKey is set.
	Runtime []planconfig.Block
	// Changed names the attributes each resource change changes, when
	// Runner.Log is set.
	Changed []fingerprint.Attributes
	dir     string
	file    string
}

// Close removes the saved plan file.
func (p *Planned) Close() { os.RemoveAll(p.dir) }

// Plan runs init and validate (as r.Init and r.NoValidate say), plan into
// a private temporary file, then show -json streamed into the fingerprint.
func (r *Runner) Plan(ctx context.Context) (*Planned, error) {
	if err := r.prepare(ctx); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(r.TempDir, "captf-plan-*")
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	p := &Planned{dir: dir, file: filepath.Join(dir, "plan.tfplan")}
	held := r.holdPlan()
	defer held.release()
	var cache chan *cached
	if r.Schemas != nil && r.Log == nil {
		// Read the schema cache while terraform plans.
		cache = make(chan *cached, 1)
		go func() { cache <- r.Schemas.read(r.TF) }()
	}
	args := make([]string, 0, len(r.VarFiles)+len(r.replace))
	for _, f := range r.VarFiles {
		args = append(args, "-var-file="+f)
	}
	args = append(args, r.replace...)
	if err := r.TF.Plan(ctx, p.file, args...); err != nil {
		if r.Init != nil {
			// Whatever made the plan fail, the next command inits first.
			r.Init.clear()
		}
		p.Close()
		return nil, err
	}
	if info, err := os.Stat(p.file); err != nil || !info.Mode().IsRegular() {
		p.Close()
		return nil, fmt.Errorf("%s plan succeeded but wrote no plan file; is %s terraform or tofu?", r.TF.Bin, r.TF.Bin)
	}
	if err := r.checkLineage(p.file); err != nil {
		p.Close()
		return nil, err
	}
	var providers map[string]string
	if cache != nil {
		if p.Result, providers, err = r.readPlan(ctx, p.file, <-cache); err != nil {
			p.Result, providers = nil, nil
		}
	}
	if p.Result == nil {
		err = r.TF.Show(ctx, p.file, held.reading(func(plan io.Reader) error {
			var err error
			p.Result, err = r.Hasher.Compute(plan)
			return err
		}))
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("fingerprint: %w", err)
		}
	}
	p.Changed = held.changed
	if r.RuntimeKey != nil {
		if p.Runtime, err = r.bindRuntime(p.Result, providers); err != nil {
			p.Close()
			return nil, fmt.Errorf("what runs at apply: %w", err)
		}
		// Values of variables: never kept beyond the binding.
		p.Sections = nil
	}
	return p, nil
}

// bindRuntime binds the provisioners and provider configurations the
// plan's changes run at apply (internal/planconfig). providers, from a
// plan file read here, gives each change's provider configuration where
// the plan document has no configuration section.
func (r *Runner) bindRuntime(res *fingerprint.Result, providers map[string]string) ([]planconfig.Block, error) {
	if res.Changes == nil {
		return nil, fmt.Errorf("the fingerprint has no Detail")
	}
	in := planconfig.Input{
		Root:          r.TF.Dir,
		DataDir:       r.TF.DataDir(),
		Variables:     res.Sections["variables"],
		Configuration: res.Sections["configuration"],
	}
	for c := range res.Changes.All() {
		if !c.Output {
			in.Changes = append(in.Changes, planconfig.Change{Address: c.Address, Actions: strings.Split(c.Actions, ","), Provider: providers[c.Address]})
		}
	}
	return planconfig.Bind(r.RuntimeKey, in)
}

// prepare runs init and validate, showing their output only on failure.
// With r.Init, init runs only when the root is not initialised for what it
// holds; with r.NoValidate, validate is left to plan.
func (r *Runner) prepare(ctx context.Context) error {
	var out bytes.Buffer
	tf := *r.TF
	tf.Stdout = &out
	if err := r.init(ctx, &tf); err != nil {
		r.progress(out.Bytes())
		return err
	}
	if !r.NoValidate {
		if err := tf.Validate(ctx); err != nil {
			r.progress(out.Bytes())
			return err
		}
	}
	if r.replaceWith != nil {
		var err error
		r.replace, err = r.replaceWith(ctx)
		return err
	}
	return nil
}

func (r *Runner) init(ctx context.Context, tf *tfexec.Terraform) error {
	if r.Init == nil {
		return tf.Init(ctx)
	}
	if r.Init.matches(tf) {
		return nil
	}
	// No stamp while init runs: one that fails leaves none.
	r.Init.clear()
	if err := tf.Init(ctx); err != nil {
		return err
	}
	if err := r.Init.record(tf); err != nil {
		// Without a stamp the next command inits again: slower, not wrong.
		fmt.Fprintf(r.progressOrDiscard(), "captf: warning: init stamp: %v\n", err)
	}
	return nil
}

func (r *Runner) progressOrDiscard() io.Writer {
	if r.Progress == nil {
		return io.Discard
	}
	return r.Progress
}

func (r *Runner) progress(b []byte) {
	if r.Progress != nil {
		r.Progress.Write(b)
	}
}

// hashPattern is the shape of a plan hash of any scheme: p<n>: and 64 hex
// digits. Only p2: ever matches; p1: is recognised to explain that.
var hashPattern = regexp.MustCompile(`^p[0-9]+:[0-9a-f]{64}$`)

// CheckHash refuses an --expect-plan value that is not a plan hash at all.
func CheckHash(h string) error {
	if h != "" && !hashPattern.MatchString(h) {
		return fmt.Errorf("%w: %q is not a plan hash (expected p2: and 64 hex digits)", ErrBadInput, h)
	}
	return nil
}

// Outcome says what an apply did. Fresh is the plan made for it.
type Outcome struct {
	Fresh *fingerprint.Result
	// Runtime are the blocks the fresh plan runs at apply outside the
	// plan, when Runner.RuntimeKey is set.
	Runtime []planconfig.Block
	Applied bool
}

// Apply plans again, with refresh, and fingerprints the fresh plan. When it
// hashes to approved, exactly that saved plan file is applied. Otherwise
// nothing is applied and the error wraps ErrPlanChanged; Outcome.Fresh then
// holds the new plan to approve. An empty fresh plan needs no approval,
// unless a non-empty plan was approved: then it too is a changed plan.
// An empty plan applies nothing, except where only outputs the Hasher
// ignores change (Result.Ignored): they are no change to approve, but the
// state must record them, so that saved plan is applied.
func (r *Runner) Apply(ctx context.Context, approved string) (*Outcome, error) {
	if err := CheckHash(approved); err != nil {
		return nil, err
	}
	p, err := r.Plan(ctx)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	out := &Outcome{Fresh: p.Result, Runtime: p.Runtime}
	fresh := p.Report.PlanHash
	switch {
	case p.Report.Empty() && (approved == "" || approved == fingerprint.EmptyPlanHash):
		if len(p.Ignored) == 0 {
			return out, nil
		}
	case approved == "":
		return out, fmt.Errorf("%w: the plan %s was not approved; nothing was applied", ErrPlanChanged, fresh)
	case !strings.HasPrefix(approved, fingerprint.Prefix):
		return out, fmt.Errorf("%w: %s is a hash of an older scheme, which can no longer be verified; approve the plan again by its %s hash %s; nothing was applied", ErrPlanChanged, approved, fingerprint.Prefix, fresh)
	case !fingerprint.Matches(approved, fresh):
		return out, fmt.Errorf("%w: the fresh plan hashes to %s, not to the approved %s; nothing was applied", ErrPlanChanged, fresh, approved)
	}
	if r.CheckRuntime != nil {
		if err := r.CheckRuntime(approved, p); err != nil {
			return out, err
		}
	}
	if err := r.TF.Apply(ctx, p.file); err != nil {
		return out, err
	}
	out.Applied = true
	return out, nil
}
