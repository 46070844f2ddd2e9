// Package previewtest holds a test double of a preview Capability, for
// tests of the orchestration and of the command line: the real
// capabilities (terraform, kubectl, CloudFormation) are tested against
// their real servers in their own packages.
package previewtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/captf/captf/internal/preview"
	"github.com/captf/captf/pkg/changeset"
)

// Fake is a test double of a Capability, for the orchestration only. It
// talks to no server: it keeps a world
// of deployed values in memory and plans a step's inputs against it:
//
//	name: member name (default: left to the orchestrator)
//	want: {address: value}   what the step deploys
//	outputs: {name: value}   outputs known at plan time
//	lateOutputs: {name: value} outputs known only after apply
//	secret: value            a sensitive attribute on every entry, bound
//	                         into the digest under Request.Key as the real
//	                         capabilities bind theirs
//	fail: text               the plan fails with this error
//	failApply: text          the apply fails with this error
//
// It records what it was asked, so tests can check the order of applies,
// the inputs a plan received and how many plans ran at once.
type Fake struct {
	kind string

	mu       sync.Mutex
	world    map[string]map[string]string // member → address → value
	outs     map[string]preview.Outputs   // member → outputs after apply
	applied  []string
	requests map[string]preview.Request // member → last plan request
	active   int
	maxAct   int
	// Meet, when set, makes each plan wait (up to 5 s) until that many
	// plans run at once.
	Meet int
}

// New returns a Fake serving kind, with nothing deployed.
func New(kind string) *Fake {
	return &Fake{kind: kind, world: map[string]map[string]string{}, outs: map[string]preview.Outputs{}, requests: map[string]preview.Request{}}
}

func (f *Fake) Kind() string { return f.kind }

func memberName(req preview.Request) string {
	if n, ok := req.Inputs["name"].(string); ok {
		return n
	}
	return req.Component
}

func (f *Fake) Plan(_ context.Context, req preview.Request) (*preview.Plan, error) {
	f.mu.Lock()
	f.active++
	f.maxAct = max(f.maxAct, f.active)
	f.requests[memberName(req)] = req
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.active--
		f.mu.Unlock()
	}()
	if f.Meet > 0 {
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			f.mu.Lock()
			n := f.maxAct
			f.mu.Unlock()
			if n >= f.Meet {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return f.plan(req)
}

func (f *Fake) plan(req preview.Request) (*preview.Plan, error) {
	if msg, ok := req.Inputs["fail"].(string); ok {
		return nil, errors.New(msg)
	}
	name := memberName(req)
	p := &preview.Plan{Member: changeset.Member{Name: name}, PlannedOutputs: preview.Outputs{}}
	if len(req.Missing) > 0 {
		p.Member.Holes = []changeset.Hole{{Reason: fmt.Sprintf("inputs from %v; planned again once they apply", req.Missing)}}
		p.Member.PlanDigest, _ = changeset.Digest("fake1:", req.Missing)
		return p, nil
	}
	want := map[string]string{}
	if w, ok := req.Inputs["want"].(map[string]any); ok {
		for k, v := range w {
			want[k] = fmt.Sprint(v)
		}
	}
	f.mu.Lock()
	have := f.world[name]
	f.mu.Unlock()
	secret, hasSecret := req.Inputs["secret"].(string)
	addrs := make([]string, 0)
	for a := range want {
		addrs = append(addrs, a)
	}
	for a := range have {
		if _, ok := want[a]; !ok {
			addrs = append(addrs, a)
		}
	}
	sort.Strings(addrs)
	for _, a := range addrs {
		before, had := have[a]
		after, wants := want[a]
		e := changeset.Entry{Address: a}
		switch {
		case !had:
			e.Action = changeset.ActionCreate
		case !wants:
			e.Action = changeset.ActionDelete
		case before == after:
			e.Action = changeset.ActionNoOp
		default:
			e.Action = changeset.ActionUpdate
		}
		if e.Action != changeset.ActionNoOp {
			attr := changeset.Attribute{Name: "value"}
			if had {
				attr.Before, _ = json.Marshal(before)
			}
			if wants {
				attr.After, _ = json.Marshal(after)
			}
			e.Attributes = append(e.Attributes, attr)
			if hasSecret {
				// A capability must leave sensitive values out; this one
				// does not, to prove the orchestration drops them anyway.
				s, _ := json.Marshal(secret)
				e.Attributes = append(e.Attributes, changeset.Attribute{Name: "password", Sensitive: true, Before: s, After: s})
			}
		}
		p.Entries = append(p.Entries, e)
	}
	if o, ok := req.Inputs["outputs"].(map[string]any); ok {
		for k, v := range o {
			p.PlannedOutputs[k], _ = json.Marshal(v)
		}
	}
	// Like the real capabilities, a plan that changes nothing knows every
	// output the step left.
	changes := false
	for _, e := range p.Entries {
		changes = changes || e.Action != changeset.ActionNoOp
	}
	if !changes {
		f.mu.Lock()
		for k, v := range f.outs[name] {
			p.PlannedOutputs[k] = v
		}
		f.mu.Unlock()
	}
	p.DeclaredOutputs = []string{}
	for _, key := range []string{"outputs", "lateOutputs"} {
		if o, ok := req.Inputs[key].(map[string]any); ok {
			p.DeclaredOutputs = append(p.DeclaredOutputs, slices.Collect(maps.Keys(o))...)
		}
	}
	slices.Sort(p.DeclaredOutputs)
	sensitive, err := preview.KeyedDigest(req.Key, f.kind, secret)
	if err != nil {
		return nil, err
	}
	p.Member.PlanDigest, _ = changeset.Digest("fake1:", map[string]any{"entries": p.Entries, "sensitive": sensitive})
	return p, nil
}

func (f *Fake) Apply(_ context.Context, req preview.Request, approved *preview.Plan) (preview.Outputs, error) {
	fresh, err := f.plan(req)
	if err != nil {
		return nil, err
	}
	if fresh.Member.PlanDigest != approved.Member.PlanDigest {
		return nil, fmt.Errorf("%w: %s, approved %s", preview.ErrMoved, fresh.Member.PlanDigest, approved.Member.PlanDigest)
	}
	if msg, ok := req.Inputs["failApply"].(string); ok {
		return nil, errors.New(msg)
	}
	name := memberName(req)
	outs := preview.Outputs{}
	for _, key := range []string{"outputs", "lateOutputs"} {
		if o, ok := req.Inputs[key].(map[string]any); ok {
			for k, v := range o {
				outs[k], _ = json.Marshal(v)
			}
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	world := map[string]string{}
	if w, ok := req.Inputs["want"].(map[string]any); ok {
		for k, v := range w {
			world[k] = fmt.Sprint(v)
		}
	}
	f.world[name] = world
	f.outs[name] = outs
	f.applied = append(f.applied, name)
	return outs, nil
}

func (f *Fake) Outputs(_ context.Context, req preview.Request) (preview.Outputs, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.outs[memberName(req)], nil
}

// Applied lists the members applied, in order.
func (f *Fake) Applied() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.applied)
}

// Request returns the last plan request of member.
func (f *Fake) Request(member string) preview.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[member]
}

// MaxActive is the most plans that ran at once.
func (f *Fake) MaxActive() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.maxAct
}

// SetOutputs records outputs as if member had been applied before.
func (f *Fake) SetOutputs(member string, outs preview.Outputs) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.outs[member] = outs
}

var _ preview.Capability = (*Fake)(nil)
