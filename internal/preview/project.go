package preview

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/captf/captf/internal/inputfile"
)

// ProjectFile is the project file's name at the repository root.
const ProjectFile = "captf.yaml"

// ErrInvalid marks a project file, flag or seed file that is wrong; the
// message names the file, the line and the field.
var ErrInvalid = errors.New("invalid")

// Project is a parsed project file: the components in the order the file
// writes them, and the environments that supply vars.
type Project struct {
	// File is the path errors name.
	File         string
	Components   []*Component
	Environments map[string]*Environment
}

// Component is one deployable unit: steps run in order, after every
// component it depends on.
type Component struct {
	Name string
	// DependsOn lists the components this one runs after, as written plus
	// every component a stackOutput reference of its steps reads.
	DependsOn []string
	Steps     []*Step
	line      int
	// declared is the dependsOn list as written.
	declared []string
}

// Step is one step of a component: a capability kind and its inputs.
type Step struct {
	// Name is unique within the component; the kind when not written.
	Name string
	Kind string
	// Inputs are decoded from YAML; a stackOutput reference is a
	// StackOutput value.
	Inputs map[string]any
	line   int
}

// StackOutput is a reference to another component's output, written
// {stackOutput: {component: X, name: Y}}.
type StackOutput struct {
	Component string
	Name      string
}

// MarshalJSON writes the reference as the project file writes it, so that
// digests over inputs "as written" see the reference, never its value.
func (s StackOutput) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]map[string]string{"stackOutput": {"component": s.Component, "name": s.Name}})
}

// String is "<component>.<name>".
func (s StackOutput) String() string { return s.Component + "." + s.Name }

// Environment supplies vars to every step.
type Environment struct {
	Name string
	Vars map[string]string
}

var namePattern = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)

// MaxProjectBytes is the largest project file LoadProject reads.
const MaxProjectBytes = 1 << 20

// LoadProject reads and checks a project file: a regular file of at most
// MaxProjectBytes. kinds says whether a step kind is known (see
// Registry.Known).
func LoadProject(path string, known func(kind string) bool) (*Project, error) {
	data, err := inputfile.Read(context.Background(), path, MaxProjectBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: project file: %w", ErrInvalid, err)
	}
	return ParseProject(path, data, known)
}

// ParseProject parses the bytes of a project file named path.
func ParseProject(path string, data []byte, known func(kind string) bool) (*Project, error) {
	p := &parser{file: path}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	err := dec.Decode(&doc)
	if errors.Is(err, io.EOF) || err == nil && len(doc.Content) == 0 {
		return nil, fmt.Errorf("%w: %s: the file is empty; it needs components", ErrInvalid, path)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, path, err)
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: %s:%d: the file holds more than one YAML document; write one", ErrInvalid, path, more.Line)
	}
	proj, err := p.project(doc.Content[0])
	if err != nil {
		return nil, err
	}
	if err := p.check(proj, known); err != nil {
		return nil, err
	}
	return proj, nil
}

type parser struct{ file string }

func (p *parser) errorf(n *yaml.Node, field, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if field != "" {
		msg = field + ": " + msg
	}
	return fmt.Errorf("%w: %s:%d:%d: %s", ErrInvalid, p.file, n.Line, n.Column, msg)
}

// fields walks a mapping node, refusing keys not in allowed.
func (p *parser) fields(n *yaml.Node, field string, allowed []string, each func(key string, k, v *yaml.Node) error) error {
	if n.Kind != yaml.MappingNode {
		return p.errorf(n, field, "want a mapping, got %s", kindName(n))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return p.errorf(k, field, "keys must be strings")
		}
		if seen[k.Value] {
			return p.errorf(k, join(field, k.Value), "written twice")
		}
		seen[k.Value] = true
		if allowed != nil && !slices.Contains(allowed, k.Value) {
			return p.errorf(k, join(field, k.Value), "unknown field (allowed: %s)", strings.Join(allowed, ", "))
		}
		if err := each(k.Value, k, v); err != nil {
			return err
		}
	}
	return nil
}

func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	if n.Tag == "!!null" {
		return "nothing"
	}
	return "a " + strings.TrimPrefix(n.Tag, "!!")
}

func (p *parser) str(n *yaml.Node, field string) (string, error) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		return "", p.errorf(n, field, "want a string, got %s", kindName(n))
	}
	return n.Value, nil
}

func (p *parser) name(n *yaml.Node, field string) (string, error) {
	s, err := p.str(n, field)
	if err != nil {
		return "", err
	}
	if !namePattern.MatchString(s) {
		return "", p.errorf(n, field, "%q is not a name: use letters, digits, '.', '_' and '-', starting and ending with a letter or digit", s)
	}
	return s, nil
}

func (p *parser) project(n *yaml.Node) (*Project, error) {
	proj := &Project{File: p.file, Environments: map[string]*Environment{}}
	var sawComponents bool
	err := p.fields(n, "", []string{"components", "environments"}, func(key string, _, v *yaml.Node) error {
		switch key {
		case "components":
			sawComponents = true
			return p.fields(v, "components", nil, func(name string, k, v *yaml.Node) error {
				if _, err := p.name(k, "components"); err != nil {
					return err
				}
				c, err := p.component(name, k, v)
				if err != nil {
					return err
				}
				proj.Components = append(proj.Components, c)
				return nil
			})
		default:
			return p.fields(v, "environments", nil, func(name string, k, v *yaml.Node) error {
				if _, err := p.name(k, "environments"); err != nil {
					return err
				}
				env, err := p.environment(name, v)
				if err != nil {
					return err
				}
				proj.Environments[name] = env
				return nil
			})
		}
	})
	if err != nil {
		return nil, err
	}
	if !sawComponents {
		return nil, p.errorf(n, "components", "missing: the file needs at least one component")
	}
	return proj, nil
}

func (p *parser) component(name string, k, n *yaml.Node) (*Component, error) {
	field := "components." + name
	c := &Component{Name: name, line: k.Line}
	var sawSteps bool
	err := p.fields(n, field, []string{"dependsOn", "steps"}, func(key string, _, v *yaml.Node) error {
		switch key {
		case "dependsOn":
			if v.Kind != yaml.SequenceNode {
				return p.errorf(v, field+".dependsOn", "want a list of component names, got %s", kindName(v))
			}
			for i, d := range v.Content {
				s, err := p.name(d, fmt.Sprintf("%s.dependsOn[%d]", field, i))
				if err != nil {
					return err
				}
				c.declared = append(c.declared, s)
			}
		default:
			sawSteps = true
			if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
				return p.errorf(v, field+".steps", "want a list of at least one step")
			}
			for i, s := range v.Content {
				step, err := p.step(fmt.Sprintf("%s.steps[%d]", field, i), s)
				if err != nil {
					return err
				}
				for _, other := range c.Steps {
					if other.Name == step.Name {
						return p.errorf(s, fmt.Sprintf("%s.steps[%d].name", field, i), "two steps are named %q; give each a name of its own", step.Name)
					}
				}
				c.Steps = append(c.Steps, step)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !sawSteps {
		return nil, p.errorf(k, field+".steps", "missing: a component needs at least one step")
	}
	return c, nil
}

func (p *parser) step(field string, n *yaml.Node) (*Step, error) {
	s := &Step{line: n.Line, Inputs: map[string]any{}}
	err := p.fields(n, field, []string{"kind", "name", "inputs"}, func(key string, _, v *yaml.Node) error {
		var err error
		switch key {
		case "kind":
			s.Kind, err = p.str(v, field+".kind")
		case "name":
			s.Name, err = p.name(v, field+".name")
		default:
			var in any
			in, err = p.value(v, field+".inputs")
			if err == nil {
				m, ok := in.(map[string]any)
				if !ok {
					return p.errorf(v, field+".inputs", "want a mapping, got %s", kindName(v))
				}
				s.Inputs = m
			}
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if s.Kind == "" {
		return nil, p.errorf(n, field+".kind", "missing: every step names its kind")
	}
	if s.Name == "" {
		s.Name = s.Kind
	}
	if s.Kind == ShellKind {
		if run, ok := s.Inputs["run"].(string); !ok || strings.TrimSpace(run) == "" {
			return nil, p.errorf(n, field+".inputs.run", "a shell step needs the command to run, as a string")
		}
		for _, k := range sortedKeys(s.Inputs) {
			if k != "run" && !slices.Contains(boundFields, k) {
				return nil, p.errorf(n, field+".inputs."+k, "unknown input of a shell step (allowed: run, %s)", strings.Join(boundFields, ", "))
			}
		}
	}
	return s, nil
}

// value decodes an inputs node, turning {stackOutput: {...}} into a
// StackOutput.
func (p *parser) value(n *yaml.Node, field string) (any, error) {
	switch n.Kind {
	case yaml.MappingNode:
		if len(n.Content) == 2 && n.Content[0].Value == "stackOutput" {
			return p.stackOutput(n.Content[1], field+".stackOutput")
		}
		m := map[string]any{}
		err := p.fields(n, field, nil, func(key string, _, v *yaml.Node) error {
			if key == "stackOutput" {
				return p.errorf(v, join(field, key), "a stackOutput reference stands alone in its mapping")
			}
			val, err := p.value(v, join(field, key))
			m[key] = val
			return err
		})
		return m, err
	case yaml.SequenceNode:
		list := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			v, err := p.value(c, fmt.Sprintf("%s[%d]", field, i))
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		return list, nil
	case yaml.ScalarNode:
		if (n.Tag == "!!int" || n.Tag == "!!float") && jsonNumber.MatchString(n.Value) {
			// As written: 1.10 stays 1.10, and a big integer keeps
			// every digit (a float64 would keep neither).
			return json.Number(n.Value), nil
		}
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, p.errorf(n, field, "%v", err)
		}
		if f, ok := v.(float64); ok && (math.IsInf(f, 0) || math.IsNaN(f)) {
			return nil, p.errorf(n, field, "%s is no number a deploy tool takes; quote it for a string", n.Value)
		}
		return v, nil
	}
	return nil, p.errorf(n, field, "anchors and aliases are not supported here")
}

// jsonNumber is a number in JSON's grammar, which every deploy tool reads
// as written. Other YAML numbers (0x1F, 0o17, +1, .5) are decoded.
var jsonNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$`)

func (p *parser) stackOutput(n *yaml.Node, field string) (StackOutput, error) {
	var ref StackOutput
	err := p.fields(n, field, []string{"component", "name"}, func(key string, _, v *yaml.Node) error {
		var err error
		if key == "component" {
			ref.Component, err = p.name(v, field+".component")
		} else {
			ref.Name, err = p.str(v, field+".name")
		}
		return err
	})
	if err != nil {
		return ref, err
	}
	if ref.Component == "" || ref.Name == "" {
		return ref, p.errorf(n, field, "needs both component and name")
	}
	return ref, nil
}

func (p *parser) environment(name string, n *yaml.Node) (*Environment, error) {
	field := "environments." + name
	env := &Environment{Name: name, Vars: map[string]string{}}
	err := p.fields(n, field, []string{"vars"}, func(_ string, _, v *yaml.Node) error {
		return p.fields(v, field+".vars", nil, func(key string, k, v *yaml.Node) error {
			if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
				return p.errorf(v, join(field+".vars", key), "want a string, number or boolean, got %s", kindName(v))
			}
			env.Vars[key] = v.Value
			return nil
		})
	})
	return env, err
}

// check resolves names across components: known kinds, dependencies that
// exist, stackOutput references, no cycle.
func (p *parser) check(proj *Project, known func(string) bool) error {
	byName := map[string]*Component{}
	for _, c := range proj.Components {
		byName[c.Name] = c
	}
	for _, c := range proj.Components {
		for i, s := range c.Steps {
			field := fmt.Sprintf("components.%s.steps[%d].kind", c.Name, i)
			if !known(s.Kind) {
				return fmt.Errorf("%w: %s:%d: %s: %q is no step kind captf knows", ErrInvalid, p.file, s.line, field, s.Kind)
			}
		}
		deps := slices.Clone(c.declared)
		for i, d := range c.declared {
			if byName[d] == nil {
				return fmt.Errorf("%w: %s:%d: components.%s.dependsOn[%d]: no component is named %q", ErrInvalid, p.file, c.line, c.Name, i, d)
			}
			if d == c.Name {
				return fmt.Errorf("%w: %s:%d: components.%s.dependsOn[%d]: a component cannot depend on itself", ErrInvalid, p.file, c.line, c.Name, i)
			}
		}
		for i, s := range c.Steps {
			if field, ref, from := buildReference(proj.Components, c, s); field != "" {
				if from == c {
					return fmt.Errorf("%w: %s:%d: components.%s.steps[%d].inputs.%s: %q reads a step of the same component, and captf passes no outputs between the steps of one component; put that step in a component of its own and read its output with stackOutput",
						ErrInvalid, p.file, s.line, c.Name, i, field, ref)
				}
				return fmt.Errorf("%w: %s:%d: components.%s.steps[%d].inputs.%s: %q reads a build output of component %q, which captf cannot resolve and will not deploy as literal text; read an output it deployed with stackOutput",
					ErrInvalid, p.file, s.line, c.Name, i, field, ref, from.Name)
			}
			for _, ref := range references(s.Inputs) {
				field := fmt.Sprintf("components.%s.steps[%d].inputs", c.Name, i)
				if byName[ref.Component] == nil {
					return fmt.Errorf("%w: %s:%d: %s: stackOutput names component %q, which does not exist", ErrInvalid, p.file, s.line, field, ref.Component)
				}
				if ref.Component == c.Name {
					return fmt.Errorf("%w: %s:%d: %s: stackOutput reads its own component %q; a step reads only other components' outputs", ErrInvalid, p.file, s.line, field, c.Name)
				}
				if !slices.Contains(deps, ref.Component) {
					deps = append(deps, ref.Component)
				}
			}
		}
		c.DependsOn = deps
	}
	if cycle := findCycle(proj.Components, byName); cycle != nil {
		return fmt.Errorf("%w: %s: dependsOn: the components depend on each other in a cycle: %s", ErrInvalid, p.file, strings.Join(cycle, " → "))
	}
	return nil
}

func findCycle(comps []*Component, byName map[string]*Component) []string {
	const (
		visiting = 1
		done     = 2
	)
	state := map[string]int{}
	var stack []string
	var visit func(c *Component) []string
	visit = func(c *Component) []string {
		switch state[c.Name] {
		case visiting:
			i := slices.Index(stack, c.Name)
			return append(slices.Clone(stack[i:]), c.Name)
		case done:
			return nil
		}
		state[c.Name] = visiting
		stack = append(stack, c.Name)
		for _, d := range c.DependsOn {
			if cyc := visit(byName[d]); cyc != nil {
				return cyc
			}
		}
		stack = stack[:len(stack)-1]
		state[c.Name] = done
		return nil
	}
	for _, c := range comps {
		if cyc := visit(c); cyc != nil {
			return cyc
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// buildReference finds an input of a planning step of c that reads a
// build output, written "@<step>.<output>" for a step of c or
// "@<component>.<output>" for another component, as a value wired from a
// build is written ("@Build.uri", "@web.publish.uri"). It returns the
// input's path, the value and the component it reads, or "" when there is
// none. Steps without plan may name such values: the composition digest
// leaves them out as build outputs.
func buildReference(comps []*Component, c *Component, s *Step) (field, ref string, from *Component) {
	if !planKinds[s.Kind] {
		return "", "", nil
	}
	reads := func(v string) *Component {
		for _, other := range c.Steps {
			if other != s && strings.HasPrefix(v, "@"+other.Name+".") {
				return c
			}
		}
		for _, other := range comps {
			if other != c && strings.HasPrefix(v, "@"+other.Name+".") {
				return other
			}
		}
		return nil
	}
	var walk func(path string, v any) bool
	walk = func(path string, v any) bool {
		switch t := v.(type) {
		case string:
			if from = reads(t); from != nil {
				field, ref = path, t
				return true
			}
		case map[string]any:
			for _, k := range sortedKeys(t) {
				if walk(join(path, k), t[k]) {
					return true
				}
			}
		case []any:
			for i, e := range t {
				if walk(fmt.Sprintf("%s[%d]", path, i), e) {
					return true
				}
			}
		}
		return false
	}
	walk("", s.Inputs)
	return field, ref, from
}

// references lists every stackOutput reference in v, in a stable order.
func references(v any) []StackOutput {
	var refs []StackOutput
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case StackOutput:
			refs = append(refs, t)
		case map[string]any:
			for _, k := range sortedKeys(t) {
				walk(t[k])
			}
		case []any:
			for _, e := range t {
				walk(e)
			}
		}
	}
	walk(v)
	return refs
}

// Component returns the component named name, or nil.
func (p *Project) Component(name string) *Component {
	for _, c := range p.Components {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Environment returns the environment named name; the empty name is an
// environment with no vars.
func (p *Project) Environment(name string) (*Environment, error) {
	if name == "" {
		return &Environment{Vars: map[string]string{}}, nil
	}
	env := p.Environments[name]
	if env == nil {
		names := sortedKeys(p.Environments)
		has := "it has none"
		if len(names) > 0 {
			has = "it has " + strings.Join(names, ", ")
		}
		return nil, fmt.Errorf("%w: --env %q: %s has no such environment (%s)", ErrInvalid, name, p.File, has)
	}
	return env, nil
}
