// Package changeset holds the change-set document of spec 003: the members
// of a pull request's plan preview, their entries and side effects, the
// digest a reviewer approves and the Markdown note. It is pure: no exec, no
// network, no Kubernetes.
package changeset

import "encoding/json"

// Version names the schema of a Document; it changes with any field that
// changes meaning.
const Version = "captf.io/changeset/v1"

// Member statuses.
const (
	StatusPlanned = "planned"
	StatusFailed  = "failed"
	// StatusHeld marks a member whose inputs wait on an upstream in the
	// same change: it is planned again after that upstream applied and
	// needs its own approval.
	StatusHeld = "held"
)

// Entry actions, as spec 003 names them.
const (
	ActionCreate  = "create"
	ActionUpdate  = "update"
	ActionReplace = "replace"
	ActionDelete  = "delete"
	ActionRead    = "read"
	ActionNoOp    = "no-op"
	ActionForget  = "forget"
)

// Disruptions of an entry; empty means none known.
const (
	DisruptionRolling = "rolling"
	DisruptionUnknown = "unknown"
)

// Document is the change set of one pull request.
type Document struct {
	Version     string       `json:"version"`
	Members     []Member     `json:"members"`
	Entries     []Entry      `json:"entries,omitempty"`
	SideEffects []SideEffect `json:"sideEffects,omitempty"`
	// Summary is for people; no digest covers it.
	Summary *Summary `json:"summary,omitempty"`
	// Digest covers every member, entry and side effect.
	Digest string `json:"digest,omitempty"`
}

// Member is one thing the preview planned: a terraform root, a stack, a
// manifest set, or a component with no step that can plan.
type Member struct {
	Name       string `json:"name"`
	Component  string `json:"component"`
	Capability string `json:"capability"`
	Status     string `json:"status"`
	// Error says why a failed member failed. It never holds a value.
	Error string `json:"error,omitempty"`
	// PlanDigest is the capability's own digest of what it planned.
	PlanDigest string `json:"planDigest,omitempty"`
	Holes      []Hole `json:"holes,omitempty"`
	// UnknownInputs lists references to upstream outputs in the same change
	// that have no value yet ("<component>.<output>").
	UnknownInputs []string `json:"unknownInputs,omitempty"`
	// DeployedOutputs, PlannedOutputs and SeededOutputs list the
	// references to upstream outputs ("<component>.<output>") that had a
	// value, by where it came from: what a component outside the change
	// deployed, what the plan of one in the change says it will expose,
	// and --seed-outputs. Names only: an output's value may be sensitive.
	// No digest covers them; the member's plan digest binds the inputs.
	DeployedOutputs []string `json:"deployedOutputs,omitempty"`
	PlannedOutputs  []string `json:"plannedOutputs,omitempty"`
	SeededOutputs   []string `json:"seededOutputs,omitempty"`
}

// Hole is something the plan could not bind, with the reason a reviewer
// reads. Reasons of steps the digest cannot name start with "unbound:".
type Hole struct {
	Address string `json:"address,omitempty"`
	Reason  string `json:"reason"`
}

// Entry is one object's change within a member.
type Entry struct {
	Member     string `json:"member"`
	Address    string `json:"address"`
	Action     string `json:"action"`
	Importing  bool   `json:"importing,omitempty"`
	Disruption string `json:"disruption,omitempty"`
	// Note says how the entry is checked when that is not the usual way:
	// a create whose dry run waits for what the member creates first.
	Note       string      `json:"note,omitempty"`
	Attributes []Attribute `json:"attributes,omitempty"`
}

// Attribute is one changed attribute or field path of an entry. Before and
// After are JSON values with numbers as written; both are absent when the
// attribute is sensitive or its values are not known (a CloudFormation
// change set gives names only).
type Attribute struct {
	Name              string          `json:"name"`
	Before            json.RawMessage `json:"before,omitempty"`
	After             json.RawMessage `json:"after,omitempty"`
	Unknown           bool            `json:"unknown,omitempty"`
	Sensitive         bool            `json:"sensitive,omitempty"`
	ForcesReplacement bool            `json:"forcesReplacement,omitempty"`
}

// SideEffect is what an apply does beside changing an entry: an import, a
// forget, a deposed object, an action invocation.
type SideEffect struct {
	Member  string `json:"member"`
	Kind    string `json:"kind"`
	Address string `json:"address"`
	Detail  string `json:"detail,omitempty"`
}

// Summary groups the document for people: what is destroyed or replaced,
// what failed, what has holes, then the rest, with counts per member.
type Summary struct {
	Members []MemberCounts `json:"members"`
}

// MemberCounts counts one member's entries; no-op and read entries are left
// out. Known is false when a hole leaves the counts unknown ("?").
type MemberCounts struct {
	Name    string `json:"name"`
	Status  string `json:"status"`
	Known   bool   `json:"known"`
	Create  int    `json:"create"`
	Update  int    `json:"update"`
	Replace int    `json:"replace"`
	Delete  int    `json:"delete"`
}
