package arm

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// maxTemplate is the largest template ARM takes (4 MB).
const maxTemplate = 4 << 20

// template is an ARM JSON template, parsed but not evaluated.
type template struct {
	Parameters []*paramDecl
	// variables are the raw variables by lower-case name.
	variables map[string]any
	Resources []map[string]any
	Outputs   map[string]*outputDecl
}

// paramDecl is one declared parameter.
type paramDecl struct {
	Name string
	// Type is lower-case: string, securestring, int, bool, object,
	// secureobject or array.
	Type       string
	Default    any
	HasDefault bool
	Allowed    []any
}

// secure says the parameter's value is never shown: securestring and
// secureobject.
func (p *paramDecl) secure() bool { return p.Type == "securestring" || p.Type == "secureobject" }

// outputDecl is one declared output.
type outputDecl struct {
	Name         string
	Type         string
	Value        any
	Condition    any
	HasCondition bool
}

func (o *outputDecl) secure() bool { return o.Type == "securestring" || o.Type == "secureobject" }

var (
	templateKeys = []string{"$schema", "contentVersion", "apiProfile", "parameters", "variables", "functions", "resources", "outputs", "metadata", "definitions"}
	paramTypes   = []string{"string", "securestring", "int", "bool", "object", "secureobject", "array"}
	// notInBody are the keys of a template resource that say where and
	// how to deploy it rather than what to PUT.
	notInBody = []string{"type", "apiVersion", "name", "dependsOn", "condition", "comments", "metadata"}
	// unsupported are resource keys captf refuses, with the reason.
	unsupported = map[string]string{
		"copy":           "copy loops are not expanded by captf; declare each resource",
		"resources":      "nested child resources are not read by captf; declare each child at the top level with its full type and name",
		"scope":          "extension resources (scope) are not deployed by captf",
		"resourceGroup":  "a resource in another resource group is not deployed by captf; use a step per group",
		"subscriptionId": "a resource in another subscription is not deployed by captf; use a step per group",
	}
)

// parseTemplate reads a template's JSON.
func parseTemplate(body []byte) (*template, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil {
		// The decoder's message names a position or a type, never a value.
		return nil, fmt.Errorf("not an ARM JSON template: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("not an ARM JSON template: more than one JSON value")
	}
	if raw == nil {
		return nil, fmt.Errorf("not an ARM JSON template: not an object")
	}
	if _, ok := raw["languageVersion"]; ok {
		return nil, fmt.Errorf("languageVersion: templates with symbolic resource names are not read by captf; write resources as an array")
	}
	for _, k := range sortedKeys(raw) {
		if !slices.Contains(templateKeys, k) {
			return nil, fmt.Errorf("%s: not a property of an ARM template (known: %s)", k, strings.Join(templateKeys, ", "))
		}
	}
	if fns, ok := raw["functions"].([]any); ok && len(fns) > 0 {
		return nil, fmt.Errorf("functions: user-defined functions are not evaluated by captf")
	}
	t := &template{variables: map[string]any{}, Outputs: map[string]*outputDecl{}}
	params, err := object(raw, "parameters")
	if err != nil {
		return nil, err
	}
	for _, name := range sortedKeys(params) {
		decl, ok := params[name].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("parameters.%s: not an object", name)
		}
		typ, _ := decl["type"].(string)
		p := &paramDecl{Name: name, Type: strings.ToLower(typ)}
		if !slices.Contains(paramTypes, p.Type) {
			return nil, fmt.Errorf("parameters.%s.type: %q is not a parameter type (%s)", name, typ, strings.Join(paramTypes, ", "))
		}
		if t.parameter(name) != nil {
			return nil, fmt.Errorf("parameters.%s: declared twice (names compare without case)", name)
		}
		p.Default, p.HasDefault = decl["defaultValue"]
		if allowed, ok := decl["allowedValues"]; ok {
			list, ok := allowed.([]any)
			if !ok {
				return nil, fmt.Errorf("parameters.%s.allowedValues: not an array", name)
			}
			p.Allowed = list
		}
		t.Parameters = append(t.Parameters, p)
	}
	vars, err := object(raw, "variables")
	if err != nil {
		return nil, err
	}
	for name, v := range vars {
		if strings.EqualFold(name, "copy") {
			return nil, fmt.Errorf("variables.copy: copy loops are not expanded by captf")
		}
		if _, dup := t.variables[strings.ToLower(name)]; dup {
			return nil, fmt.Errorf("variables.%s: declared twice (names compare without case)", name)
		}
		t.variables[strings.ToLower(name)] = v
	}
	if rs, ok := raw["resources"]; ok {
		list, ok := rs.([]any)
		if !ok {
			return nil, fmt.Errorf("resources: not an array")
		}
		for i, r := range list {
			m, ok := r.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("resources[%d]: not an object", i)
			}
			for _, k := range sortedKeys(m) {
				if why, ok := unsupported[k]; ok {
					return nil, fmt.Errorf("resources[%d].%s: %s", i, k, why)
				}
			}
			for _, k := range []string{"type", "apiVersion", "name"} {
				if s, _ := m[k].(string); s == "" {
					return nil, fmt.Errorf("resources[%d].%s: missing", i, k)
				}
			}
			t.Resources = append(t.Resources, m)
		}
	}
	outs, err := object(raw, "outputs")
	if err != nil {
		return nil, err
	}
	for _, name := range sortedKeys(outs) {
		decl, ok := outs[name].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("outputs.%s: not an object", name)
		}
		if _, ok := decl["copy"]; ok {
			return nil, fmt.Errorf("outputs.%s.copy: copy loops are not expanded by captf", name)
		}
		o := &outputDecl{Name: name}
		typ, _ := decl["type"].(string)
		o.Type = strings.ToLower(typ)
		var has bool
		if o.Value, has = decl["value"]; !has {
			return nil, fmt.Errorf("outputs.%s.value: missing", name)
		}
		o.Condition, o.HasCondition = decl["condition"]
		t.Outputs[name] = o
	}
	return t, nil
}

func object(raw map[string]any, key string) (map[string]any, error) {
	v, ok := raw[key]
	if !ok || v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: not an object", key)
	}
	return m, nil
}

// parameter finds a declared parameter; names compare without case.
func (t *template) parameter(name string) *paramDecl {
	for _, p := range t.Parameters {
		if strings.EqualFold(p.Name, name) {
			return p
		}
	}
	return nil
}

func (t *template) variable(name string) (string, any, bool) {
	key := strings.ToLower(name)
	v, ok := t.variables[key]
	return key, v, ok
}

// outputNames are the names of the outputs the template gives a value:
// every output but the secure ones, which ARM never returns either.
func (t *template) outputNames() []string {
	names := []string{}
	for _, n := range sortedKeys(t.Outputs) {
		if !t.Outputs[n].secure() {
			names = append(names, n)
		}
	}
	return names
}

// bind gives each declared parameter its value: the step's, else its
// defaultValue, evaluated in declaration order (a default may read an
// earlier parameter). A secure parameter's value is wrapped as a
// secretValue. A parameter with neither is an error unless partial, when
// it is left without a value. Errors name the parameter, never its value.
func (e *evaluator) bind(given map[string]any, template string, partial bool) error {
	e.params = map[string]any{}
	seen := map[string]string{}
	for _, name := range sortedKeys(given) {
		if e.tmpl.parameter(name) == nil {
			return fmt.Errorf("input parameters.%s: template %s declares no parameter %s", name, template, name)
		}
		if other, dup := seen[strings.ToLower(name)]; dup {
			return fmt.Errorf("input parameters.%s: given twice, also as %s (names compare without case)", name, other)
		}
		seen[strings.ToLower(name)] = name
	}
	for _, p := range e.tmpl.Parameters {
		var v any
		found := false
		for k, gv := range given {
			if strings.EqualFold(k, p.Name) {
				v, found = gv, true
			}
		}
		source := "input parameters." + p.Name
		if !found && p.HasDefault {
			dv, err := e.tree(p.Default)
			if errors.Is(err, errNothing) && partial {
				continue
			}
			if err != nil {
				return fmt.Errorf("template %s: parameters.%s.defaultValue: %w", template, p.Name, err)
			}
			if containsUnknown(dv) {
				return fmt.Errorf("template %s: parameters.%s.defaultValue reads a value known only after apply", template, p.Name)
			}
			v, found = reveal(dv), true
			source = "template " + template + ": parameters." + p.Name + ".defaultValue"
		}
		if !found {
			if partial {
				continue
			}
			return fmt.Errorf("input parameters.%s: missing, and template %s gives parameter %s no defaultValue", p.Name, template, p.Name)
		}
		if err := checkType(p, v); err != nil {
			return fmt.Errorf("%s: %w", source, err)
		}
		if len(p.Allowed) > 0 && !slices.ContainsFunc(p.Allowed, func(a any) bool { return equalJSON(a, v) }) {
			return fmt.Errorf("%s: the value is not one of the template's allowedValues", source)
		}
		if p.secure() {
			v = secretValue{v}
		}
		e.params[strings.ToLower(p.Name)] = v
	}
	return nil
}

// checkType says whether v is a value of the parameter's type; the error
// names the types, never the value.
func checkType(p *paramDecl, v any) error {
	ok := false
	switch p.Type {
	case "string", "securestring":
		_, ok = v.(string)
	case "int":
		_, err := integer(v)
		ok = err == nil
	case "bool":
		_, ok = v.(bool)
	case "object", "secureobject":
		_, ok = v.(map[string]any)
	case "array":
		_, ok = v.([]any)
	}
	if !ok {
		return fmt.Errorf("the template's type is %s, the value is %s", p.Type, kindOf(v))
	}
	return nil
}

// resource is a template resource with its id known.
type resource struct {
	// Index is its place in the template's resources.
	Index int
	// Type is Namespace/type[/child…]; Name the name as the template
	// gives it (name[/child…]).
	Type, Name, APIVersion string
	ID                     string
	// Address is the entry's address: the id after /providers/.
	Address string
	// TopLevel is false for a child resource (Namespace/type/child), which
	// ARM does not list in its group and which gets no tags.
	TopLevel bool
	// DependsOn holds the ids of the template resources it depends on.
	DependsOn []string
	raw       map[string]any
}

// where names a resource in errors: its index and, once known, its
// address.
func (r *resource) where() string {
	if r.Address != "" {
		return fmt.Sprintf("resources[%d] (%s)", r.Index, r.Address)
	}
	return fmt.Sprintf("resources[%d]", r.Index)
}

// declare evaluates each resource's condition, type, name and apiVersion
// and makes its id; a resource whose condition is false is left out. In
// partial mode (outputs of a step whose inputs are incomplete) a resource
// whose name comes to nothing is left out too.
func (e *evaluator) declare(partial bool) ([]*resource, error) {
	var out []*resource
	var skipped []string // names and ids of resources left out by their condition
	seen := map[string]int{}
	for i, raw := range e.tmpl.Resources {
		r := &resource{Index: i, raw: raw}
		if cond, ok := raw["condition"]; ok {
			v, err := e.tree(cond)
			if errors.Is(err, errNothing) && partial {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("%s.condition: %w", r.where(), err)
			}
			b, ok := reveal(v).(bool)
			if containsUnknown(v) || !ok {
				return nil, fmt.Errorf("%s.condition: must be a boolean known before apply, not %s", r.where(), kindOf(v))
			}
			if !b {
				name, _ := e.text(raw["name"])
				typ, _ := e.text(raw["type"])
				skipped = append(skipped, name, typ+"/"+name)
				continue
			}
		}
		fields := map[string]*string{"type": &r.Type, "name": &r.Name, "apiVersion": &r.APIVersion}
		failed := false
		for _, k := range []string{"type", "name", "apiVersion"} {
			s, err := e.text(raw[k])
			if errors.Is(err, errNothing) && partial {
				failed = true
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s.%s: %w", r.where(), k, err)
			}
			*fields[k] = s
		}
		if failed {
			continue
		}
		if strings.EqualFold(r.Type, "Microsoft.Resources/deployments") {
			return nil, fmt.Errorf("%s: nested deployments are not previewed by captf; declare their resources in the template", r.where())
		}
		id, err := buildID(e.subscription, e.group.Name, r.Type, r.Name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.where(), err)
		}
		r.ID = id
		r.Address = strings.SplitN(id, "/providers/", 2)[1]
		r.TopLevel = strings.Count(r.Type, "/") == 1
		if first, dup := seen[strings.ToLower(id)]; dup {
			return nil, fmt.Errorf("%s: declared twice, also at resources[%d]", r.where(), first)
		}
		seen[strings.ToLower(id)] = i
		out = append(out, r)
	}
	e.resources = out
	for _, r := range out {
		deps, ok := r.raw["dependsOn"]
		if !ok {
			continue
		}
		v, err := e.tree(deps)
		if errors.Is(err, errNothing) && partial {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s.dependsOn: %w", r.where(), err)
		}
		list, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("%s.dependsOn: not an array of resource names or ids", r.where())
		}
		for _, d := range list {
			s, ok := d.(string)
			if !ok {
				return nil, fmt.Errorf("%s.dependsOn: holds %s, not a resource name or id", r.where(), kindOf(d))
			}
			dep := e.dependency(s)
			switch {
			case dep != nil:
				r.DependsOn = append(r.DependsOn, dep.ID)
			case slices.ContainsFunc(skipped, func(n string) bool { return strings.EqualFold(n, s) }):
				// ARM drops a dependency on a resource its condition left out.
			default:
				return nil, fmt.Errorf("%s.dependsOn: %s is no resource of the template", r.where(), s)
			}
		}
	}
	return out, nil
}

// dependency finds the resource a dependsOn entry names: its id, its
// Namespace/type/name, or its name.
func (e *evaluator) dependency(s string) *resource {
	for _, r := range e.resources {
		if strings.EqualFold(r.ID, s) || strings.EqualFold(r.Type+"/"+r.Name, s) || strings.EqualFold(r.Name, s) {
			return r
		}
	}
	return nil
}

// text evaluates a template value that must be a plain string known
// before apply: a resource's type, name or apiVersion.
func (e *evaluator) text(v any) (string, error) {
	ev, err := e.tree(v)
	if err != nil {
		return "", err
	}
	switch {
	case containsUnknown(ev):
		return "", fmt.Errorf("known only after apply; captf needs it to know the resource's id")
	case isSecret(ev):
		return "", fmt.Errorf("reads a secure value, which would show in the resource's id")
	}
	s, ok := ev.(string)
	if !ok || s == "" {
		return "", fmt.Errorf("must be a non-empty string, not %s", kindOf(ev))
	}
	return s, nil
}

// body evaluates what the apply PUTs for r (with the planning resolver, its
// values known only after apply stay unknownValue; secure values stay
// secretValue).
func (e *evaluator) body(r *resource) (map[string]any, error) {
	out := map[string]any{}
	for _, k := range sortedKeys(r.raw) {
		if slices.Contains(notInBody, k) {
			continue
		}
		v, err := e.tree(r.raw[k])
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", r.where(), k, err)
		}
		out[k] = v
	}
	if tags, ok := out["tags"].(map[string]any); ok {
		for k := range tags {
			if strings.EqualFold(k, OwnerTag) || strings.EqualFold(k, SecureTag) {
				return nil, fmt.Errorf("%s.tags: %s is the tag captf stamps; the template cannot set it", r.where(), k)
			}
		}
	}
	return out, nil
}
