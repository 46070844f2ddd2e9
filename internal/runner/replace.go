package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/captf/captf/internal/modulecontract"
)

// OutputMemberAddresses maps a pool's members' provider IDs to the
// addresses, in the module, of the resources that make them: forwarded to
// the root, so the state holds it, and read by a Job asked to replace
// members (--replace-member) before it plans.
const OutputMemberAddresses = modulecontract.OutputMemberAddresses

// maxReplaceMembers bounds the members one Job replaces (a pool's
// spec.providerIDList holds up to 10,000).
const maxReplaceMembers = 10000

// replaceFlags are terraform's -replace flags for the members of
// providerIDs, read from the state's member_addresses output (which the
// module's call, call, forwards to the root) after init: the resource
// of each is replaced by the plan, as `terraform plan -replace` does, and
// the plan's hash binds that. A member the output does not name, or an
// address that is not one, fails the run before anything is planned.
func replaceFlags(ctx context.Context, r *Runner, workdir, call string, providerIDs []string) ([]string, error) {
	if len(providerIDs) == 0 {
		return nil, nil
	}
	outs, err := forwardedOutputs(ctx, r.TF, workdir)
	if err != nil {
		return nil, err
	}
	raw := outs[OutputMemberAddresses].Value
	if raw == nil || call == "" {
		return nil, fmt.Errorf("%w: %d members to replace were asked for, and the state holds no %s output naming the resource of each member", ErrBadInput, len(providerIDs), OutputMemberAddresses)
	}
	var addresses map[string]string
	if err := json.Unmarshal(raw, &addresses); err != nil {
		return nil, fmt.Errorf("%w: the state's %s output is not a map of strings", ErrBadInput, OutputMemberAddresses)
	}
	var flags []string
	var missing int
	for _, id := range providerIDs {
		a, ok := addresses[id]
		if !ok {
			missing++
			continue
		}
		if !resourceAddress(a) {
			return nil, fmt.Errorf("%w: the state's %s output maps a member to %q, which is not a resource address", ErrBadInput, OutputMemberAddresses, a)
		}
		flags = append(flags, "-replace=module."+call+"."+a)
	}
	if missing > 0 {
		return nil, fmt.Errorf("%w: the state's %s output names no resource for %d of the %d members to replace; nothing was planned", ErrBadInput, OutputMemberAddresses, missing, len(providerIDs))
	}
	slices.Sort(flags)
	return slices.Compact(flags), nil
}

// resourceAddress reports whether a is a resource (instance) address as
// terraform reads one: a type and a name, after any module calls, each
// with an optional index; no data source, nothing else.
func resourceAddress(a string) bool {
	t, diags := hclsyntax.ParseTraversalAbs([]byte(a), "", hcl.InitialPos)
	if diags.HasErrors() {
		return false
	}
	var names []string
	for i, step := range t {
		switch s := step.(type) {
		case hcl.TraverseRoot:
			names = append(names, s.Name)
		case hcl.TraverseAttr:
			names = append(names, s.Name)
		case hcl.TraverseIndex:
			if i == 0 || !isName(t[i-1]) {
				return false
			}
		default:
			return false
		}
	}
	// module.<call> pairs, then <type>.<name>.
	for len(names) > 2 && names[0] == "module" {
		names = names[2:]
	}
	return len(names) == 2 && names[0] != "module" && names[0] != "data"
}

// isName: the step names something (an index follows a name only once).
func isName(step hcl.Traverser) bool {
	switch step.(type) {
	case hcl.TraverseRoot, hcl.TraverseAttr:
		return true
	}
	return false
}
