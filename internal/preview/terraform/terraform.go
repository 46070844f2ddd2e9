// Package terraform is the terraform-apply capability of plan previews
// (spec 003): it plans a terraform or tofu root module into entries with
// their attributes and side effects, digests the plan's changes, applies
// only a plan that still has the approved digest, and reads the root's
// outputs. docs/preview-terraform.md describes the step's inputs and every
// choice the spec leaves open.
package terraform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/captf/captf/internal/planconfig"
	"github.com/captf/captf/internal/preview"
	"github.com/captf/captf/internal/tfexec"
	"github.com/captf/captf/pkg/changeset"
)

// Kind is the step kind the capability serves.
const Kind = "terraform-apply"

// DigestPrefix starts every member digest of this capability. tf2: binds
// what the plan runs at apply outside it (provisioners, provider
// configurations); tf1: did not.
const DigestPrefix = "tf2:"

// Plan file names inside Request.WorkDir.
const (
	planFileName  = "plan.tfplan"
	applyFileName = "apply.tfplan"
	varsFileName  = "vars.tfvars.json"
)

// Capability plans and applies terraform-apply steps. Its zero value runs
// terraform with the process's environment and discards terraform's own
// output.
type Capability struct {
	// Env is added to the environment of every terraform command, e.g. a
	// TF_CLI_CONFIG_FILE with a provider mirror.
	Env []string
	// Stdout receives terraform's human-readable output of init, plan and
	// apply, which shows values that are not sensitive. Nil discards it.
	Stdout io.Writer
	// Stderr receives terraform's diagnostics. Nil discards them.
	Stderr io.Writer

	// beforeApply, when set, runs between the digest check and the apply:
	// a test changes the state there, as a concurrent apply would.
	beforeApply func()
}

var _ preview.Capability = (*Capability)(nil)

// Kind returns "terraform-apply".
func (c *Capability) Kind() string { return Kind }

// private is what Apply needs beyond the document when it runs in the
// process that planned.
type private struct {
	// planFile is the plan Plan wrote in WorkDir; the caller removes it.
	planFile string
	// runtime are the blocks the plan runs at apply outside it.
	runtime []planconfig.Block
}

// planned is one plan of a root, read and digested.
type planned struct {
	changes  *changes
	outputs  preview.Outputs
	declared []string
	digest   string
}

// Plan runs init, plan and show -json in the step's root and describes the
// plan. A step whose inputs wait on upstream outputs is not planned: its
// member has a hole per upstream and no plan file is written. The digest
// binds the sensitive values under req.Key; a key shorter than
// preview.MinKeySize is refused before anything runs.
func (c *Capability) Plan(ctx context.Context, req preview.Request) (*preview.Plan, error) {
	in, err := readInputs(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Kind, err)
	}
	if err := preview.CheckKey(req.Key); err != nil {
		return nil, fmt.Errorf("%s %s: %w", Kind, in.name, err)
	}
	member := changeset.Member{Name: in.name, Component: req.Component, Capability: Kind, Status: changeset.StatusPlanned}
	if len(req.Missing) > 0 {
		for _, m := range req.Missing {
			member.Holes = append(member.Holes, changeset.Hole{Reason: fmt.Sprintf("inputs from %s; planned again once they apply", m)})
		}
		// A member with holes has no sensitive value; its digest binds
		// the key all the same, so that a plan and an apply under two
		// keys differ in every member.
		sensitive, err := preview.KeyedDigest(req.Key, Kind, []hiddenValue{})
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", Kind, in.name, err)
		}
		if member.PlanDigest, err = changeset.Digest(DigestPrefix, struct {
			Holes     []changeset.Hole `json:"holes"`
			Sensitive string           `json:"sensitive"`
		}{member.Holes, sensitive}); err != nil {
			return nil, fmt.Errorf("%s %s: %w", Kind, in.name, err)
		}
		return &preview.Plan{Member: member, PlannedOutputs: preview.Outputs{}}, nil
	}
	if err := checkWorkDir(req.WorkDir); err != nil {
		return nil, fmt.Errorf("%s %s: %w", Kind, in.name, err)
	}
	planFile := filepath.Join(req.WorkDir, planFileName)
	p, err := c.plan(ctx, in, req.WorkDir, planFile, req.Key)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", Kind, in.name, err)
	}
	member.PlanDigest = p.digest
	return &preview.Plan{
		Member:          member,
		Entries:         p.changes.Entries,
		SideEffects:     p.changes.SideEffects,
		PlannedOutputs:  p.outputs,
		DeclaredOutputs: p.declared,
		Private:         &private{planFile: planFile, runtime: p.changes.Runtime},
	}, nil
}

// Apply plans again into a fresh plan file and applies it only when its
// digest is the approved one; then it returns the root's outputs. The
// digest binds the sensitive values under req.Key, so a sensitive value
// that changed since the approved plan (in this process or another one
// with the same key) refuses the apply too.
func (c *Capability) Apply(ctx context.Context, req preview.Request, approved *preview.Plan) (preview.Outputs, error) {
	in, err := readInputs(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Kind, err)
	}
	if err := preview.CheckKey(req.Key); err != nil {
		return nil, fmt.Errorf("%s %s: %w; nothing applied", Kind, in.name, err)
	}
	if approved == nil || approved.Member.PlanDigest == "" {
		return nil, fmt.Errorf("%s %s: no approved plan digest; nothing applied", Kind, in.name)
	}
	if len(req.Missing) > 0 {
		return nil, fmt.Errorf("%s %s: inputs from %s have no value yet; nothing applied", Kind, in.name, strings.Join(req.Missing, ", "))
	}
	if err := checkWorkDir(req.WorkDir); err != nil {
		return nil, fmt.Errorf("%s %s: %w", Kind, in.name, err)
	}
	planFile := filepath.Join(req.WorkDir, applyFileName)
	defer os.Remove(planFile)
	p, err := c.plan(ctx, in, req.WorkDir, planFile, req.Key)
	if err != nil {
		return nil, fmt.Errorf("%s %s: plan again: %w", Kind, in.name, err)
	}
	want := approved.Member.PlanDigest
	if p.digest != want {
		var moved string
		if a, ok := approved.Private.(*private); ok {
			if m := planconfig.Compare(a.runtime, p.changes.Runtime); len(m) > 0 {
				moved = "; what runs at apply moved: " + describeMoved(m)
			}
		}
		return nil, fmt.Errorf("%s %s: approved %s, planned now %s%s; nothing applied: %w", Kind, in.name, want, p.digest, moved, preview.ErrMoved)
	}
	if c.beforeApply != nil {
		c.beforeApply()
	}
	tf := c.terraform(in)
	if err := tf.Apply(ctx, planFile); err != nil {
		if errors.Is(err, tfexec.ErrStalePlan) {
			return nil, fmt.Errorf("%s %s: %w; nothing applied: %w", Kind, in.name, err, preview.ErrMoved)
		}
		return nil, fmt.Errorf("%s %s: %w", Kind, in.name, err)
	}
	out, err := readOutputs(ctx, tf)
	if err != nil {
		return nil, fmt.Errorf("%s %s: applied; %w", Kind, in.name, err)
	}
	return out, nil
}

// Outputs runs init and output -json in the step's root. Sensitive outputs
// are left out; a root that never ran has none.
func (c *Capability) Outputs(ctx context.Context, req preview.Request) (preview.Outputs, error) {
	in, err := readInputs(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Kind, err)
	}
	tf := c.terraform(in)
	if err := tf.Init(ctx); err != nil {
		return nil, fmt.Errorf("%s %s: %w", Kind, in.name, err)
	}
	out, err := readOutputs(ctx, tf)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", Kind, in.name, err)
	}
	return out, nil
}

func checkWorkDir(dir string) error {
	if dir == "" {
		return errors.New("no work directory")
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("work directory %s is not a directory", dir)
	}
	return nil
}

func (c *Capability) terraform(in *inputs) *tfexec.Terraform {
	// The step's environment comes first, so that the capability's own Env
	// (a test's or an operator's) wins.
	env := slices.Concat(in.env, c.Env)
	return &tfexec.Terraform{Bin: in.bin, Dir: in.root, Env: env, Stdout: c.Stdout, Stderr: c.Stderr}
}

// plan runs init, plan -detailed-exitcode -out=planFile and show -json,
// and reads the plan in memory.
func (c *Capability) plan(ctx context.Context, in *inputs, workDir, planFile string, key []byte) (*planned, error) {
	tf := c.terraform(in)
	if err := tf.Init(ctx); err != nil {
		return nil, err
	}
	var args []string
	for _, f := range in.varFiles {
		args = append(args, "-var-file="+f)
	}
	if len(in.vars) > 0 {
		// A file rather than -var: no command line (ps, logs) carries a
		// value. It comes last so the step's vars win over its var files,
		// and it is gone before terraform's plan is read.
		f, err := writeVars(workDir, in.vars)
		if f != "" {
			defer os.Remove(f)
		}
		if err != nil {
			return nil, err
		}
		args = append(args, "-var-file="+f)
	}
	if _, err := tf.PlanChanges(ctx, planFile, args...); err != nil {
		return nil, err
	}
	// The step's vars file is gone once the plan is read (deferred above);
	// the plan's variables carry their values.
	var plan tfjson.Plan
	plan.UseJSONNumber(true)
	err := tf.Show(ctx, planFile, func(r io.Reader) error {
		if err := json.NewDecoder(r).Decode(&plan); err != nil {
			return fmt.Errorf("read plan json: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	runtime, err := bindRuntime(&plan, tf, key)
	if err != nil {
		return nil, fmt.Errorf("what runs at apply: %w", err)
	}
	return summarize(&plan, in.name, key, runtime)
}

func writeVars(dir string, vars map[string]any) (string, error) {
	b, err := json.Marshal(vars)
	if err != nil {
		return "", fmt.Errorf(`input "vars": %w`, err)
	}
	f := filepath.Join(dir, varsFileName)
	if err := os.WriteFile(f, b, 0o600); err != nil {
		return f, fmt.Errorf("write vars: %w", err)
	}
	return f, nil
}

// summarize reads a decoded plan: its changes, its digest with the
// sensitive values and what runs at apply (runtime, from bindRuntime)
// bound under key, and the outputs it already knows.
func summarize(plan *tfjson.Plan, member string, key []byte, runtime []planconfig.Block) (*planned, error) {
	sec := plannedSecrets(plan)
	ch, err := readChanges(plan, member, sec)
	if err != nil {
		return nil, fmt.Errorf("read plan: %w", err)
	}
	ch.runsAtApply(member, runtime)
	if ch.Sensitive, err = preview.KeyedDigest(key, Kind, ch.hidden); err != nil {
		return nil, err
	}
	digest, err := changeset.Digest(DigestPrefix, ch)
	if err != nil {
		return nil, err
	}
	return &planned{
		changes:  ch,
		outputs:  plannedOutputs(plan, sec),
		declared: declaredOutputs(plan),
		digest:   digest,
	}, nil
}

// declaredOutputs names the outputs the root has once the plan applied:
// those of planned_values and every output change that does not delete
// the output.
func declaredOutputs(plan *tfjson.Plan) []string {
	names := []string{}
	if plan.PlannedValues != nil {
		for name := range plan.PlannedValues.Outputs {
			names = append(names, name)
		}
	}
	for name, c := range plan.OutputChanges {
		if c != nil && !c.Actions.Delete() && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// plannedOutputs are the outputs whose values the plan knows: those of
// planned_values less each one unknown after apply in any part, each one
// marked sensitive and each one holding a sensitive value.
func plannedOutputs(plan *tfjson.Plan, sec *secrets) preview.Outputs {
	out := preview.Outputs{}
	if plan.PlannedValues == nil {
		return out
	}
	for name, o := range plan.PlannedValues.Outputs {
		if o == nil || o.Sensitive || sec.taints(o.Value) {
			continue
		}
		if c := plan.OutputChanges[name]; c != nil && (hasTrue(c.AfterUnknown) || hasTrue(c.AfterSensitive)) {
			continue
		}
		out[name] = rawJSON(o.Value)
	}
	return out
}

// readOutputs runs output -json: each output not sensitive and holding no
// sensitive output's value, as JSON with numbers as written.
func readOutputs(ctx context.Context, tf *tfexec.Terraform) (preview.Outputs, error) {
	var raw map[string]struct {
		Sensitive bool `json:"sensitive"`
		Value     any  `json:"value"`
	}
	err := tf.Output(ctx, func(r io.Reader) error {
		dec := json.NewDecoder(r)
		dec.UseNumber()
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("read outputs json: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sec := &secrets{scalars: map[string]bool{}}
	for _, o := range raw {
		if o.Sensitive {
			sec.addAll(o.Value)
		}
	}
	out := preview.Outputs{}
	for name, o := range raw {
		if o.Sensitive || sec.taints(o.Value) {
			continue
		}
		out[name] = rawJSON(o.Value)
	}
	return out, nil
}
