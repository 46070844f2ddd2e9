package cfn

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation/types"

	"github.com/captf/captf/internal/preview"
)

// plannedOutputs says which outputs the stack will have after the change
// set, with their values: every current output when the change set has
// nothing to apply; otherwise each output whose value reads only resources
// the change set leaves alone or modifies in place (its current value,
// when its expression and the parameters it reads did not change), or reads
// no resource at all (evaluated from the template). Any other output is
// known only after apply and left out.
func (m *member) plannedOutputs(ctx context.Context, p *proposal) (preview.Outputs, error) {
	out := preview.Outputs{}
	if p.Empty {
		if p.Current == nil {
			return out, nil
		}
		current, err := stackOutputs(p.Current)
		if err != nil {
			return nil, err
		}
		return m.withoutSensitive(current), nil
	}
	current := map[string]string{}
	currentParams := map[string]string{}
	var previous *template
	if p.Current != nil {
		for _, o := range p.Current.Outputs {
			current[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
		}
		for _, prm := range p.Current.Parameters {
			currentParams[aws.ToString(prm.ParameterKey)] = aws.ToString(prm.ParameterValue)
		}
		previous = m.previousTemplate(ctx)
	}
	byAddress := map[string]change{}
	for _, c := range p.Changes {
		byAddress[c.Address] = c
	}
	ev := evaluator{tmpl: m.tmpl, params: m.effectiveParameters(), region: m.region, stack: m.in.Stack}
	for name, o := range m.tmpl.Outputs {
		if o.Conditional {
			continue
		}
		r := references(o.Value)
		if r.Opaque {
			continue
		}
		known, readsResource, paramsMoved := true, false, false
		for _, ref := range r.Names {
			switch {
			case m.tmpl.Resources[ref] != "":
				readsResource = true
				c, changed := byAddress[ref]
				if changed && !inPlace(c) {
					known = false
				}
				// A nested stack modified in place may change its outputs.
				if changed && m.tmpl.Resources[ref] == "AWS::CloudFormation::Stack" && contains(r.Attributes, ref) {
					known = false
				}
			case hasParameter(m.tmpl, ref):
				if m.tmpl.Parameters[ref].NoEcho {
					known = false
				}
				if v, ok := currentParams[ref]; !ok || v != ev.params[ref] {
					paramsMoved = true
				}
			case strings.HasPrefix(ref, "AWS::"):
			default:
				known = false
			}
		}
		if !known {
			continue
		}
		if !readsResource {
			if v, ok := ev.eval(o.Value); ok {
				out[name], _ = json.Marshal(v)
				continue
			}
		}
		v, ok := current[name]
		if !ok || paramsMoved || previous == nil || !sameValue(previous.Outputs[name], o) {
			continue
		}
		out[name], _ = json.Marshal(v)
	}
	return m.withoutSensitive(out), nil
}

// withoutSensitive leaves out each output whose template value reads a
// NoEcho parameter (CloudFormation does not mask those) and each output
// that holds a given NoEcho parameter's value: outputs travel into the
// report and the note, and into the inputs of dependents.
func (m *member) withoutSensitive(out preview.Outputs) preview.Outputs {
	noEcho := m.tmpl.noEcho()
	for name, o := range m.tmpl.Outputs {
		for _, ref := range references(o.Value).Names {
			if noEcho[ref] {
				delete(out, name)
			}
		}
	}
	for name, raw := range out {
		var v string
		if json.Unmarshal(raw, &v) != nil {
			continue
		}
		for param := range noEcho {
			secret := m.in.Parameters[param]
			if secret != "" && (v == secret || len(secret) >= minRedacted && strings.Contains(v, secret)) {
				delete(out, name)
			}
		}
	}
	return out
}

// inPlace is true for a change that keeps the resource: a Modify without
// replacement.
func inPlace(c change) bool {
	return c.Action == string(types.ChangeActionModify) &&
		(c.Replacement == "" || c.Replacement == string(types.ReplacementFalse))
}

func hasParameter(t *template, name string) bool {
	_, ok := t.Parameters[name]
	return ok
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func sameValue(a, b templateOutput) bool {
	return a.Conditional == b.Conditional && reflect.DeepEqual(a.Value, b.Value)
}

// previousTemplate reads the template the stack runs now; nil when it
// cannot be read or parsed, which leaves outputs that read resources known
// only after apply.
func (m *member) previousTemplate(ctx context.Context) *template {
	out, err := m.session.api.GetTemplate(ctx, &cloudformation.GetTemplateInput{
		StackName:     aws.String(m.in.Stack),
		TemplateStage: types.TemplateStageOriginal,
	})
	if err != nil {
		return nil
	}
	t, err := parseTemplate([]byte(aws.ToString(out.TemplateBody)))
	if err != nil {
		return nil
	}
	return t
}

// effectiveParameters are the values CloudFormation will use: the given
// ones, else the template's defaults.
func (m *member) effectiveParameters() map[string]string {
	out := map[string]string{}
	for name, p := range m.tmpl.Parameters {
		if v, ok := m.in.Parameters[name]; ok {
			out[name] = v
		} else if p.Default != nil {
			out[name] = *p.Default
		}
	}
	return out
}

// evaluator computes an output value that reads no resource: literals, Ref
// to a parameter or to AWS::Region and AWS::StackName, Fn::Sub and
// Fn::Join over those. A NoEcho parameter is never evaluated.
type evaluator struct {
	tmpl   *template
	params map[string]string
	region string
	stack  string
}

func (e evaluator) eval(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case bool:
		if x {
			return "true", true
		}
		return "false", true
	case map[string]any:
		if len(x) != 1 {
			return "", false
		}
		for fn, arg := range x {
			switch fn {
			case "Ref":
				name, ok := arg.(string)
				if !ok {
					return "", false
				}
				return e.ref(name)
			case "Fn::Join":
				return e.join(arg)
			case "Fn::Sub":
				return e.sub(arg)
			}
		}
	}
	return "", false
}

func (e evaluator) ref(name string) (string, bool) {
	switch name {
	case "AWS::Region":
		return e.region, true
	case "AWS::StackName":
		return e.stack, true
	}
	p, ok := e.tmpl.Parameters[name]
	if !ok || p.NoEcho {
		return "", false
	}
	v, ok := e.params[name]
	return v, ok
}

func (e evaluator) join(arg any) (string, bool) {
	a, ok := arg.([]any)
	if !ok || len(a) != 2 {
		return "", false
	}
	delim, ok := a[0].(string)
	items, ok2 := a[1].([]any)
	if !ok || !ok2 {
		return "", false
	}
	parts := make([]string, len(items))
	for i, it := range items {
		s, ok := e.eval(it)
		if !ok {
			return "", false
		}
		parts[i] = s
	}
	return strings.Join(parts, delim), true
}

func (e evaluator) sub(arg any) (string, bool) {
	var body string
	vars := map[string]any{}
	switch a := arg.(type) {
	case string:
		body = a
	case []any:
		if len(a) != 2 {
			return "", false
		}
		var ok bool
		if body, ok = a[0].(string); !ok {
			return "", false
		}
		if vars, ok = a[1].(map[string]any); !ok {
			return "", false
		}
	default:
		return "", false
	}
	var b strings.Builder
	for {
		i := strings.Index(body, "${")
		if i < 0 {
			b.WriteString(body)
			return b.String(), true
		}
		b.WriteString(body[:i])
		body = body[i+2:]
		j := strings.Index(body, "}")
		if j < 0 {
			return "", false
		}
		name := strings.TrimSpace(body[:j])
		body = body[j+1:]
		if lit, ok := strings.CutPrefix(name, "!"); ok {
			b.WriteString("${" + lit + "}")
			continue
		}
		var s string
		var ok bool
		if v, local := vars[name]; local {
			s, ok = e.eval(v)
		} else {
			s, ok = e.ref(name)
		}
		if !ok {
			return "", false
		}
		b.WriteString(s)
	}
}
