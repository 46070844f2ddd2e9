package cfn

import (
	"fmt"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/captf/captf/internal/preview"
)

// maxTemplateBody is the largest template CreateChangeSet takes inline
// (TemplateBody); a larger one needs an S3 TemplateURL, which captf does
// not upload.
const maxTemplateBody = 51200

// template is what captf reads from a CloudFormation template: the
// parameters (for NoEcho and defaults), the resources' types and the
// outputs' values. Intrinsic functions in the YAML short form (!Ref,
// !GetAtt, !Sub, …) are read as their long form (Ref, Fn::GetAtt,
// Fn::Sub, …).
type template struct {
	Parameters map[string]templateParameter
	Resources  map[string]string // logical id → resource type
	Outputs    map[string]templateOutput
}

type templateParameter struct {
	NoEcho  bool
	Default *string
}

type templateOutput struct {
	Value any
	// Conditional is true when the output has a Condition and so may not
	// exist after apply.
	Conditional bool
}

// parseTemplate reads a JSON or YAML template. Errors name the section and
// key, never a value.
func parseTemplate(body []byte) (*template, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(body, &doc); err != nil {
		return nil, fmt.Errorf("not JSON or YAML: %w", err)
	}
	tree, err := decodeNode(&doc)
	if err != nil {
		return nil, err
	}
	root, ok := tree.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("not a template: the document is %s, not a map", preview.KindOf(tree))
	}
	t := &template{
		Parameters: map[string]templateParameter{},
		Resources:  map[string]string{},
		Outputs:    map[string]templateOutput{},
	}
	params, err := section(root, "Parameters")
	if err != nil {
		return nil, err
	}
	for name, v := range params {
		p, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("field Parameters.%s: must be a map, not %s", name, preview.KindOf(v))
		}
		var tp templateParameter
		switch ne := p["NoEcho"].(type) {
		case nil:
		case string:
			tp.NoEcho = strings.EqualFold(ne, "true")
		case bool:
			tp.NoEcho = ne
		default:
			return nil, fmt.Errorf("field Parameters.%s.NoEcho: must be true or false, not %s", name, preview.KindOf(ne))
		}
		if d, ok := p["Default"]; ok {
			s, err := parameterValue(d)
			if err != nil {
				return nil, fmt.Errorf("field Parameters.%s.Default: %w", name, err)
			}
			tp.Default = &s
		}
		t.Parameters[name] = tp
	}
	resources, err := section(root, "Resources")
	if err != nil {
		return nil, err
	}
	for id, v := range resources {
		r, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("field Resources.%s: must be a map, not %s", id, preview.KindOf(v))
		}
		typ, ok := r["Type"].(string)
		if !ok {
			return nil, fmt.Errorf("field Resources.%s.Type: missing or not a string", id)
		}
		t.Resources[id] = typ
	}
	outputs, err := section(root, "Outputs")
	if err != nil {
		return nil, err
	}
	for name, v := range outputs {
		o, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("field Outputs.%s: must be a map, not %s", name, preview.KindOf(v))
		}
		value, ok := o["Value"]
		if !ok {
			return nil, fmt.Errorf("field Outputs.%s.Value: missing", name)
		}
		_, conditional := o["Condition"]
		t.Outputs[name] = templateOutput{Value: value, Conditional: conditional}
	}
	return t, nil
}

// noEcho names the NoEcho parameters.
func (t *template) noEcho() map[string]bool {
	out := map[string]bool{}
	for name, p := range t.Parameters {
		if p.NoEcho {
			out[name] = true
		}
	}
	return out
}

func section(root map[string]any, name string) (map[string]any, error) {
	v, ok := root[name]
	if !ok || v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("field %s: must be a map, not %s", name, preview.KindOf(v))
	}
	return m, nil
}

// decodeNode turns a YAML node into maps, lists and strings, replacing each
// short-form intrinsic tag with its long form.
func decodeNode(n *yaml.Node) (any, error) {
	var v any
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, fmt.Errorf("empty document")
		}
		return decodeNode(n.Content[0])
	case yaml.AliasNode:
		return decodeNode(n.Alias)
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("line %d: a map key that is not a string", k.Line)
			}
			dv, err := decodeNode(val)
			if err != nil {
				return nil, err
			}
			m[k.Value] = dv
		}
		v = m
	case yaml.SequenceNode:
		list := make([]any, 0, len(n.Content))
		for _, e := range n.Content {
			dv, err := decodeNode(e)
			if err != nil {
				return nil, err
			}
			list = append(list, dv)
		}
		v = list
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return nil, nil
		}
		if n.Tag == "!!bool" {
			return strings.EqualFold(n.Value, "true"), nil
		}
		v = n.Value
	}
	if fn := intrinsic(n.Tag); fn != "" {
		return map[string]any{fn: v}, nil
	}
	return v, nil
}

// intrinsic returns the long name of a short-form tag (!Ref → Ref,
// !GetAtt → Fn::GetAtt), or "" for a YAML core tag.
func intrinsic(tag string) string {
	if !strings.HasPrefix(tag, "!") || strings.HasPrefix(tag, "!!") {
		return ""
	}
	name := tag[1:]
	if name == "Ref" || name == "Condition" {
		return name
	}
	return "Fn::" + name
}

// reads is what an output value reads.
type reads struct {
	Names []string // logical ids, parameters and pseudo parameters, sorted
	// Opaque is true when the value uses a function whose result captf
	// does not follow (Fn::ImportValue reads another stack).
	Opaque bool
	// Attributes lists the logical ids read through Fn::GetAtt.
	Attributes []string
}

// references collects the names an output value reads through Ref,
// Fn::GetAtt and Fn::Sub.
func references(v any) reads {
	names := map[string]bool{}
	attrs := map[string]bool{}
	var r reads
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			if len(x) == 1 {
				for fn, arg := range x {
					switch fn {
					case "Ref":
						if s, ok := arg.(string); ok {
							names[s] = true
							return
						}
					case "Fn::GetAtt":
						if id := getAttTarget(arg); id != "" {
							names[id] = true
							attrs[id] = true
							return
						}
						walk(arg)
						return
					case "Fn::Sub":
						subReferences(arg, names, attrs, walk)
						return
					case "Fn::ImportValue":
						r.Opaque = true
					}
				}
			}
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	r.Names = sortedKeys(names)
	r.Attributes = sortedKeys(attrs)
	return r
}

// getAttTarget returns the logical id of Fn::GetAtt [id, attr] or "id.attr".
func getAttTarget(arg any) string {
	switch a := arg.(type) {
	case string:
		id, _, _ := strings.Cut(a, ".")
		return id
	case []any:
		if len(a) > 0 {
			if id, ok := a[0].(string); ok {
				return id
			}
		}
	}
	return ""
}

// subReferences reads the ${Name} and ${Name.Attr} variables of Fn::Sub,
// leaving out ${!Literal} and the names its variable map defines.
func subReferences(arg any, names, attrs map[string]bool, walk func(any)) {
	var body string
	local := map[string]bool{}
	switch a := arg.(type) {
	case string:
		body = a
	case []any:
		if len(a) > 0 {
			body, _ = a[0].(string)
		}
		if len(a) > 1 {
			if vars, ok := a[1].(map[string]any); ok {
				for k, v := range vars {
					local[k] = true
					walk(v)
				}
			}
		}
	}
	for _, name := range subVariables(body) {
		id, attr, hasAttr := strings.Cut(name, ".")
		if local[name] || local[id] {
			continue
		}
		names[id] = true
		if hasAttr && attr != "" {
			attrs[id] = true
		}
	}
}

// subVariables returns the variable names of a Fn::Sub string.
func subVariables(s string) []string {
	var out []string
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			return out
		}
		s = s[i+2:]
		j := strings.Index(s, "}")
		if j < 0 {
			return out
		}
		name := strings.TrimSpace(s[:j])
		s = s[j+1:]
		if strings.HasPrefix(name, "!") {
			continue
		}
		out = append(out, name)
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
