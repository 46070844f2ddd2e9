package kubectl

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/captf/captf/internal/preview"
	"github.com/captf/captf/internal/preview/fieldpath"
)

// Delete modes of the delete input.
const (
	DeleteNever     = "never"
	DeleteOwnedOnly = "owned-only"
)

// config is a step's inputs, checked.
type config struct {
	Manifest   string
	Stack      string
	Kubeconfig string
	Context    string
	Namespace  string
	Delete     string
	Outputs    map[string]outputRef
}

// outputRef names one field of one object the manifest declares.
type outputRef struct {
	Object string // Kind/namespace/name or Kind/name
	Kind   string
	Field  path
	// FieldText is the field path as written.
	FieldText string
}

// CheckInputs refuses a manifest outside the repository (absolute, with
// "..", or through a symbolic link) before anything is planned, so the
// project file is bad input (exit 2) as for a terraform root, rather than a
// failed member. The rest of the inputs are checked when the step plans.
func (Capability) CheckInputs(root string, inputs map[string]any) error {
	if m, ok := inputs["manifest"].(string); ok && m != "" {
		if _, err := preview.InRepository(root, m); err != nil {
			return fmt.Errorf("inputs: manifest: %w", err)
		}
	}
	return nil
}

var _ preview.InputChecker = Capability{}

var knownInputs = []string{"manifest", "stack", "kubeconfig", "context", "namespace", "delete", "outputs"}

// parseInputs checks the step's inputs. Errors name the input and what is
// wrong, never its value.
func parseInputs(component string, in map[string]any) (config, error) {
	cfg := config{Stack: component, Delete: DeleteNever}
	keys := make([]string, 0, len(in))
	for k := range in {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !slices.Contains(knownInputs, k) {
			return config{}, fmt.Errorf("inputs: unknown input %q (known: %s)", k, strings.Join(knownInputs, ", "))
		}
	}
	str := func(name string, dst *string) error {
		v, ok := in[name]
		if !ok || v == nil {
			return nil
		}
		s, ok := v.(string)
		if !ok {
			return fmt.Errorf("inputs: %s must be a string, not %T", name, v)
		}
		*dst = s
		return nil
	}
	for name, dst := range map[string]*string{
		"manifest": &cfg.Manifest, "stack": &cfg.Stack, "kubeconfig": &cfg.Kubeconfig,
		"context": &cfg.Context, "namespace": &cfg.Namespace, "delete": &cfg.Delete,
	} {
		if err := str(name, dst); err != nil {
			return config{}, err
		}
	}
	if cfg.Manifest == "" {
		return config{}, fmt.Errorf("inputs: manifest is required (a file or directory of YAML, relative to the repository root)")
	}
	if cfg.Stack == "" {
		return config{}, fmt.Errorf("inputs: stack is empty and the step has no component to default to")
	}
	// The stack is a label value and part of the field manager's name.
	if errs := validation.IsValidLabelValue(cfg.Stack); len(errs) > 0 {
		return config{}, fmt.Errorf("inputs: stack %q is not a valid label value: %s", cfg.Stack, strings.Join(errs, "; "))
	}
	if cfg.Delete != DeleteNever && cfg.Delete != DeleteOwnedOnly {
		return config{}, fmt.Errorf("inputs: delete must be %q or %q, not %q", DeleteNever, DeleteOwnedOnly, cfg.Delete)
	}
	if cfg.Namespace != "" {
		if errs := validation.IsDNS1123Label(cfg.Namespace); len(errs) > 0 {
			return config{}, fmt.Errorf("inputs: namespace %q is not a valid namespace name: %s", cfg.Namespace, strings.Join(errs, "; "))
		}
	}
	outs, err := parseOutputs(in["outputs"])
	if err != nil {
		return config{}, err
	}
	cfg.Outputs = outs
	return cfg, nil
}

// parseOutputs reads {name: {object: "Kind/namespace/name", field: "a.b.0"}}.
func parseOutputs(v any) (map[string]outputRef, error) {
	if v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("inputs: outputs must be a map of name to {object, field}, not %T", v)
	}
	out := make(map[string]outputRef, len(m))
	for name, raw := range m {
		spec, ok := raw.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("inputs: outputs.%s must be a map with object and field, not %T", name, raw)
		}
		for k := range spec {
			if k != "object" && k != "field" {
				return nil, fmt.Errorf("inputs: outputs.%s: unknown key %q (known: object, field)", name, k)
			}
		}
		object, _ := spec["object"].(string)
		field, _ := spec["field"].(string)
		if object == "" || field == "" {
			return nil, fmt.Errorf("inputs: outputs.%s needs object (Kind/namespace/name) and field (e.g. status.loadBalancer.ingress.0.hostname) as strings", name)
		}
		parts := strings.Split(object, "/")
		if len(parts) < 2 || len(parts) > 3 || slices.Contains(parts, "") {
			return nil, fmt.Errorf("inputs: outputs.%s.object %q must be Kind/namespace/name, or Kind/name for a cluster-scoped object", name, object)
		}
		p, err := fieldpath.Parse(field)
		if err != nil {
			return nil, fmt.Errorf("inputs: outputs.%s.field: %w", name, err)
		}
		ref := objectRef{Kind: parts[0]}
		if ref.Kind == "Secret" && ref.sensitive(p) {
			return nil, fmt.Errorf("inputs: outputs.%s.field %s of a Secret is sensitive and cannot be an output", name, field)
		}
		out[name] = outputRef{Object: object, Kind: parts[0], Field: p, FieldText: field}
	}
	return out, nil
}
