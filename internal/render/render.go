// Package render makes the root module a runner Job runs (spec 004's
// main.tf.json and terraform.tfvars.json) and the keyed inputs hash (h2:)
// over what a run depends on. It is pure: no client, no exec.
//
// The rendered root module calls the image's module as ./module (the
// runner links it there), declares every variable (sensitive when its
// value came from a Secret), keeps state in the built-in kubernetes backend
// (a Secret in the object's namespace; the Job's environment says how to
// reach the API server), and records the inputs hash as the output
// captf_inputs_hash, so that the state says what was last applied.
package render

import (
	"bytes"
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// HashPrefix starts every inputs hash.
const HashPrefix = "h2:"

// HashOutput is the root output that records the inputs hash in state.
const HashOutput = "captf_inputs_hash"

// ApprovalOutput is the root output that records the approval hash, in a
// root whose approval hash is not its inputs hash: what a runner Job's
// --allow-deletes-hash is checked against.
const ApprovalOutput = "captf_approval_hash"

// ReplacedOutput is the root output that records, in a root that asks
// for members to be replaced (Request.Replace), the objects that asked:
// the state of the apply that replaced them says so.
const ReplacedOutput = "captf_replaced"

// Replacement is a pool's member whose resource a run replaces: its
// provider ID, which the runner finds in the state's member_addresses
// output, and the object that asked (a member object's UID), which the
// root records (ReplacedOutput).
type Replacement struct {
	ProviderID string `json:"providerID"`
	Object     string `json:"object"`
}

// Variable is one input variable's value.
type Variable struct {
	// Value is its JSON.
	Value json.RawMessage
	// Sensitive marks a value from a Secret: terraform then hides it in the
	// plan it prints.
	Sensitive bool
	// KeepApplied asks the caller, which knows what the last successful
	// apply ran, to render that apply's value rather than this one while
	// it is set (a pool's replicas while an autoscaler owns them, which
	// then reach the module only as approved). Render takes Value as it
	// is given.
	KeepApplied bool
	// Unapproved leaves the value out of the approval hash only: a change
	// of it alone is applied without a new approval (a pool's bootstrap
	// data, which rotates). Its name is hashed.
	Unapproved bool
}

// Request is what a root module is rendered from.
type Request struct {
	// StateSuffix names the state Secret: tfstate-default-<StateSuffix>.
	StateSuffix string
	// Namespace holds the state Secret.
	Namespace string
	// Variables by name.
	Variables map[string]Variable
	// Image and Identity are bound by the inputs hash.
	Image, Identity string
	// Replace are members whose resources the run replaces, bound by the
	// inputs hash (and the approval hash) when there are any.
	Replace []Replacement
}

// Root is a rendered root module and its variables.
type Root struct {
	MainTF []byte // main.tf.json
	Vars   []byte // terraform.tfvars.json
	// InputsHash is the h2: hash recorded in the root's output.
	InputsHash string
	// ApprovalHash is the inputs hash without the values of Unapproved
	// variables: what an approval binds across changes of those. It is
	// InputsHash when there are none.
	ApprovalHash string
	// Unapproved names the variables whose values ApprovalHash leaves
	// out, sorted; none when it is InputsHash.
	Unapproved []string
	// Replace are the provider IDs of the members whose resources the
	// run replaces, sorted: the Job's --replace-member.
	Replace []string
}

var namePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// ErrBadVariable is returned for a variable that cannot be rendered.
var ErrBadVariable = errors.New("bad variable")

// Render renders the root module for req, keyed with key (at least 32
// bytes) for the inputs hash.
func Render(key []byte, req Request) (*Root, error) {
	if len(key) < 32 {
		return nil, fmt.Errorf("inputs key of %d bytes: at least 32 are needed", len(key))
	}
	names := make([]string, 0, len(req.Variables))
	for n := range req.Variables {
		names = append(names, n)
	}
	slices.Sort(names)
	vars := map[string]any{}
	decls := map[string]any{}
	call := map[string]any{"source": "./module"}
	for _, n := range names {
		v := req.Variables[n]
		if !namePattern.MatchString(n) || n == "source" || n == "version" || n == "providers" || n == "count" || n == "for_each" || n == "depends_on" {
			return nil, fmt.Errorf("%w: %q is not a variable name a module can take", ErrBadVariable, n)
		}
		val, err := canonical(v.Value)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: the value is not JSON", ErrBadVariable, n)
		}
		vars[n] = val
		decl := map[string]any{}
		if v.Sensitive {
			decl["sensitive"] = true
		}
		decls[n] = decl
		call[n] = "${var." + n + "}"
	}
	root := map[string]any{
		"terraform": backend(req.Namespace, req.StateSuffix),
		"module":    map[string]any{"main": call},
	}
	if len(decls) > 0 {
		root["variable"] = decls
	}
	varsJSON, err := marshal(vars)
	if err != nil {
		return nil, err
	}
	// The hash covers the root without its own output, the variables, the
	// image as written and the identity.
	unhashed, err := marshal(root)
	if err != nil {
		return nil, err
	}
	hash, err := inputsHash(key, unhashed, vars, req, func(Variable) bool { return false })
	if err != nil {
		return nil, err
	}
	approval := hash
	var unapproved []string
	for _, n := range names {
		if req.Variables[n].Unapproved {
			unapproved = append(unapproved, n)
		}
	}
	if len(unapproved) > 0 {
		approval, err = inputsHash(key, unhashed, vars, req, func(v Variable) bool { return v.Unapproved })
		if err != nil {
			return nil, err
		}
	}
	outputs := map[string]any{HashOutput: map[string]any{"value": hash}}
	if approval != hash {
		outputs[ApprovalOutput] = map[string]any{"value": approval}
	}
	replace, objects := replacements(req.Replace)
	if len(objects) > 0 {
		outputs[ReplacedOutput] = map[string]any{"value": objects}
	}
	root["output"] = outputs
	mainTF, err := marshal(root)
	if err != nil {
		return nil, err
	}
	return &Root{MainTF: mainTF, Vars: varsJSON, InputsHash: hash, ApprovalHash: approval, Unapproved: unapproved, Replace: replace}, nil
}

// replacements are the sorted, distinct provider IDs and objects of rs.
func replacements(rs []Replacement) (ids, objects []string) {
	for _, r := range rs {
		ids = append(ids, r.ProviderID)
		objects = append(objects, r.Object)
	}
	slices.Sort(ids)
	slices.Sort(objects)
	return slices.Compact(ids), slices.Compact(objects)
}

// inputsHash is the h2: hash of a root (without its output) and its
// variables, but the values of those left out, whose names are hashed
// instead, and req's image and identity. With none left out it is the
// hash of every release before values could be left out.
func inputsHash(key, root []byte, vars map[string]any, req Request, leftOut func(Variable) bool) (string, error) {
	hashed := make(map[string]any, len(vars))
	var out []string
	for n, v := range vars {
		if leftOut(req.Variables[n]) {
			out = append(out, n)
			continue
		}
		hashed[n] = v
	}
	varsJSON, err := marshal(hashed)
	if err != nil {
		return "", err
	}
	parts := [][]byte{[]byte("captf inputs h2"), root, varsJSON, []byte(req.Image), []byte(req.Identity)}
	if len(out) > 0 {
		slices.Sort(out)
		names, err := marshal(out)
		if err != nil {
			return "", err
		}
		parts = append(parts, names)
	}
	if len(req.Replace) > 0 {
		// After the names left out, marked, so that no root without
		// replacements hashes as one with them.
		rs := slices.Clone(req.Replace)
		slices.SortFunc(rs, func(a, b Replacement) int {
			return cmp.Or(strings.Compare(a.ProviderID, b.ProviderID), strings.Compare(a.Object, b.Object))
		})
		replace, err := marshal(rs)
		if err != nil {
			return "", err
		}
		parts = append(parts, []byte("replace"), replace)
	}
	mac := hmac.New(sha256.New, key)
	for _, part := range parts {
		// Length-prefix each part so no two splits of the same bytes agree.
		fmt.Fprintf(mac, "%d:", len(part))
		mac.Write(part)
	}
	return HashPrefix + hex.EncodeToString(mac.Sum(nil)), nil
}

// canonical decodes JSON keeping numbers as written, so that re-encoding
// sorts object keys and drops whitespace but changes no value.
func canonical(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data")
	}
	return v, nil
}

func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// BackendRoot renders the root module of a restore Job: the kubernetes
// backend block of Render for the state of suffix in namespace, and
// nothing else, so that terraform can init and push a state into it.
func BackendRoot(namespace, suffix string) ([]byte, error) {
	return marshal(map[string]any{"terraform": backend(namespace, suffix)})
}

// backend is the terraform block that keeps the state in the Secret
// tfstate-default-<suffix> of namespace; the Job's environment says how to
// reach the API server.
func backend(namespace, suffix string) map[string]any {
	return map[string]any{"backend": map[string]any{"kubernetes": map[string]any{
		"secret_suffix": suffix,
		"namespace":     namespace,
	}}}
}
