package cfn

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/captf/captf/internal/preview"
)

// Values of the onReplace input.
const (
	onReplaceBlock = "block"
	onReplaceAllow = "allow"
)

// inputs are the step's inputs, checked.
type inputs struct {
	// Template is the template's path relative to the repository root,
	// cleaned and with forward slashes.
	Template     string
	Stack        string
	Parameters   map[string]string
	OnReplace    string
	Region       string
	Endpoint     string
	Capabilities []string
}

// CheckInputs refuses a template outside the repository (absolute, with
// "..", or through a symbolic link) before anything is planned, so the
// project file is bad input (exit 2) as for a terraform root, rather than a
// failed member. The rest of the inputs are checked when the step plans.
func (d *Deploy) CheckInputs(root string, inputs map[string]any) error {
	if t, ok := inputs["template"].(string); ok && t != "" {
		if _, err := preview.InRepository(root, t); err != nil {
			return fmt.Errorf("input template: %w", err)
		}
	}
	return nil
}

var _ preview.InputChecker = (*Deploy)(nil)

// parseInputs checks the step's inputs. Errors name the input and what is
// wrong with it, never its value.
func parseInputs(component string, raw map[string]any) (inputs, error) {
	in := inputs{Stack: component, OnReplace: onReplaceBlock, Parameters: map[string]string{}}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := raw[k]
		var err error
		switch k {
		case "template":
			in.Template, err = text(v)
		case "stack":
			in.Stack, err = text(v)
		case "onReplace":
			in.OnReplace, err = text(v)
			if err == nil && in.OnReplace != onReplaceBlock && in.OnReplace != onReplaceAllow {
				err = fmt.Errorf("must be %q or %q", onReplaceBlock, onReplaceAllow)
			}
		case "region":
			in.Region, err = text(v)
		case "endpoint":
			in.Endpoint, err = text(v)
		case "capabilities":
			in.Capabilities, err = textList(v)
		case "parameters":
			err = parseParameters(v, in.Parameters)
		default:
			err = fmt.Errorf("unknown input (known: template, stack, parameters, onReplace, region, endpoint, capabilities)")
		}
		if err != nil {
			return inputs{}, fmt.Errorf("input %s: %w", k, err)
		}
	}
	if in.Template == "" {
		return inputs{}, fmt.Errorf("input template: missing")
	}
	clean := filepath.ToSlash(filepath.Clean(filepath.FromSlash(in.Template)))
	if filepath.IsAbs(in.Template) || clean == ".." || strings.HasPrefix(clean, "../") {
		return inputs{}, fmt.Errorf("input template: %q is not a path inside the repository", in.Template)
	}
	in.Template = clean
	if in.Stack == "" {
		return inputs{}, fmt.Errorf("input stack: empty, and the step has no component to name the stack after")
	}
	if _, given := raw["stack"]; !given && !validStackName(in.Stack) {
		return inputs{}, fmt.Errorf("input stack: not set, and the component's name %q is not a CloudFormation stack name (a letter, then letters, digits and hyphens, at most 128)", in.Stack)
	}
	if !validStackName(in.Stack) {
		return inputs{}, fmt.Errorf("input stack: %q is not a CloudFormation stack name (a letter, then letters, digits and hyphens, at most 128)", in.Stack)
	}
	return in, nil
}

func parseParameters(v any, out map[string]string) error {
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("must be a map of parameter names to values, not %s", preview.KindOf(v))
	}
	for name, pv := range m {
		s, err := parameterValue(pv)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		out[name] = s
	}
	return nil
}

// parameterValue turns an input value into the string CloudFormation takes:
// strings as they are, numbers as written, booleans as true/false, and a
// list of those joined by commas (for CommaDelimitedList and List<…>).
func parameterValue(v any) (string, error) {
	if list, ok := v.([]any); ok {
		parts := make([]string, len(list))
		for i, e := range list {
			s, err := scalar(e)
			if err != nil {
				return "", fmt.Errorf("item %d: %w", i, err)
			}
			parts[i] = s
		}
		return strings.Join(parts, ","), nil
	}
	return scalar(v)
}

func scalar(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case int:
		return strconv.Itoa(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case uint64:
		return strconv.FormatUint(x, 10), nil
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return "", fmt.Errorf("not a finite number")
		}
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	case json.Number:
		return x.String(), nil
	case json.RawMessage:
		// An upstream output resolved into the inputs.
		var decoded any
		dec := json.NewDecoder(strings.NewReader(string(x)))
		dec.UseNumber()
		if err := dec.Decode(&decoded); err != nil {
			return "", fmt.Errorf("not valid JSON")
		}
		if _, nested := decoded.(json.RawMessage); nested {
			return "", fmt.Errorf("not a scalar")
		}
		return parameterValue(decoded)
	case nil:
		return "", fmt.Errorf("null (leave the parameter out to use its Default)")
	default:
		return "", fmt.Errorf("%s, not a string, number, boolean or list of them", preview.KindOf(v))
	}
}

func text(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("must be a string, not %s", preview.KindOf(v))
	}
	return s, nil
}

func textList(v any) ([]string, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("must be a list of strings, not %s", preview.KindOf(v))
	}
	out := make([]string, len(list))
	for i, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf("item %d: must be a string, not %s", i, preview.KindOf(e))
		}
		out[i] = s
	}
	return out, nil
}

func validStackName(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && (r >= '0' && r <= '9' || r == '-'):
		default:
			return false
		}
	}
	return true
}
