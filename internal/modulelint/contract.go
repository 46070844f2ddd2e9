package modulelint

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/captf/captf/internal/modulecontract"
)

// What the manager reads from and sets on a module of the role.

// checkOutputs reports the role's outputs that are missing, of a kind the
// manager cannot read, or sensitive: the runner never reports a sensitive
// value, and every output the manager reads is published.
func (m *module) checkOutputs(c modulecontract.Contract) []Finding {
	var out []Finding
	for _, o := range c.Outputs {
		d := m.outputs[o.Name]
		if d == nil {
			if o.Required {
				out = append(out, Finding{Severity: Error, Rule: RuleOutputMissing,
					Message: fmt.Sprintf("output %q is missing: the manager reads it for %s, and a %s module must declare it", o.Name, o.ReadFor, c.Role)})
			}
			continue
		}
		if d.sensitive() {
			out = append(out, at(d.sensitiveRange(), Error, RuleOutputSensitive,
				"output %q is sensitive: the manager never reads a sensitive output, and reads this one for %s; keep secrets out of it and remove sensitive = true", o.Name, o.ReadFor))
		}
		if a := d.attrs["value"]; a != nil {
			if p := judge(o.Kind, static(a.Expr)); p != "" {
				out = append(out, at(a.Range, Error, RuleOutputType,
					"output %q: %s; for %s the manager reads %s", o.Name, p, o.ReadFor, o.Kind))
			}
		}
	}
	for _, pair := range c.Pairs {
		for i, name := range pair {
			other := pair[1-i]
			if d := m.outputs[name]; d != nil && m.outputs[other] == nil {
				out = append(out, at(d.def, Error, RuleOutputMissing,
					"output %q is declared without %q: the manager reads them only together", name, other))
			}
		}
	}
	return out
}

// checkVariables reports the role's variables that are missing, of a type
// the value the manager sets does not fit, or not sensitive when the value
// is secret; and, among the module's own variables, those that look like a
// credential but are not sensitive.
func (m *module) checkVariables(c modulecontract.Contract) []Finding {
	var out []Finding
	for _, v := range c.Variables {
		d := m.variables[v.Name]
		if d == nil {
			if v.Required {
				out = append(out, Finding{Severity: Error, Rule: RuleVariableMissing,
					Message: fmt.Sprintf("variable %q is missing: the manager sets it to %s, and a %s module must declare it", v.Name, v.Holds, c.Role)})
			}
			continue
		}
		if a := d.attrs["type"]; a != nil {
			t, _, diags := typeexpr.TypeConstraintWithDefaults(a.Expr)
			switch {
			case diags.HasErrors():
				for _, f := range parseFindings(a.Range.Filename, diags) {
					f.Message = fmt.Sprintf("variable %q: %s", v.Name, f.Message)
					out = append(out, f)
				}
			case !accepts(v.Kind, t):
				out = append(out, at(a.Range, Error, RuleVariableType,
					"variable %q: type is %s; the manager sets %s: %s", v.Name, typeexpr.TypeString(t), v.Kind, v.Holds))
			}
		}
		if v.Sensitive && !d.sensitive() {
			out = append(out, at(d.sensitiveRange(), Error, RuleVariableSensitive,
				"variable %q is not sensitive: the manager sets it to %s, which terraform would show in the Job's log; add sensitive = true", v.Name, v.Holds))
		}
	}
	for name, d := range m.variables {
		if slices.ContainsFunc(c.Variables, func(v modulecontract.Variable) bool { return v.Name == name }) {
			continue
		}
		if credential(name) && !d.sensitive() {
			out = append(out, at(d.sensitiveRange(), Warning, RuleCredential,
				"variable %q looks like a credential but is not sensitive: terraform would show its value in the Job's log; add sensitive = true", name))
		}
	}
	return out
}

// accepts says whether a variable of type t takes the value the manager
// sets for kind k as it is. Types that would convert it (a bool into a
// string) are refused: the module would read something else than the
// manager meant.
func accepts(k modulecontract.Kind, t cty.Type) bool {
	if t == cty.DynamicPseudoType {
		return true
	}
	switch k {
	case modulecontract.KindString:
		return t == cty.String
	case modulecontract.KindNumber:
		return t == cty.Number
	case modulecontract.KindBool:
		return t == cty.Bool
	case modulecontract.KindStringList:
		return (t.IsListType() || t.IsSetType()) && (t.ElementType() == cty.String || t.ElementType() == cty.DynamicPseudoType)
	case modulecontract.KindObject:
		return objectLike(t)
	case modulecontract.KindStringMap:
		return t.IsMapType() && (t.ElementType() == cty.String || t.ElementType() == cty.DynamicPseudoType)
	case modulecontract.KindTaints:
		if !t.IsListType() && !t.IsSetType() {
			return false
		}
		e := t.ElementType()
		return e == cty.DynamicPseudoType || e.IsMapType() ||
			(e.IsObjectType() && e.HasAttribute("key") && e.HasAttribute("value") && e.HasAttribute("effect") && len(e.AttributeTypes()) == 3)
	}
	return false
}

// sensitive says whether the declaration is sensitive as terraform reads
// it: the value of sensitive converted to a bool, so that the string
// "true" is true.
func (d *declaration) sensitive() bool {
	a := d.attrs["sensitive"]
	if a == nil {
		return false
	}
	v := static(a.Expr)
	if !v.IsKnown() || v.IsNull() {
		return false
	}
	b, err := convert.Convert(v, cty.Bool)
	return err == nil && isTrue(b)
}

// sensitiveRange is where sensitive is set to something other than true,
// or the block's header when it is not set.
func (d *declaration) sensitiveRange() hcl.Range {
	if a := d.attrs["sensitive"]; a != nil {
		return a.Range
	}
	return d.def
}

// credentialWords end the last word of a variable name that holds a
// credential. Only the last word counts, and a name with the word
// "public" is not one: key_name, kms_key_id, token_ttl and ssh_public_key
// name no secret.
var credentialWords = []string{"token", "password", "passwd", "secret", "key", "credential", "creds"}

// credential says whether a variable's name looks like a credential's.
func credential(name string) bool {
	words := strings.FieldsFunc(strings.ToLower(name), func(r rune) bool { return r == '_' || r == '-' })
	if len(words) == 0 || slices.Contains(words, "public") {
		return false
	}
	last := strings.TrimSuffix(words[len(words)-1], "s")
	for _, w := range credentialWords {
		if strings.HasSuffix(last, strings.TrimSuffix(w, "s")) {
			return true
		}
	}
	return false
}
