package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	tfjson "github.com/hashicorp/terraform-json"
)

// MaxDriftResources is how many drifted addresses a report lists.
const MaxDriftResources = 20

// Drift is what a drift check found: the managed resources an apply of the
// unchanged configuration would create, update, replace or delete, counted
// by action (spec 000: an import or a move alone is not drift, and neither
// is an output change). It holds addresses, never a value.
type Drift struct {
	Create  int `json:"create"`
	Update  int `json:"update"`
	Replace int `json:"replace"`
	Delete  int `json:"delete"`
	// Resources are up to MaxDriftResources entries "<address> (<action>)",
	// sorted by address.
	Resources []string `json:"resources,omitempty"`
	Truncated bool     `json:"truncated,omitempty"`
}

// Total is how many resources drifted.
func (d *Drift) Total() int { return d.Create + d.Update + d.Replace + d.Delete }

// Drift checks the root for drift: init, a refresh-only apply that records
// the real state of every resource, then a plan without refresh whose JSON
// is read in memory and counted. It needs no plan key and applies no
// change to the infrastructure; only the state is refreshed.
func (r *Runner) Drift(ctx context.Context) (*Drift, error) {
	if err := r.prepare(ctx); err != nil {
		return nil, err
	}
	if err := r.TF.ApplyRefreshOnly(ctx); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(r.TempDir, "captf-drift-*")
	if err != nil {
		return nil, fmt.Errorf("drift: %w", err)
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "plan.tfplan")
	if err := r.TF.Plan(ctx, file, "-refresh=false"); err != nil {
		return nil, err
	}
	var d *Drift
	err = r.TF.Show(ctx, file, func(plan io.Reader) error {
		var p tfjson.Plan
		if err := json.NewDecoder(plan).Decode(&p); err != nil {
			return fmt.Errorf("read the plan: %w", err)
		}
		d = CountDrift(&p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("drift: %w", err)
	}
	return d, nil
}

// CountDrift counts a plan's managed resource changes by action. No-ops
// (an import or a move alone among them), reads of data sources and
// forgets are not drift; outputs are not counted.
func CountDrift(p *tfjson.Plan) *Drift {
	d := &Drift{}
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
		addr := rc.Address
		if rc.DeposedKey != "" {
			addr += " deposed " + rc.DeposedKey
		}
		entries = append(entries, addr+" ("+action+")")
	}
	sort.Strings(entries)
	if len(entries) > MaxDriftResources {
		entries, d.Truncated = entries[:MaxDriftResources], true
	}
	d.Resources = entries
	return d
}
