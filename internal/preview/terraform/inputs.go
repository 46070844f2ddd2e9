package terraform

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/captf/captf/internal/preview"
	"github.com/captf/captf/internal/tfexec"
)

// inputs are a terraform-apply step's inputs, checked and resolved.
type inputs struct {
	// root is the root module's absolute directory.
	root string
	// bin is the absolute path of terraform or tofu.
	bin string
	// varFiles are absolute paths, in the order given.
	varFiles []string
	// vars are the step's variables, each a JSON value.
	vars map[string]any
	// name is the member's name.
	name string
	// env holds the environment's vars as TF_VAR_<name>=<value>.
	env []string
}

var inputNames = []string{"binary", "name", "root", "varFiles", "vars"}

// readInputs checks a step's inputs. Its errors name the input and what is
// wrong with it, never a value.
func readInputs(req preview.Request) (*inputs, error) {
	for _, k := range slices.Sorted(maps.Keys(req.Inputs)) {
		if !slices.Contains(inputNames, k) {
			return nil, fmt.Errorf("input %q: unknown (want one of %s)", k, strings.Join(inputNames, ", "))
		}
	}
	if req.Root == "" {
		return nil, errors.New("no repository root")
	}
	in := &inputs{}
	root, err := stringInput(req.Inputs, "root")
	if err != nil {
		return nil, err
	}
	if root == "" {
		return nil, errors.New(`input "root": required: the root module's directory, relative to the repository`)
	}
	if in.root, err = preview.InRepository(req.Root, root); err != nil {
		return nil, fmt.Errorf(`input "root": %w`, err)
	}
	if fi, err := os.Stat(in.root); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf(`input "root": %s is not a directory`, root)
	}
	binary, err := stringInput(req.Inputs, "binary")
	if err != nil {
		return nil, err
	}
	if in.bin, err = findBinary(req.Root, binary); err != nil {
		return nil, fmt.Errorf(`input "binary": %w`, err)
	}
	if in.varFiles, err = varFiles(req); err != nil {
		return nil, err
	}
	if in.vars, err = vars(req.Inputs["vars"]); err != nil {
		return nil, err
	}
	if in.name, err = stringInput(req.Inputs, "name"); err != nil {
		return nil, err
	}
	if in.name == "" {
		in.name = filepath.Base(in.root)
	}
	in.env = environmentVars(req.Vars)
	return in, nil
}

// CheckInputs refuses a root or a var file that is not inside the
// repository (root, relative): a pull request names its roots and var
// files there. It runs before anything is planned, so a project file that
// names one outside is bad input rather than a failed member.
func (c *Capability) CheckInputs(root string, inputs map[string]any) error {
	if r, ok := inputs["root"].(string); ok && r != "" {
		if _, err := preview.InRepository(root, r); err != nil {
			return fmt.Errorf(`input "root": %w`, err)
		}
	}
	files, _ := inputs["varFiles"].([]any)
	for i, f := range files {
		if s, ok := f.(string); ok && s != "" {
			if _, err := preview.InRepository(root, s); err != nil {
				return fmt.Errorf(`input "varFiles[%d]": %w`, i, err)
			}
		}
	}
	return nil
}

var _ preview.InputChecker = (*Capability)(nil)

// variableName is what terraform accepts as a variable's name.
var variableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// environmentVars passes the environment's vars to terraform as
// TF_VAR_<name>, the lowest of terraform's precedences: a variable the
// root declares takes the value, one it does not declare is ignored, and
// the step's varFiles and vars win. A var whose name no terraform
// variable can have is left out.
func environmentVars(vars map[string]string) []string {
	var env []string
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		if variableName.MatchString(k) {
			env = append(env, "TF_VAR_"+k+"="+vars[k])
		}
	}
	return env
}

func stringInput(m map[string]any, key string) (string, error) {
	v, ok := m[key]
	if !ok || v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("input %q: want a string, got %s", key, preview.KindOf(v))
	}
	return s, nil
}

// findBinary resolves terraform (the default), tofu, another name on PATH,
// or a path; a relative path is relative to the repository.
func findBinary(root, name string) (string, error) {
	if name == "" {
		name = "terraform"
	}
	if strings.ContainsRune(name, filepath.Separator) && !filepath.IsAbs(name) {
		name = filepath.Join(root, name)
	}
	return tfexec.Find(name)
}

func varFiles(req preview.Request) ([]string, error) {
	v, ok := req.Inputs["varFiles"]
	if !ok || v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		if s, isStrings := v.([]string); isStrings {
			for _, e := range s {
				list = append(list, e)
			}
		} else {
			return nil, fmt.Errorf(`input "varFiles": want a list of paths, got %s`, preview.KindOf(v))
		}
	}
	var out []string
	for i, e := range list {
		s, ok := e.(string)
		if !ok || s == "" {
			return nil, fmt.Errorf(`input "varFiles[%d]": want a path, got %s`, i, preview.KindOf(e))
		}
		p, err := preview.InRepository(req.Root, s)
		if err != nil {
			return nil, fmt.Errorf(`input "varFiles[%d]": %w`, i, err)
		}
		if fi, err := os.Stat(p); err != nil || fi.IsDir() {
			return nil, fmt.Errorf(`input "varFiles[%d]": %s is not a file`, i, s)
		}
		out = append(out, p)
	}
	return out, nil
}

// vars converts the step's vars, as decoded from YAML, into JSON values.
func vars(v any) (map[string]any, error) {
	if v == nil {
		return nil, nil
	}
	m, err := jsonValue(v, "vars")
	if err != nil {
		return nil, err
	}
	obj, ok := m.(map[string]any)
	if !ok {
		return nil, fmt.Errorf(`input "vars": want a map of variable names to values, got %s`, preview.KindOf(v))
	}
	return obj, nil
}

// jsonValue turns a YAML-decoded value into one encoding/json writes: maps
// with keys other than strings are converted or refused. path names where
// in the input the value is, for an error.
func jsonValue(v any, path string) (any, error) {
	switch v := v.(type) {
	case nil, bool, string, json.Number, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64, float32, float64:
		return v, nil
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			c, err := jsonValue(e, path+"."+k)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			ks, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("input %q: a key is %s; want a string", path, preview.KindOf(k))
			}
			c, err := jsonValue(e, path+"."+ks)
			if err != nil {
				return nil, err
			}
			out[ks] = c
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			c, err := jsonValue(e, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	}
	return nil, fmt.Errorf("input %q: a value of type %T has no JSON form", path, v)
}
