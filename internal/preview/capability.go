// Package preview plans and applies the components of a project file (spec
// 003): it resolves outputs between components, asks each step's capability
// what it would change, assembles the change-set document, and on apply
// plans every member again and applies only when the digest holds.
package preview

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/captf/captf/pkg/changeset"
)

// ErrMoved says a fresh plan does not match the approved one. The command
// exits 3 and nothing of the member was applied.
var ErrMoved = errors.New("the plan moved")

// Capability is a deploy tool that can plan: terraform-apply, kubectl-apply,
// cfn-deploy. A step whose kind has no Capability is a step without plan.
type Capability interface {
	// Kind is the step kind it serves, e.g. "terraform-apply".
	Kind() string
	// Plan describes what the step would change without changing anything.
	// An error makes the member failed; its text must name no value.
	Plan(ctx context.Context, req Request) (*Plan, error)
	// Apply plans again, compares with approved and applies only when they
	// match; otherwise it applies nothing and returns an error wrapping
	// ErrMoved that names both digests.
	Apply(ctx context.Context, req Request, approved *Plan) (Outputs, error)
	// Outputs reads the outputs the step left when it last ran; none (and no
	// error) when it never ran.
	Outputs(ctx context.Context, req Request) (Outputs, error)
}

// InputChecker is a Capability that checks a step's inputs as the project
// file writes them, before anything is planned. An error is bad input: the
// project file is wrong, and nothing of the change set is planned. Inputs
// that are stackOutput references are not resolved yet; it checks what
// does not depend on them.
type InputChecker interface {
	CheckInputs(root string, inputs map[string]any) error
}

// Outputs are named output values, JSON with numbers as written.
type Outputs map[string]json.RawMessage

// Request is one step of one component, with its inputs resolved.
type Request struct {
	Component   string
	Environment string
	// Vars are the environment's vars.
	Vars map[string]string
	// Inputs are the step's inputs as the project file writes them, decoded
	// from YAML, with each stackOutput reference replaced by its value.
	// A reference without a value is left out of Inputs and named in Missing.
	Inputs map[string]any
	// Missing lists the upstream components whose outputs this step reads
	// but which have no value yet. A capability plans nothing then and
	// reports a hole naming them.
	Missing []string
	// Root is the repository root; relative paths in Inputs are relative
	// to it.
	Root string
	// WorkDir is a private scratch directory for this member, kept from
	// plan to apply within one command and removed after.
	WorkDir string
	// Key is the preview key, at least MinKeySize bytes. A capability
	// binds its sensitive values into its member's plan digest with
	// KeyedDigest under it, so that the digest moves when one of them does
	// and reveals none. The plan and the apply of one change set must get
	// the same key. It never reaches a Plan, an error or a log.
	Key []byte
}

// Plan is what a capability planned for one step.
type Plan struct {
	Member      changeset.Member
	Entries     []changeset.Entry
	SideEffects []changeset.SideEffect
	// PlannedOutputs are the outputs whose values the plan already knows;
	// an output absent here is known only after apply.
	PlannedOutputs Outputs
	// DeclaredOutputs names every output the step will have once applied,
	// its value known now or not, sorted; nil when the plan cannot say (a
	// member with a hole). A downstream reading a name not in it is an
	// error, not a wait.
	DeclaredOutputs []string
	// Private is what Apply needs beyond the document (a plan file path, a
	// digest of the changes read). It is never written to the document.
	Private any
}

// WaitingHoles is what a step that waits on upstream outputs plans: the
// upstreams of missing, sorted and each once, and a hole for each,
// "inputs from <component>; re-checked on apply". It is empty when the
// step waits on none.
func WaitingHoles(missing []string) ([]string, []changeset.Hole) {
	sorted := slices.Clone(missing)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	var holes []changeset.Hole
	for _, m := range sorted {
		holes = append(holes, changeset.Hole{Reason: "inputs from " + m + "; re-checked on apply"})
	}
	return sorted, holes
}
