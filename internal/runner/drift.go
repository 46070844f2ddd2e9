package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"

	tfjson "github.com/hashicorp/terraform-json"
)

// MaxChangedResources is how many changed addresses a report lists.
const MaxChangedResources = 20

// Changes are a plan's managed resource changes counted by action: what a
// drift check found (spec 000: an import or a move alone is not drift, and
// neither is an output change), or what the destructive-plan guard
// stopped. They hold addresses, never a value.
type Changes struct {
	Create  int `json:"create"`
	Update  int `json:"update"`
	Replace int `json:"replace"`
	Delete  int `json:"delete"`
	// Resources are up to MaxChangedResources entries "<address>
	// (<action>)", sorted by address.
	Resources []string `json:"resources,omitempty"`
	Truncated bool     `json:"truncated,omitempty"`
}

// Total is how many resources change.
func (d *Changes) Total() int { return d.Create + d.Update + d.Replace + d.Delete }

// Destructive reports whether a resource is deleted or replaced.
func (d *Changes) Destructive() bool { return d.Replace+d.Delete > 0 }

// Drift checks the root for drift: init, a refresh-only apply that records
// the real state of every resource, then a plan without refresh whose JSON
// is read in memory and counted. It needs no plan key and applies no
// change to the infrastructure; only the state is refreshed.
func (r *Runner) Drift(ctx context.Context) (*Changes, error) {
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
	defer p.Close()
	return p.changes, nil
}

// ErrDestructive says the destructive-plan guard stopped a plan that
// deletes or replaces a resource; nothing was applied.
var ErrDestructive = errors.New("the plan deletes or replaces resources")

// Guarded is the apply of the destructive-plan guard: it plans, with
// refresh, and applies exactly that saved plan unless it deletes or
// replaces a resource and deletes does not allow it (nil allows none);
// then it applies nothing and the error wraps ErrDestructive. Either way
// the Changes say what the plan does. It needs no plan key: the plan that
// waits for approval is made by a plan Job.
func (r *Runner) Guarded(ctx context.Context, deletes Deletes) (*Changes, error) {
	if err := r.prepare(ctx); err != nil {
		return nil, err
	}
	return r.guardedApply(ctx, deletes)
}

// Deletes says whether a guarded apply may delete or replace the
// resources at addresses (each as CountChanges names it): nil, or an
// error that wraps ErrDestructive.
type Deletes func(addresses []string) error

// guardedApply is Guarded after init, its plan made with extra flags.
func (r *Runner) guardedApply(ctx context.Context, deletes Deletes, extra ...string) (*Changes, error) {
	p, err := r.countedPlan(ctx, extra...)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	if p.changes.Destructive() {
		if deletes == nil {
			return p.changes, fmt.Errorf("%w (%d to replace, %d to delete); nothing was applied", ErrDestructive, p.changes.Replace, p.changes.Delete)
		}
		if err := deletes(p.destructive); err != nil {
			return p.changes, err
		}
	}
	return p.changes, r.TF.Apply(ctx, p.file)
}

// counted is a saved plan and its changes; Close removes the file.
type counted struct {
	dir, file string
	changes   *Changes
	// others are the entries of what the plan changes in the state
	// alone, which Changes leaves out: imports, moves and forgets.
	others []string
	// destructive are the addresses the plan deletes or replaces, all of
	// them.
	destructive []string
}

func (c *counted) Close() { os.RemoveAll(c.dir) }

// countedPlan plans into a private file, with extra flags, and counts the
// plan's changes from its JSON, read in memory.
func (r *Runner) countedPlan(ctx context.Context, extra ...string) (*counted, error) {
	dir, err := os.MkdirTemp(r.TempDir, "captf-plan-*")
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	c := &counted{dir: dir, file: filepath.Join(dir, "plan.tfplan")}
	held := r.holdPlan()
	defer held.release()
	if err := r.TF.Plan(ctx, c.file, slices.Concat(extra, r.replace)...); err != nil {
		c.Close()
		return nil, err
	}
	if err := r.checkLineage(c.file); err != nil {
		c.Close()
		return nil, err
	}
	err = r.TF.Show(ctx, c.file, held.reading(func(plan io.Reader) error {
		var p tfjson.Plan
		if err := json.NewDecoder(plan).Decode(&p); err != nil {
			return fmt.Errorf("read the plan: %w", err)
		}
		c.changes = CountChanges(&p)
		c.others = stateOnlyChanges(&p)
		c.destructive = destructiveAddresses(&p)
		return nil
	}))
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("count the plan's changes: %w", err)
	}
	return c, nil
}

// CountChanges counts a plan's managed resource changes by action. No-ops
// (an import or a move alone among them), reads of data sources and
// forgets are not drift; outputs are not counted.
func CountChanges(p *tfjson.Plan) *Changes {
	d := &Changes{}
	var entries []string
	for _, rc := range p.ResourceChanges {
		if rc.Mode != tfjson.ManagedResourceMode || rc.Change == nil {
			continue
		}
		var action string
		switch a := rc.Change.Actions; {
		case a.Replace():
			d.Replace, action = d.Replace+1, "replace"
		case a.Create():
			d.Create, action = d.Create+1, "create"
		case a.Update():
			d.Update, action = d.Update+1, "update"
		case a.Delete():
			d.Delete, action = d.Delete+1, "delete"
		default:
			continue
		}
		entries = append(entries, changeAddress(rc)+" ("+action+")")
	}
	sort.Strings(entries)
	if len(entries) > MaxChangedResources {
		entries, d.Truncated = entries[:MaxChangedResources], true
	}
	d.Resources = entries
	return d
}

// changeAddress is the address of a resource change, with its deposed key
// when it has one.
func changeAddress(rc *tfjson.ResourceChange) string {
	if rc.DeposedKey != "" {
		return rc.Address + " deposed " + rc.DeposedKey
	}
	return rc.Address
}

// destructiveAddresses are the addresses of the managed resources a plan
// deletes or replaces, sorted.
func destructiveAddresses(p *tfjson.Plan) []string {
	var out []string
	for _, rc := range p.ResourceChanges {
		if rc.Mode == tfjson.ManagedResourceMode && rc.Change != nil && (rc.Change.Actions.Replace() || rc.Change.Actions.Delete()) {
			out = append(out, changeAddress(rc))
		}
	}
	sort.Strings(out)
	return out
}
