package cfn

import (
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation/types"

	"github.com/captf/captf/pkg/changeset"
)

// change is one resource change of a change set as captf keeps it: the
// fields that say what the execution would do, never a value. It is what
// the changes digest covers.
type change struct {
	// Address is the logical id, or "<nested stack>/<logical id>" inside a
	// nested stack.
	Address      string   `json:"address"`
	Action       string   `json:"action"`
	ResourceType string   `json:"resourceType"`
	PhysicalID   string   `json:"physicalId,omitempty"`
	Replacement  string   `json:"replacement,omitempty"`
	Scope        []string `json:"scope,omitempty"`
	Details      []detail `json:"details,omitempty"`
}

// detail is one ResourceChangeDetail without its values.
type detail struct {
	Attribute          string `json:"attribute,omitempty"`
	Name               string `json:"name,omitempty"`
	RequiresRecreation string `json:"requiresRecreation,omitempty"`
	Evaluation         string `json:"evaluation,omitempty"`
	ChangeSource       string `json:"changeSource,omitempty"`
	CausingEntity      string `json:"causingEntity,omitempty"`
}

// readChange keeps what captf needs of one change of DescribeChangeSet.
// prefix is "" for the stack itself and "<nested stack>/" inside a nested
// stack. Before and after values (present only when asked for with
// IncludePropertyValues, which captf never does) are dropped here too.
func readChange(prefix string, c types.Change) (change, bool) {
	rc := c.ResourceChange
	if c.Type != types.ChangeTypeResource || rc == nil {
		return change{}, false
	}
	out := change{
		Address:      prefix + aws.ToString(rc.LogicalResourceId),
		Action:       string(rc.Action),
		ResourceType: aws.ToString(rc.ResourceType),
		PhysicalID:   aws.ToString(rc.PhysicalResourceId),
		Replacement:  string(rc.Replacement),
	}
	for _, s := range rc.Scope {
		out.Scope = append(out.Scope, string(s))
	}
	for _, d := range rc.Details {
		var dd detail
		if d.Target != nil {
			dd.Attribute = string(d.Target.Attribute)
			dd.Name = aws.ToString(d.Target.Name)
			dd.RequiresRecreation = string(d.Target.RequiresRecreation)
		}
		dd.Evaluation = string(d.Evaluation)
		dd.ChangeSource = string(d.ChangeSource)
		dd.CausingEntity = aws.ToString(d.CausingEntity)
		out.Details = append(out.Details, dd)
	}
	return out, true
}

// sortChanges orders changes by address, and each change's scope and
// details, so that the digest does not depend on the order CloudFormation
// lists them in.
func sortChanges(cs []change) {
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].Address < cs[j].Address })
	for _, c := range cs {
		sort.Strings(c.Scope)
		sort.SliceStable(c.Details, func(i, j int) bool { return detailKey(c.Details[i]) < detailKey(c.Details[j]) })
	}
}

func detailKey(d detail) string {
	return strings.Join([]string{d.Attribute, d.Name, d.ChangeSource, d.Evaluation, d.CausingEntity, d.RequiresRecreation}, "\x00")
}

// changesDigest is the digest Plan hands Apply through Plan.Private.
func changesDigest(cs []change) (string, error) {
	if cs == nil {
		cs = []change{}
	}
	return changeset.Digest("cfnc1:", cs)
}

// entries turns changes into the entries of member, sorted by address.
// Add is a create, Modify an update or (Replacement True or Conditional) a
// replace, Remove a delete, Import a no-op that imports, Dynamic and
// SyncWithActual an update whose disruption is unknown. An entry's
// attributes are the names of the properties its details touch, without
// values.
func entries(member string, cs []change) ([]changeset.Entry, error) {
	out := make([]changeset.Entry, 0, len(cs))
	for _, c := range cs {
		e := changeset.Entry{Member: member, Address: c.Address}
		switch types.ChangeAction(c.Action) {
		case types.ChangeActionAdd:
			e.Action = changeset.ActionCreate
		case types.ChangeActionModify:
			e.Action = changeset.ActionUpdate
			switch types.Replacement(c.Replacement) {
			case types.ReplacementTrue:
				e.Action = changeset.ActionReplace
			case types.ReplacementConditional:
				e.Action = changeset.ActionReplace
				e.Disruption = changeset.DisruptionUnknown
			}
		case types.ChangeActionRemove:
			e.Action = changeset.ActionDelete
		case types.ChangeActionImport:
			e.Action = changeset.ActionNoOp
			e.Importing = true
		case types.ChangeActionDynamic, types.ChangeActionSyncWithActual:
			e.Action = changeset.ActionUpdate
			e.Disruption = changeset.DisruptionUnknown
		default:
			return nil, fmt.Errorf("resource %s: change action %q is not one captf knows", c.Address, c.Action)
		}
		e.Attributes = attributes(c.Details)
		out = append(out, e)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Address < out[j].Address })
	return out, nil
}

// attributes names what the details touch: the property name for a
// Properties target, else the attribute itself (Tags, Metadata,
// UpdatePolicy, …). A name that is marked RequiresRecreation Always by any
// detail forces the replacement.
func attributes(ds []detail) []changeset.Attribute {
	forces := map[string]bool{}
	var names []string
	for _, d := range ds {
		name := d.Name
		if d.Attribute != string(types.ResourceAttributeProperties) || name == "" {
			name = d.Attribute
		}
		if name == "" {
			continue
		}
		if _, seen := forces[name]; !seen {
			names = append(names, name)
			forces[name] = false
		}
		if d.RequiresRecreation == string(types.RequiresRecreationAlways) {
			forces[name] = true
		}
	}
	sort.Strings(names)
	out := make([]changeset.Attribute, 0, len(names))
	for _, n := range names {
		out = append(out, changeset.Attribute{Name: n, ForcesReplacement: forces[n]})
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// replaced lists the addresses of changes CloudFormation marks Replacement
// True: the ones onReplace "block" refuses.
func replaced(cs []change) []string {
	var out []string
	for _, c := range cs {
		if c.Action == string(types.ChangeActionModify) && c.Replacement == string(types.ReplacementTrue) {
			out = append(out, c.Address)
		}
	}
	sort.Strings(out)
	return out
}

// blockedError is the error of onReplace "block" for a change set that
// replaces resources.
func blockedError(stack string, addrs []string) error {
	return fmt.Errorf("stack %s: onReplace is %q and the change set replaces %s (set onReplace: %q to allow it)",
		stack, onReplaceBlock, strings.Join(addrs, ", "), onReplaceAllow)
}
