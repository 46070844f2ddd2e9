package runner

import (
	"encoding/json"

	"github.com/captf/captf/pkg/fingerprint"
)

// MaxMessage is the most a container's termination message holds; the
// manager reads the runner's report from there (ARCHITECTURE.md).
const MaxMessage = 4096

// Outcomes of a runner Job, in Message.Outcome.
const (
	OutcomePlanned   = "planned"   // a plan Job made a plan
	OutcomeApplied   = "applied"   // the approved plan was applied
	OutcomeDestroyed = "destroyed" // a destroy Job destroyed everything
	OutcomeChecked   = "checked"   // a drift Job checked for drift
	OutcomeRefreshed = "refreshed" // a refresh Job refreshed the state
	OutcomeRestored  = "restored"  // a restore Job pushed a backup as the state
	// OutcomeDestructive: the destructive-plan guard stopped a plan that
	// deletes or replaces resources; nothing applied.
	OutcomeDestructive = "destructive-plan-blocked"
	// OutcomeNeedsApproval: an apply without approval of values the
	// approval leaves out found more to apply; nothing applied.
	OutcomeNeedsApproval = "needs-approval"
	OutcomeNoChanges     = "no-changes"   // the fresh plan was empty; nothing to apply
	OutcomePlanChanged   = "plan-changed" // the fresh plan moved; nothing applied
	OutcomeBadInput      = "bad-input"    // plan key, plan document or arguments refused
	OutcomeFailed        = "failed"       // anything else
)

// Message is what a runner Job reports to the manager. It holds no plan or
// variable value (the control plane endpoint is published by contract):
// counts, addresses with labels, the keyed hash, and an error that
// names a step, never terraform's output.
type Message struct {
	Operation string              `json:"operation"`
	Outcome   string              `json:"outcome"`
	Plan      *fingerprint.Report `json:"plan,omitempty"`
	Error     string              `json:"error,omitempty"`
	// Endpoint is the module's control plane endpoint and FailureDomains
	// its failure domains after an apply, for the Cluster API contract;
	// the only values a report carries.
	Endpoint       *Endpoint       `json:"endpoint,omitempty"`
	FailureDomains []FailureDomain `json:"failureDomains,omitempty"`
	// ProviderID, Addresses and FailureDomain are a machine's, for the
	// InfraMachine contract (machine.go).
	ProviderID    string    `json:"providerID,omitempty"`
	Addresses     []Address `json:"addresses,omitempty"`
	FailureDomain string    `json:"failureDomain,omitempty"`
	// Drift is what a drift Job found.
	Drift *Changes `json:"drift,omitempty"`
	// Guarded is what the plan of a guarded apply does: the changes it
	// applied, or those the destructive-plan guard stopped.
	Guarded *Changes `json:"guarded,omitempty"`
	// Health is the state word of the module's health output after an
	// apply or a drift check (running, pending, failed or unknown); empty
	// when the module has none.
	Health string `json:"health,omitempty"`
	// Restored is what a restore Job pushed.
	Restored *Restored `json:"restored,omitempty"`
}

// Encode returns the message as JSON of at most MaxMessage bytes. The hash
// and the counts always stay; resource entries are dropped from the end
// (and Truncated set) until it fits, then the error is shortened.
func (m Message) Encode() []byte {
	if m.Plan != nil {
		p := *m.Plan
		p.Resources = append([]string(nil), p.Resources...)
		m.Plan = &p
	}
	m.Drift, m.Guarded = m.Drift.copy(), m.Guarded.copy()
	for {
		b, err := json.Marshal(m)
		if err != nil {
			// A Message of strings and ints always marshals.
			panic(err)
		}
		switch {
		case len(b) <= MaxMessage:
			return b
		case m.Plan != nil && len(m.Plan.Resources) > 0:
			m.Plan.Resources = m.Plan.Resources[:len(m.Plan.Resources)-1]
			m.Plan.Truncated = true
		case m.Drift.shorten(), m.Guarded.shorten():
		case len(m.Error) > 0:
			m.Error = m.Error[:max(0, len(m.Error)-(len(b)-MaxMessage)-3)] + "..."
			if len(m.Error) <= 3 {
				m.Error = ""
			}
		default:
			return b
		}
	}
}

// copy is a copy of c whose Resources can be shortened.
func (c *Changes) copy() *Changes {
	if c == nil {
		return nil
	}
	d := *c
	d.Resources = append([]string(nil), c.Resources...)
	return &d
}

// shorten drops the last resource entry, if any, and says whether it did.
func (c *Changes) shorten() bool {
	if c == nil || len(c.Resources) == 0 {
		return false
	}
	c.Resources, c.Truncated = c.Resources[:len(c.Resources)-1], true
	return true
}
