package terraform

import (
	"encoding/json"
	"fmt"
	"strings"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/captf/captf/internal/planconfig"
	"github.com/captf/captf/internal/tfexec"
	"github.com/captf/captf/pkg/changeset"
)

// SideEffectRunsAtApply is the side effect of a block the apply runs
// outside the plan: a provisioner, a connection block, a provider
// configuration. Its detail names the block and a prefix of its keyed
// digest, never a value.
const SideEffectRunsAtApply = "runs-at-apply"

// digestShown is how many hex digits of a block's keyed digest its side
// effect shows: enough to tell two versions of a block apart in the
// document; the member digest binds the whole digest.
const digestShown = 16

// bindRuntime binds the provisioners and provider configurations the
// plan's changes run at apply (internal/planconfig) under key; tf is the
// terraform that planned, for its root and data directory.
func bindRuntime(plan *tfjson.Plan, tf *tfexec.Terraform, key []byte) ([]planconfig.Block, error) {
	vars, err := json.Marshal(plan.Variables)
	if err != nil {
		return nil, err
	}
	cfg, err := json.Marshal(plan.Config)
	if err != nil {
		return nil, err
	}
	pin := planconfig.Input{Root: tf.Dir, DataDir: tf.DataDir(), Variables: vars, Configuration: cfg}
	for _, rc := range plan.ResourceChanges {
		if rc == nil || rc.Change == nil {
			continue
		}
		acts := make([]string, len(rc.Change.Actions))
		for i, a := range rc.Change.Actions {
			acts[i] = string(a)
		}
		pin.Changes = append(pin.Changes, planconfig.Change{Address: rc.Address, Actions: acts})
	}
	return planconfig.Bind(key, pin)
}

// runsAtApply records the blocks the plan runs at apply: whole in the
// digest, and as side effects that name them.
func (ch *changes) runsAtApply(member string, runtime []planconfig.Block) {
	ch.Runtime = []planconfig.Block{}
	for _, b := range runtime {
		ch.Runtime = append(ch.Runtime, b)
		ch.SideEffects = append(ch.SideEffects, changeset.SideEffect{
			Member:  member,
			Kind:    SideEffectRunsAtApply,
			Address: b.Address,
			Detail:  fmt.Sprintf("%s; keyed digest %s", b.Block, b.Digest[:digestShown]),
		})
	}
}

// describeMoved names moved blocks in one line.
func describeMoved(moved []planconfig.Moved) string {
	parts := make([]string, len(moved))
	for i, m := range moved {
		parts[i] = fmt.Sprintf("%s %s (%s)", m.Address, m.Block, m.Kind)
	}
	return strings.Join(parts, ", ")
}

// RuntimeMoved compares the blocks two change-set documents say their
// terraform-apply members run at apply (their runs-at-apply side
// effects) and names, per member, those of fresh that are new or differ
// from approved's. It names addresses and blocks, never a value.
func RuntimeMoved(approved, fresh *changeset.Document) []string {
	blocks := func(d *changeset.Document) map[string][]planconfig.Block {
		out := map[string][]planconfig.Block{}
		for _, s := range d.SideEffects {
			if s.Kind != SideEffectRunsAtApply {
				continue
			}
			block, digest, _ := strings.Cut(s.Detail, "; keyed digest ")
			out[s.Member] = append(out[s.Member], planconfig.Block{Address: s.Address, Block: block, Digest: digest})
		}
		return out
	}
	was, now := blocks(approved), blocks(fresh)
	var lines []string
	for _, m := range fresh.Members {
		if m.Capability != Kind {
			continue
		}
		for _, mv := range planconfig.Compare(was[m.Name], now[m.Name]) {
			lines = append(lines, fmt.Sprintf("%s %s: %s %s", mv.Kind, m.Name, mv.Address, mv.Block))
		}
	}
	return lines
}
