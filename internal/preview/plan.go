package preview

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/captf/captf/pkg/changeset"
)

// CompositionCapability is the capability a member names when it stands
// for steps without plan: a component none of whose steps can plan, or the
// "<component>#inputs" member beside a component's planning steps.
const CompositionCapability = "composition"

// InputsSuffix names the member of a component's steps without plan when
// the component also has steps with plan.
const InputsSuffix = "#inputs"

// Options say what to preview and how.
type Options struct {
	// Root is the repository root: relative paths of the project file and
	// of steps' inputs are relative to it; shell steps run in it.
	Root    string
	Project *Project
	// Env names the environment whose vars the steps get; empty for none.
	Env string
	// ChangedFrom is a git revision: only components whose steps read a
	// file changed since it (and their dependents) are planned. Empty
	// plans every component.
	ChangedFrom string
	// Seed supplies output values by component and name instead of reading
	// them (--seed-outputs).
	Seed     map[string]Outputs
	Registry Registry
	// Key is the preview key every capability binds its sensitive values
	// under (Request.Key), at least MinKeySize bytes. The plan and the
	// apply of one change set need the same key: under another, every
	// member a capability plans digests differently.
	Key []byte
	// Log gets progress lines for people; they never hold a value.
	Log io.Writer
	// Output gets what shell steps print on apply.
	Output io.Writer
	// Parallel caps how many members of one level plan at once; 4 when 0.
	Parallel int
	// TempDir is where the members' scratch directories are made (plan
	// files among them); the system's temporary directory when empty.
	TempDir string
}

// Preview is a planned change set: the document and what an apply needs.
type Preview struct {
	Document *changeset.Document
	// Components lists the components in the change by dependency level,
	// in the file's order within a level.
	Components [][]*Component

	opts     Options
	env      *Environment
	inChange map[string]bool
	members  []*member
	planned  map[string]Outputs
	// declared names the outputs a component in the change will have,
	// for the components whose every plan could say.
	declared map[string][]string
	live     map[string]Outputs
	scratch  string
}

// member is one member of the document and how it was planned.
type member struct {
	comp *Component
	// step is the planning step; nil for a composition member.
	step *Step
	// capability plans step; nil when no capability serves its kind.
	capability Capability
	plan       *Plan
	doc        changeset.Member
	entries    []changeset.Entry
	effects    []changeset.SideEffect
}

// PlanChangeSet plans every member of the change without changing anything and
// assembles the change-set document with its summary and digest. A member
// whose plan fails is in the document with status failed; an error is
// returned only when the preview itself cannot be made. Close the Preview
// to remove its scratch directories.
func PlanChangeSet(ctx context.Context, o Options) (*Preview, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	// Members of a level plan concurrently and may log at once.
	o.Log = &lockedWriter{w: o.Log}
	if o.Output == nil {
		o.Output = io.Discard
	}
	if o.Parallel <= 0 {
		o.Parallel = 4
	}
	if err := CheckKey(o.Key); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	env, err := o.Project.Environment(o.Env)
	if err != nil {
		return nil, err
	}
	for _, comp := range sortedKeys(o.Seed) {
		if o.Project.Component(comp) == nil {
			return nil, fmt.Errorf("%w: seed outputs: no component is named %q", ErrInvalid, comp)
		}
	}
	if err := checkReferences(o.Project, o.Registry); err != nil {
		return nil, err
	}
	if err := checkInputs(o.Project, o.Registry, o.Root); err != nil {
		return nil, err
	}
	inChange, err := selectComponents(ctx, o)
	if err != nil {
		return nil, err
	}
	scratch, err := os.MkdirTemp(o.TempDir, "captf-preview-*")
	if err != nil {
		return nil, fmt.Errorf("scratch directory: %w", err)
	}
	p := &Preview{
		opts:     o,
		env:      env,
		inChange: inChange,
		planned:  map[string]Outputs{},
		declared: map[string][]string{},
		live:     map[string]Outputs{},
		scratch:  scratch,
	}
	p.Components = levels(o.Project, inChange)
	for _, level := range p.Components {
		if err := p.planLevel(ctx, level); err != nil {
			p.Close()
			return nil, err
		}
	}
	if err := p.assemble(); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// Close removes the scratch directories of the members.
func (p *Preview) Close() {
	if p.scratch != "" {
		os.RemoveAll(p.scratch)
	}
}

// checkInputs asks the capability of each step, when it is an
// InputChecker, to check the step's inputs.
func checkInputs(proj *Project, reg Registry, root string) error {
	for _, c := range proj.Components {
		for i, s := range c.Steps {
			ic, ok := reg.Lookup(s.Kind).(InputChecker)
			if !ok {
				continue
			}
			if err := ic.CheckInputs(root, s.Inputs); err != nil {
				return fmt.Errorf("%w: %s:%d: components.%s.steps[%d]: %w", ErrInvalid, proj.File, s.line, c.Name, i, err)
			}
		}
	}
	return nil
}

// checkReferences refuses a stackOutput of a component none of whose steps
// has outputs: no read and no plan could ever give it a value.
func checkReferences(proj *Project, reg Registry) error {
	for _, c := range proj.Components {
		for i, s := range c.Steps {
			for _, ref := range references(s.Inputs) {
				target := proj.Component(ref.Component)
				if !slices.ContainsFunc(target.Steps, func(t *Step) bool { return reg.plans(t.Kind) }) {
					return fmt.Errorf("%w: %s:%d: components.%s.steps[%d].inputs: stackOutput reads component %q, none of whose steps has outputs",
						ErrInvalid, proj.File, s.line, c.Name, i, ref.Component)
				}
			}
		}
	}
	return nil
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// levels orders the components in the change: each level depends only on
// earlier levels, and keeps the file's order.
func levels(proj *Project, inChange map[string]bool) [][]*Component {
	level := map[string]int{}
	var out [][]*Component
	placed := 0
	for placed < len(inChange) {
		var this []*Component
		for _, c := range proj.Components {
			if !inChange[c.Name] {
				continue
			}
			if _, done := level[c.Name]; done {
				continue
			}
			ready := true
			for _, d := range c.DependsOn {
				if l, done := level[d]; inChange[d] && (!done || l == len(out)) {
					ready = false
				}
			}
			if ready {
				this = append(this, c)
			}
		}
		for _, c := range this {
			level[c.Name] = len(out)
		}
		placed += len(this)
		out = append(out, this)
	}
	return out
}

// planLevel builds the members of one level's components and plans them
// concurrently.
func (p *Preview) planLevel(ctx context.Context, level []*Component) error {
	var todo []*member
	for _, c := range level {
		ms, err := p.membersOf(ctx, c)
		if err != nil {
			return err
		}
		for _, m := range ms {
			p.members = append(p.members, m)
			if m.step != nil {
				todo = append(todo, m)
			}
		}
	}
	reqs := make([]Request, len(todo))
	unknown := make([][]string, len(todo))
	for i, m := range todo {
		if err := p.checkDeclared(m); err != nil {
			return err
		}
		var err error
		reqs[i], unknown[i], err = p.request(ctx, m.comp, m.step, p.planLookup, "plan")
		if err != nil {
			return err
		}
		m.doc.DeployedOutputs, m.doc.PlannedOutputs, m.doc.SeededOutputs = p.outputsRead(m.step)
	}
	sem := make(chan struct{}, p.opts.Parallel)
	var wg sync.WaitGroup
	for i, m := range todo {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			p.planMember(ctx, m, reqs[i], unknown[i])
		})
	}
	wg.Wait()
	failComponents(p.members)
	for _, c := range level {
		outs := Outputs{}
		declared, known := []string{}, true
		for _, m := range p.members {
			if m.comp != c || m.step == nil {
				continue
			}
			if m.plan != nil && m.doc.Status == changeset.StatusPlanned {
				for k, v := range m.plan.PlannedOutputs {
					outs[k] = v
				}
			}
			if m.plan == nil || m.plan.DeclaredOutputs == nil {
				known = false
			} else {
				declared = append(declared, m.plan.DeclaredOutputs...)
			}
		}
		p.planned[c.Name] = outs
		if known {
			slices.Sort(declared)
			p.declared[c.Name] = slices.Compact(declared)
		}
	}
	return nil
}

// checkDeclared refuses a stackOutput of m that names an output its
// upstream in the change does not declare: it would never get a value,
// and the member would be held round after round.
func (p *Preview) checkDeclared(m *member) error {
	for _, ref := range references(m.step.Inputs) {
		if _, seeded := p.opts.Seed[ref.Component][ref.Name]; seeded {
			continue
		}
		declared, known := p.declared[ref.Component]
		if !known || slices.Contains(declared, ref.Name) {
			continue
		}
		has := "declares no outputs"
		if len(declared) > 0 {
			has = "declares " + strings.Join(declared, ", ")
		}
		return fmt.Errorf("%w: component %s, step %s: stackOutput {component: %s, name: %s}: %s has no output %q (it %s)",
			ErrInvalid, m.comp.Name, m.step.Name, ref.Component, ref.Name, ref.Component, ref.Name, has)
	}
	return nil
}

// outputsRead sorts the stackOutput references of step s that have a
// value by where it came from: the deployed outputs of a component
// outside the change, the plan of one in it, or --seed-outputs.
func (p *Preview) outputsRead(s *Step) (deployed, planned, seeded []string) {
	for _, ref := range references(s.Inputs) {
		name := ref.String()
		switch _, isSeed := p.opts.Seed[ref.Component][ref.Name]; {
		case isSeed:
			seeded = appendNew(seeded, name)
		case p.inChange[ref.Component]:
			if _, ok := p.planned[ref.Component][ref.Name]; ok {
				planned = appendNew(planned, name)
			}
		default:
			if _, ok := p.live[ref.Component][ref.Name]; ok {
				deployed = appendNew(deployed, name)
			}
		}
	}
	return deployed, planned, seeded
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// failComponents fails every member of a component one of whose steps
// failed to plan (spec 003: a step whose plan throws makes its component's
// members plan failed). What they planned is dropped: nothing of a failed
// component can apply.
func failComponents(members []*member) {
	failed := map[*Component]*member{}
	for _, m := range members {
		if m.doc.Status == changeset.StatusFailed && failed[m.comp] == nil {
			failed[m.comp] = m
		}
	}
	for _, m := range members {
		first := failed[m.comp]
		if first == nil || m.doc.Status == changeset.StatusFailed {
			continue
		}
		m.doc.Status = changeset.StatusFailed
		m.doc.Error = fmt.Sprintf("member %s of component %s failed to plan", first.doc.Name, m.comp.Name)
		m.doc.UnknownInputs = nil
		m.entries, m.effects = nil, nil
	}
}

// membersOf makes one member per planning step of c, and one composition
// member for its steps without plan when spec 003 asks for it.
func (p *Preview) membersOf(ctx context.Context, c *Component) ([]*member, error) {
	var ms []*member
	var without []*Step
	planning := 0
	for _, s := range c.Steps {
		if p.opts.Registry.plans(s.Kind) {
			planning++
		} else {
			without = append(without, s)
		}
	}
	for _, s := range c.Steps {
		if !p.opts.Registry.plans(s.Kind) {
			continue
		}
		name := c.Name
		if planning > 1 {
			name = c.Name + "/" + s.Name
		}
		ms = append(ms, &member{comp: c, step: s, capability: p.opts.Registry.Lookup(s.Kind),
			doc: changeset.Member{Name: name, Component: c.Name, Capability: s.Kind}})
	}
	if len(without) == 0 {
		return ms, nil
	}
	b, err := bindSteps(ctx, p.opts.Root, without)
	if err != nil {
		return nil, fmt.Errorf("component %s: %w", c.Name, err)
	}
	name := c.Name
	if planning > 0 {
		if !b.named && len(b.holes) == 0 {
			return ms, nil
		}
		name = c.Name + InputsSuffix
	}
	digest, err := compositionDigest(c, without, p.env, b)
	if err != nil {
		return nil, err
	}
	return append(ms, &member{comp: c, doc: changeset.Member{
		Name: name, Component: c.Name, Capability: CompositionCapability,
		Status: changeset.StatusPlanned, PlanDigest: digest, Holes: b.holes,
	}}), nil
}

// planMember asks the capability of one planning step.
func (p *Preview) planMember(ctx context.Context, m *member, req Request, unknown []string) {
	if m.capability == nil {
		m.doc.Status = changeset.StatusFailed
		m.doc.Error = fmt.Sprintf("%s is a kind that plans, but this captf has no capability for it, so what it would change cannot be shown", m.step.Kind)
		return
	}
	fmt.Fprintf(p.opts.Log, "captf: planning %s (%s)\n", m.doc.Name, m.step.Kind)
	plan, err := m.capability.Plan(ctx, req)
	if err != nil {
		m.doc.Status = changeset.StatusFailed
		m.doc.Error = err.Error()
		return
	}
	if plan == nil {
		m.doc.Status = changeset.StatusFailed
		m.doc.Error = m.step.Kind + " returned no plan"
		return
	}
	m.plan = plan
	if plan.Member.Name != "" {
		m.doc.Name = plan.Member.Name
	}
	m.doc.PlanDigest = plan.Member.PlanDigest
	m.doc.Holes = plan.Member.Holes
	m.doc.Status = changeset.StatusPlanned
	if len(unknown) > 0 {
		m.doc.Status = changeset.StatusHeld
		m.doc.UnknownInputs = unknown
	}
	m.entries = plan.Entries
	m.effects = plan.SideEffects
}

// request builds the Request of step s of c, resolving its stackOutput
// references with lookup. unknown lists the references to components in
// the change that have no value yet.
func (p *Preview) request(ctx context.Context, c *Component, s *Step, lookup func(context.Context, StackOutput) ([]byte, bool), phase string) (Request, []string, error) {
	work := filepath.Join(p.scratch, phase, c.Name, s.Name)
	if err := os.MkdirAll(work, 0o700); err != nil {
		return Request{}, nil, fmt.Errorf("scratch directory: %w", err)
	}
	var missing, unknown []string
	inputs := resolve(s.Inputs, func(ref StackOutput) (any, bool) {
		raw, ok := lookup(ctx, ref)
		if !ok {
			if !slices.Contains(missing, ref.Component) {
				missing = append(missing, ref.Component)
			}
			if p.inChange[ref.Component] && !slices.Contains(unknown, ref.String()) {
				unknown = append(unknown, ref.String())
			}
			return nil, false
		}
		v, err := decodeValue(raw)
		if err != nil {
			return nil, false
		}
		return v, true
	}).(map[string]any)
	slices.Sort(missing)
	slices.Sort(unknown)
	return Request{
		Component:   c.Name,
		Environment: p.env.Name,
		Vars:        p.env.Vars,
		Inputs:      inputs,
		Missing:     missing,
		Root:        p.opts.Root,
		WorkDir:     work,
		Key:         p.opts.Key,
	}, unknown, nil
}

// planLookup resolves a reference while planning: a seed value, else what
// the plan of a component in the change says it will expose, else what a
// component outside the change exposes now.
func (p *Preview) planLookup(ctx context.Context, ref StackOutput) ([]byte, bool) {
	if v, ok := p.opts.Seed[ref.Component][ref.Name]; ok {
		return v, true
	}
	if p.inChange[ref.Component] {
		v, ok := p.planned[ref.Component][ref.Name]
		return v, ok
	}
	v, ok := p.liveOutputs(ctx, ref.Component)[ref.Name]
	return v, ok
}

// liveOutputs reads the outputs a component outside the change left when
// it last ran, through the capabilities of its steps, once per preview.
func (p *Preview) liveOutputs(ctx context.Context, name string) Outputs {
	if outs, ok := p.live[name]; ok {
		return outs
	}
	outs := Outputs{}
	c := p.opts.Project.Component(name)
	for _, s := range c.Steps {
		capability := p.opts.Registry.Lookup(s.Kind)
		if capability == nil {
			continue
		}
		req, _, err := p.request(ctx, c, s, p.planLookup, "outputs")
		if err != nil {
			fmt.Fprintf(p.opts.Log, "captf: warning: outputs of %s: %v\n", name, err)
			continue
		}
		got, err := capability.Outputs(ctx, req)
		if err != nil {
			fmt.Fprintf(p.opts.Log, "captf: warning: outputs of %s (%s): %v\n", name, s.Name, err)
			continue
		}
		for k, v := range got {
			outs[k] = v
		}
	}
	p.live[name] = outs
	return outs
}

// assemble writes the document: members in level order, their entries and
// side effects named after them, sensitive values dropped, then the
// summary and the digest.
func (p *Preview) assemble() error {
	doc := &changeset.Document{Version: changeset.Version, Members: []changeset.Member{}}
	seen := map[string]string{}
	for _, m := range p.members {
		if other, dup := seen[m.doc.Name]; dup {
			return fmt.Errorf("%w: components %s and %s both have a member named %q; give one of the steps another stack or root name", ErrInvalid, other, m.comp.Name, m.doc.Name)
		}
		seen[m.doc.Name] = m.comp.Name
		doc.Members = append(doc.Members, m.doc)
		for _, e := range m.entries {
			e.Member = m.doc.Name
			e.Attributes = redact(e.Attributes)
			doc.Entries = append(doc.Entries, e)
		}
		for _, s := range m.effects {
			s.Member = m.doc.Name
			doc.SideEffects = append(doc.SideEffects, s)
		}
	}
	digest, err := doc.ComputeDigest()
	if err != nil {
		return err
	}
	doc.Digest = digest
	doc.Summary = doc.Summarize()
	p.Document = doc
	return nil
}

// redact drops the values of sensitive attributes, whatever a capability
// left in them.
func redact(attrs []changeset.Attribute) []changeset.Attribute {
	out := slices.Clone(attrs)
	for i := range out {
		if out[i].Sensitive {
			out[i].Before, out[i].After = nil, nil
		}
	}
	return out
}
