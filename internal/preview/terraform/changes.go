package terraform

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/captf/captf/internal/planconfig"
	"github.com/captf/captf/pkg/changeset"
)

// Side effect kinds of a terraform plan.
const (
	SideEffectImport  = "import"
	SideEffectForget  = "forget"
	SideEffectDeposed = "deposed"
	SideEffectMove    = "move"
	SideEffectAction  = "action"
)

// changes is what one plan changes, read from show -json: the entries and
// side effects of the document, and the records only the digest covers.
type changes struct {
	Entries     []changeset.Entry      `json:"entries"`
	SideEffects []changeset.SideEffect `json:"sideEffects"`
	// Actions are the resources' actions in plan order: a replace that
	// creates first differs from one that destroys first.
	Actions [][]string `json:"actions"`
	// Outputs are the root's output changes, as entries named
	// output.<name> with one attribute "value".
	Outputs []changeset.Entry `json:"outputs"`
	// Invocations are the action invocations, as entries named by the
	// action with its config as attributes.
	Invocations []changeset.Entry `json:"invocations"`
	// Sensitive is the keyed digest (preview.KeyedDigest) of hidden, set
	// by summarize: it moves the member digest when a sensitive value
	// moves, and shows none.
	Sensitive string `json:"sensitive"`
	// Runtime are the blocks the plan runs at apply outside it, with
	// their keyed digests (internal/planconfig), set by summarize.
	Runtime []planconfig.Block `json:"runtime"`

	// hidden are the values kept out of the entries because they are
	// sensitive, in plan order. They live in memory only.
	hidden []hiddenValue
}

// hiddenValue is a sensitive value the document leaves out, with where it
// is. A side that is absent (before of a create, after known only after
// apply) has its Has* false.
type hiddenValue struct {
	Address   string `json:"address"`
	Name      string `json:"name"`
	Before    any    `json:"before,omitempty"`
	After     any    `json:"after,omitempty"`
	HasBefore bool   `json:"hasBefore"`
	HasAfter  bool   `json:"hasAfter"`
}

// readChanges extracts the changes of plan for member. Every value it
// returns has passed the sensitivity checks: a value with a sensitive part,
// or one holding a value the plan marks sensitive anywhere, is left out.
func readChanges(plan *tfjson.Plan, member string, sec *secrets) (*changes, error) {
	out := &changes{
		Entries:     []changeset.Entry{},
		SideEffects: []changeset.SideEffect{},
		Actions:     [][]string{},
		Outputs:     []changeset.Entry{},
		Invocations: []changeset.Entry{},
		hidden:      []hiddenValue{},
	}
	for i, rc := range plan.ResourceChanges {
		if rc == nil || rc.Change == nil || rc.Address == "" {
			return nil, fmt.Errorf("resource_changes[%d]: no address or change", i)
		}
		action, err := entryAction(rc.Change.Actions)
		if err != nil {
			return nil, fmt.Errorf("resource_changes[%d] %s: %w", i, rc.Address, err)
		}
		address := rc.Address
		if rc.DeposedKey != "" {
			address = fmt.Sprintf("%s (deposed object %s)", rc.Address, rc.DeposedKey)
		}
		out.Entries = append(out.Entries, changeset.Entry{
			Member:     member,
			Address:    address,
			Action:     action,
			Importing:  rc.Change.Importing != nil,
			Attributes: out.attributes(address, rc.Change, action, sec),
		})
		acts := make([]string, len(rc.Change.Actions))
		for j, a := range rc.Change.Actions {
			acts[j] = string(a)
		}
		out.Actions = append(out.Actions, acts)
		out.SideEffects = append(out.SideEffects, out.sideEffects(rc, action, member, sec)...)
	}
	for _, name := range slices.Sorted(maps.Keys(plan.OutputChanges)) {
		c := plan.OutputChanges[name]
		if c == nil {
			return nil, fmt.Errorf("output_changes %q: no change", name)
		}
		action, err := entryAction(c.Actions)
		if err != nil {
			return nil, fmt.Errorf("output_changes %q: %w", name, err)
		}
		out.Outputs = append(out.Outputs, changeset.Entry{
			Member:     member,
			Address:    "output." + name,
			Action:     action,
			Attributes: []changeset.Attribute{out.outputAttribute("output."+name, c, action, sec)},
		})
	}
	for i, ai := range plan.ActionInvocations {
		if ai == nil || ai.Address == "" {
			return nil, fmt.Errorf("action_invocations[%d]: no address", i)
		}
		out.Invocations = append(out.Invocations, changeset.Entry{
			Member:  member,
			Address: ai.Address,
			Action:  "invoke",
			Attributes: out.attributes(ai.Address, &tfjson.Change{
				After:          ai.ConfigValues,
				AfterUnknown:   ai.ConfigUnknown,
				AfterSensitive: ai.ConfigSensitive,
			}, changeset.ActionCreate, sec),
		})
		out.SideEffects = append(out.SideEffects, changeset.SideEffect{
			Member:  member,
			Kind:    SideEffectAction,
			Address: ai.Address,
			Detail:  invocationDetail(ai),
		})
	}
	return out, nil
}

// entryAction names the action of a change as spec 003 does.
func entryAction(a tfjson.Actions) (string, error) {
	switch {
	case a.Replace():
		return changeset.ActionReplace, nil
	case len(a) != 1:
		return "", fmt.Errorf("unknown actions %q", a)
	}
	switch a[0] {
	case tfjson.ActionCreate:
		return changeset.ActionCreate, nil
	case tfjson.ActionUpdate:
		return changeset.ActionUpdate, nil
	case tfjson.ActionDelete:
		return changeset.ActionDelete, nil
	case tfjson.ActionRead:
		return changeset.ActionRead, nil
	case tfjson.ActionNoop:
		return changeset.ActionNoOp, nil
	case tfjson.ActionForget:
		return changeset.ActionForget, nil
	}
	return "", fmt.Errorf("unknown action %q", a[0])
}

// sideEffects lists what applying rc does beside its entry.
func (ch *changes) sideEffects(rc *tfjson.ResourceChange, action, member string, sec *secrets) []changeset.SideEffect {
	var out []changeset.SideEffect
	if imp := rc.Change.Importing; imp != nil {
		out = append(out, changeset.SideEffect{Member: member, Kind: SideEffectImport, Address: rc.Address, Detail: ch.importDetail(rc.Address, imp, sec)})
	}
	if rc.PreviousAddress != "" && rc.PreviousAddress != rc.Address {
		out = append(out, changeset.SideEffect{Member: member, Kind: SideEffectMove, Address: rc.Address, Detail: "moved from " + rc.PreviousAddress})
	}
	if action == changeset.ActionForget {
		out = append(out, changeset.SideEffect{Member: member, Kind: SideEffectForget, Address: rc.Address, Detail: "removed from state, left in place"})
	}
	if rc.DeposedKey != "" {
		out = append(out, changeset.SideEffect{Member: member, Kind: SideEffectDeposed, Address: rc.Address, Detail: fmt.Sprintf("deposed object %s: %s", rc.DeposedKey, action)})
	}
	return out
}

// importDetail says what an import imports; a sensitive id or identity is
// hidden, and bound by the keyed digest.
func (ch *changes) importDetail(address string, imp *tfjson.Importing, sec *secrets) string {
	switch {
	case imp.Unknown:
		return "id known after apply"
	case imp.ID != "" && sec.taints(imp.ID):
		ch.hide(address, "import id", nil, imp.ID, false, true)
		return "id (sensitive)"
	case imp.ID != "":
		return "id " + imp.ID
	case imp.Identity != nil && sec.taints(imp.Identity):
		ch.hide(address, "import identity", nil, imp.Identity, false, true)
		return "identity (sensitive)"
	case imp.Identity != nil:
		b, err := json.Marshal(imp.Identity)
		if err != nil {
			return "identity"
		}
		return "identity " + string(b)
	}
	return ""
}

func invocationDetail(ai *tfjson.ActionInvocation) string {
	if t := ai.LifecycleActionTrigger; t != nil {
		return fmt.Sprintf("%s of %s", t.ActionTriggerEvent, t.TriggeringResourceAddress)
	}
	return "invoked"
}

// hide keeps a sensitive value for the keyed digest.
func (ch *changes) hide(address, name string, before, after any, hasBefore, hasAfter bool) {
	h := hiddenValue{Address: address, Name: name, HasBefore: hasBefore, HasAfter: hasAfter}
	if hasBefore {
		h.Before = before
	}
	if hasAfter {
		h.After = after
	}
	ch.hidden = append(ch.hidden, h)
}

// attributes lists the top-level attributes change c of address writes,
// each with its values before and after unless a part of it is sensitive;
// a sensitive one's values are hidden for the keyed digest.
func (ch *changes) attributes(address string, c *tfjson.Change, action string, sec *secrets) []changeset.Attribute {
	switch action {
	case changeset.ActionDelete, changeset.ActionForget, changeset.ActionNoOp:
		return nil
	}
	before, after := objectOf(c.Before), objectOf(c.After)
	if action == changeset.ActionCreate || action == changeset.ActionRead {
		before = nil
	}
	unknown := objectOf(c.AfterUnknown)
	bs, as := objectOf(c.BeforeSensitive), objectOf(c.AfterSensitive)
	wholly := c.BeforeSensitive == true || c.AfterSensitive == true
	forces := map[string]bool{}
	for _, p := range c.ReplacePaths {
		if steps, ok := p.([]any); ok && len(steps) > 0 {
			if name, ok := steps[0].(string); ok {
				forces[name] = true
			}
		}
	}
	names := map[string]bool{}
	for _, m := range []map[string]any{before, after, unknown} {
		for k := range m {
			names[k] = true
		}
	}
	var out []changeset.Attribute
	for _, name := range slices.Sorted(maps.Keys(names)) {
		b, hasB := before[name]
		a, hasA := after[name]
		if unknown[name] == true {
			hasA = false
		}
		isUnknown := hasTrue(unknown[name])
		sensitive := wholly || hasTrue(bs[name]) || hasTrue(as[name])
		if before == nil {
			// A create writes what it sets: no null it leaves alone.
			if !isUnknown && (!hasA || a == nil) {
				continue
			}
		} else if !isUnknown && hasB == hasA && sameJSON(b, a) && hasTrue(bs[name]) == hasTrue(as[name]) {
			continue
		}
		sensitive = sensitive || (hasB && sec.taints(b)) || (hasA && sec.taints(a))
		attr := changeset.Attribute{Name: name, Unknown: isUnknown, Sensitive: sensitive, ForcesReplacement: forces[name]}
		if sensitive {
			ch.hide(address, name, b, a, hasB, hasA)
		} else {
			if hasB {
				attr.Before = rawJSON(b)
			}
			if hasA {
				attr.After = rawJSON(a)
			}
		}
		out = append(out, attr)
	}
	return out
}

// outputAttribute is the value of an output change; a sensitive one's
// values are hidden for the keyed digest.
func (ch *changes) outputAttribute(address string, c *tfjson.Change, action string, sec *secrets) changeset.Attribute {
	attr := changeset.Attribute{
		Name:      "value",
		Unknown:   hasTrue(c.AfterUnknown),
		Sensitive: hasTrue(c.BeforeSensitive) || hasTrue(c.AfterSensitive),
	}
	hasB := action != changeset.ActionCreate && action != changeset.ActionNoOp
	hasA := action != changeset.ActionDelete && c.AfterUnknown != true
	attr.Sensitive = attr.Sensitive || (hasB && sec.taints(c.Before)) || (hasA && sec.taints(c.After))
	if attr.Sensitive {
		ch.hide(address, attr.Name, c.Before, c.After, hasB, hasA)
	}
	if attr.Sensitive || action == changeset.ActionNoOp {
		return attr
	}
	if hasB {
		attr.Before = rawJSON(c.Before)
	}
	if hasA {
		attr.After = rawJSON(c.After)
	}
	return attr
}

func objectOf(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// hasTrue says whether a marker (after_unknown, *_sensitive) marks
// anything: true itself, or true anywhere inside.
func hasTrue(v any) bool {
	switch v := v.(type) {
	case bool:
		return v
	case map[string]any:
		for _, e := range v {
			if hasTrue(e) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if hasTrue(e) {
				return true
			}
		}
	}
	return false
}

// rawJSON encodes a value decoded with json.Number, so numbers keep the
// text terraform wrote.
func rawJSON(v any) json.RawMessage {
	b, err := changeset.Canonical(v)
	if err != nil {
		// Unreachable: a value decoded from JSON always encodes again.
		panic(fmt.Sprintf("encode a decoded value: %v", err))
	}
	return b
}

func sameJSON(a, b any) bool {
	return bytes.Equal(rawJSON(a), rawJSON(b))
}

// secrets are the values a plan marks sensitive anywhere: in a resource's
// values, an output, a variable, the prior state or an action's config.
// terraform marks a value where it is read, not every copy of it (a
// terraform_data's output holds its input unmarked once applied), so a
// value is kept from the document when it holds any of them.
type secrets struct {
	// scalars are canonical JSON texts of sensitive non-string leaves and
	// of short strings, matched whole.
	scalars map[string]bool
	// texts are sensitive strings long enough to be matched inside others.
	texts []string
}

// minText is the shortest sensitive string that is searched for inside
// other strings; shorter ones match only a whole equal string, so that a
// one-letter secret does not hide every value.
const minText = 4

func plannedSecrets(plan *tfjson.Plan) *secrets {
	s := &secrets{scalars: map[string]bool{}}
	for _, rc := range plan.ResourceChanges {
		if rc == nil || rc.Change == nil {
			continue
		}
		s.addMarked(rc.Change.Before, rc.Change.BeforeSensitive)
		s.addMarked(rc.Change.After, rc.Change.AfterSensitive)
	}
	for _, c := range plan.OutputChanges {
		if c == nil {
			continue
		}
		s.addMarked(c.Before, c.BeforeSensitive)
		s.addMarked(c.After, c.AfterSensitive)
	}
	for _, ai := range plan.ActionInvocations {
		if ai != nil {
			s.addMarked(ai.ConfigValues, ai.ConfigSensitive)
		}
	}
	if plan.Config != nil && plan.Config.RootModule != nil {
		for name, v := range plan.Variables {
			if cv := plan.Config.RootModule.Variables[name]; cv != nil && cv.Sensitive && v != nil {
				s.addMarked(v.Value, true)
			}
		}
	}
	if plan.PlannedValues != nil {
		for _, o := range plan.PlannedValues.Outputs {
			if o != nil && o.Sensitive {
				s.addMarked(o.Value, true)
			}
		}
	}
	if plan.PriorState != nil && plan.PriorState.Values != nil {
		for _, o := range plan.PriorState.Values.Outputs {
			if o != nil && o.Sensitive {
				s.addMarked(o.Value, true)
			}
		}
		s.addModule(plan.PriorState.Values.RootModule)
	}
	slices.Sort(s.texts)
	s.texts = slices.Compact(s.texts)
	return s
}

func (s *secrets) addModule(m *tfjson.StateModule) {
	if m == nil {
		return
	}
	for _, r := range m.Resources {
		if r == nil || len(r.SensitiveValues) == 0 {
			continue
		}
		var marker any
		if json.Unmarshal(r.SensitiveValues, &marker) == nil {
			values := map[string]any{}
			for k, v := range r.AttributeValues {
				values[k] = v
			}
			s.addMarked(values, marker)
		}
	}
	for _, c := range m.ChildModules {
		s.addModule(c)
	}
}

// addMarked adds the leaves of value that marker marks sensitive.
func (s *secrets) addMarked(value, marker any) {
	switch m := marker.(type) {
	case bool:
		if m {
			s.addAll(value)
		}
	case map[string]any:
		if v, ok := value.(map[string]any); ok {
			for k, mk := range m {
				s.addMarked(v[k], mk)
			}
		}
	case []any:
		if v, ok := value.([]any); ok {
			for i, mk := range m {
				if i < len(v) {
					s.addMarked(v[i], mk)
				}
			}
		}
	}
}

func (s *secrets) addAll(value any) {
	switch v := value.(type) {
	case nil:
	case map[string]any:
		for _, e := range v {
			s.addAll(e)
		}
	case []any:
		for _, e := range v {
			s.addAll(e)
		}
	case string:
		if len(v) >= minText {
			s.texts = append(s.texts, v)
		} else if v != "" {
			s.scalars[string(rawJSON(v))] = true
		}
	default:
		s.scalars[scalarText(v)] = true
	}
}

// scalarText is a scalar's JSON text; a number decoded as float64 (the
// prior state, which terraform-json decodes on its own) is written the way
// terraform writes whole numbers.
func scalarText(v any) string {
	if f, ok := v.(float64); ok {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return string(rawJSON(v))
}

// taints says whether value holds a sensitive value anywhere.
func (s *secrets) taints(value any) bool {
	if len(s.scalars) == 0 && len(s.texts) == 0 {
		return false
	}
	switch v := value.(type) {
	case nil:
		return false
	case map[string]any:
		for k, e := range v {
			if s.taints(k) || s.taints(e) {
				return true
			}
		}
		return false
	case []any:
		return slices.ContainsFunc(v, s.taints)
	case string:
		if v != "" && s.scalars[string(rawJSON(v))] {
			return true
		}
		return slices.ContainsFunc(s.texts, func(t string) bool { return strings.Contains(v, t) })
	default:
		return s.scalars[scalarText(v)]
	}
}
