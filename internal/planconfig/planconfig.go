// Package planconfig binds the configuration that runs at apply time
// outside the plan: the provisioners (and their connection blocks) of the
// resources a plan creates, replaces or destroys, and the provider
// configurations the plan's changes use. Each such block gets a keyed
// digest of its source text and of what its references to variables and
// locals resolve to, so that an apply can refuse a block that moved since
// the plan was approved, naming the block and never a value.
//
// The plan hash (pkg/fingerprint) does not bind these: terraform's plan
// holds the provisioners' configuration only as references (a template
// "echo ${var.x}" shows as a reference to var.x, its text lost) and leaves
// out their connection blocks and when they run. So the blocks are read
// from the configuration files with hcl, found through the plan's own
// configuration section and the modules manifest init wrote.
package planconfig

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty/convert"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// Block is one block that runs at apply, with its keyed digest. It holds
// no value.
type Block struct {
	// Address is the resource instance address, or the provider
	// configuration address (module.x.provider["registry.terraform.io/hashicorp/aws"].west).
	Address string `json:"address"`
	// Block names the block: `provisioner "local-exec" #0`, `connection`,
	// `provider "aws"`, `removed provisioner "local-exec" #0`.
	Block string `json:"block"`
	// Digest is the hex HMAC-SHA256, under the plan key, of the block's
	// source and of what its references resolve to.
	Digest string `json:"digest"`
}

// Change is one resource change of the plan: its instance address and
// its actions.
type Change struct {
	Address string
	Actions []string
	// Provider is the address of the provider configuration the change
	// was planned with, as the saved plan file records it
	// (module.a.provider["registry.terraform.io/hashicorp/aws"].west),
	// when the plan's configuration section is not at hand.
	Provider string
}

// Input is what Bind reads besides the configuration files.
type Input struct {
	// Root is the root module's directory; DataDir terraform's data
	// directory (TF_DATA_DIR, default Root/.terraform).
	Root, DataDir string
	// Changes are the plan's resource changes; no-op changes bind nothing.
	Changes []Change
	// Variables is the plan's "variables" section: the root module's
	// variable values.
	Variables json.RawMessage
	// Configuration is the plan's "configuration" section.
	Configuration json.RawMessage
}

// Bind returns the blocks that an apply of the plan runs outside it, each
// with its digest under key, sorted by address and block.
func Bind(key []byte, in Input) ([]Block, error) {
	var cfg configuration
	if len(in.Configuration) > 0 {
		if err := json.Unmarshal(in.Configuration, &cfg); err != nil {
			return nil, fmt.Errorf("plan configuration: %w", err)
		}
	}
	vars := map[string]json.RawMessage{}
	if len(in.Variables) > 0 {
		var raw map[string]struct {
			Value json.RawMessage `json:"value"`
		}
		if err := json.Unmarshal(in.Variables, &raw); err != nil {
			return nil, fmt.Errorf("plan variables: %w", err)
		}
		for name, v := range raw {
			vars[name] = v.Value
		}
	}
	b := &binder{key: key, mods: newModules(in.Root, in.DataDir), cfg: &cfg, vars: vars, out: map[[2]string]string{}, digests: map[*hclsyntax.Block]string{}}
	for _, c := range in.Changes {
		if err := b.change(c); err != nil {
			return nil, err
		}
	}
	blocks := make([]Block, 0, len(b.out))
	for k, d := range b.out {
		blocks = append(blocks, Block{Address: k[0], Block: k[1], Digest: d})
	}
	slices.SortFunc(blocks, func(x, y Block) int {
		if c := strings.Compare(x.Address, y.Address); c != 0 {
			return c
		}
		return strings.Compare(x.Block, y.Block)
	})
	return blocks, nil
}

// configuration is the part of the plan's configuration section Bind
// reads.
type configuration struct {
	ProviderConfig map[string]struct {
		Name          string `json:"name"`
		FullName      string `json:"full_name"`
		Alias         string `json:"alias"`
		ModuleAddress string `json:"module_address"`
	} `json:"provider_config"`
	RootModule configModule `json:"root_module"`
}

type configModule struct {
	Resources []struct {
		Mode              string `json:"mode"`
		Type              string `json:"type"`
		Name              string `json:"name"`
		ProviderConfigKey string `json:"provider_config_key"`
	} `json:"resources"`
	ModuleCalls map[string]struct {
		Module configModule `json:"module"`
	} `json:"module_calls"`
}

// providerKey is the provider_config_key of a resource of the
// configuration, or "" when the configuration has no such resource.
func (c *configuration) providerKey(a resourceAddr) string {
	m := &c.RootModule
	if a.module != "" {
		for _, name := range strings.Split(a.module, ".") {
			call, ok := m.ModuleCalls[name]
			if !ok {
				return ""
			}
			m = &call.Module
		}
	}
	for _, r := range m.Resources {
		if r.Mode == a.mode && r.Type == a.typ && r.Name == a.name {
			return r.ProviderConfigKey
		}
	}
	return ""
}

type binder struct {
	key  []byte
	mods *modules
	cfg  *configuration
	vars map[string]json.RawMessage
	// out maps address and block name to the digest.
	out map[[2]string]string
	// digests are the blocks' digests, which do not depend on the
	// address: every instance of a resource shares its block's.
	digests map[*hclsyntax.Block]string
}

func (b *binder) change(c Change) error {
	create := slices.Contains(c.Actions, "create")
	destroy := slices.Contains(c.Actions, "delete")
	if len(c.Actions) == 0 || (len(c.Actions) == 1 && c.Actions[0] == "no-op") {
		return nil
	}
	a, err := parseAddress(c.Address)
	if err != nil {
		return err
	}
	if c.Provider != "" {
		err = b.providerAt(c.Provider)
	} else {
		err = b.provider(a)
	}
	if err != nil {
		return err
	}
	if !create && !destroy {
		return nil
	}
	m, err := b.mods.get(a.module)
	if err != nil {
		return err
	}
	blocks := m.resources[a.key()]
	if len(m.jsonFiles) > 0 {
		// Configuration in JSON syntax is not parsed: bind it whole for
		// every instance that may run a provisioner.
		d, err := b.digest(m, "json", nil, nil)
		if err != nil {
			return err
		}
		b.out[[2]string{c.Address, "configuration in JSON files"}] = d
	}
	if len(blocks) == 0 && destroy {
		// A resource whose block is gone may still run the destroy-time
		// provisioners of a removed block naming it.
		for _, r := range m.removed {
			if from := r.Body.Attributes["from"]; from != nil && compact(m.source(from.Expr.Range())) == a.typ+"."+a.name {
				if err := b.provisioners(m, c.Address, "removed ", r, false, true); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, r := range blocks {
		prefix := ""
		if IsOverride(r.Range().Filename) {
			prefix = r.Range().Filename + ": "
		}
		if err := b.provisioners(m, c.Address, prefix, r, create, destroy); err != nil {
			return err
		}
	}
	return nil
}

// provisioners binds the provisioners of a resource (or removed) block
// that run for a create or a destroy, and its connection block when one
// of them runs.
func (b *binder) provisioners(m *module, address, prefix string, r *hclsyntax.Block, create, destroy bool) error {
	runs := false
	i := 0
	for _, p := range r.Body.Blocks {
		if p.Type != "provisioner" || len(p.Labels) != 1 {
			continue
		}
		n := i
		i++
		atDestroy := false
		if w := p.Body.Attributes["when"]; w != nil {
			atDestroy = compact(m.source(w.Expr.Range())) == "destroy"
		}
		if atDestroy && !destroy || !atDestroy && !create {
			continue
		}
		runs = true
		if err := b.bind(m, address, fmt.Sprintf("%sprovisioner %q #%d", prefix, p.Labels[0], n), p); err != nil {
			return err
		}
	}
	if !runs {
		return nil
	}
	for _, c := range r.Body.Blocks {
		if c.Type == "connection" {
			if err := b.bind(m, address, prefix+"connection", c); err != nil {
				return err
			}
		}
	}
	return nil
}

// provider binds the provider configuration a resource's change uses.
// Where the configuration no longer has the resource (it is destroyed
// because its block is gone), every configuration of the provider its
// type implies is bound.
func (b *binder) provider(a resourceAddr) error {
	keys := []string{b.cfg.providerKey(a)}
	if keys[0] == "" {
		keys = keys[:0]
		implied, _, _ := strings.Cut(a.typ, "_")
		for k, pc := range b.cfg.ProviderConfig {
			if pc.Name == implied {
				keys = append(keys, k)
			}
		}
	}
	for _, k := range keys {
		pc, ok := b.cfg.ProviderConfig[k]
		if !ok {
			continue
		}
		m, err := b.module(pc.ModuleAddress)
		if err != nil {
			return err
		}
		alias := ""
		if pc.Alias != "" {
			alias = "." + pc.Alias
		}
		address := fmt.Sprintf("provider[%q]", pc.FullName)
		if pc.ModuleAddress != "" {
			address = pc.ModuleAddress + "." + address
		}
		if err := b.providerBlocks(m, address+alias, pc.Name, alias); err != nil {
			return err
		}
	}
	return nil
}

// providerAt binds the provider configuration at addr, an absolute
// provider configuration address.
func (b *binder) providerAt(addr string) error {
	mod, rest, ok := strings.Cut(addr, `provider["`)
	fqn, alias, ok2 := strings.Cut(rest, `"]`)
	if !ok || !ok2 || fqn == "" || (alias != "" && !strings.HasPrefix(alias, ".")) {
		return fmt.Errorf("provider configuration address %q", addr)
	}
	m, err := b.module(strings.TrimSuffix(mod, "."))
	if err != nil {
		return err
	}
	return b.providerBlocks(m, addr, m.localName(fqn), alias)
}

// module is the module at a module address (module.a.module.b, or "" for
// the root).
func (b *binder) module(addr string) (*module, error) {
	mk, err := moduleKey(addr)
	if err != nil {
		return nil, err
	}
	return b.mods.get(mk)
}

// providerBlocks binds, under the provider configuration address, the
// provider blocks of m with the local name and alias (".west", or "").
func (b *binder) providerBlocks(m *module, address, local, alias string) error {
	for i, p := range m.providers[local+alias] {
		block := fmt.Sprintf("provider %q", local)
		if i > 0 {
			block = fmt.Sprintf("%s (%s)", block, p.Range().Filename)
		}
		if err := b.bind(m, address, block, p); err != nil {
			return err
		}
	}
	return nil
}

func (b *binder) bind(m *module, address, name string, blk *hclsyntax.Block) error {
	if _, done := b.out[[2]string{address, name}]; done {
		return nil
	}
	d, ok := b.digests[blk]
	if !ok {
		var err error
		if d, err = b.digest(m, "block", m.source(blk.Range()), blk.Body); err != nil {
			return fmt.Errorf("%s %s: %w", address, name, err)
		}
		b.digests[blk] = d
	}
	b.out[[2]string{address, name}] = d
	return nil
}

// bound is what a digest covers: the block's source, what its references
// resolve to, and the module's JSON configuration files.
type bound struct {
	Kind   string            `json:"kind"`
	Source string            `json:"source,omitempty"`
	Refs   map[string]string `json:"refs,omitempty"`
	JSON   map[string]string `json:"json,omitempty"`
}

func (b *binder) digest(m *module, kind string, src []byte, body *hclsyntax.Body) (string, error) {
	v := bound{Kind: kind, Source: string(src), Refs: map[string]string{}}
	if body != nil {
		r := resolver{b: b, out: v.Refs}
		if err := r.body(m, body); err != nil {
			return "", err
		}
	}
	if len(m.jsonFiles) > 0 {
		v.JSON = map[string]string{}
		for _, f := range m.jsonFiles {
			v.JSON[f] = string(m.src[f])
		}
	}
	text, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	mac := hmac.New(sha256.New, b.key)
	mac.Write(text)
	return hex.EncodeToString(mac.Sum(nil)), nil
}

// resolver follows the references of a block to variables and locals,
// recording what each resolves to: a root variable's value, the source
// of a local's expression, of a module call's argument, or of a
// variable's declaration (its default). References to resources, data
// sources, self, count, each and path are not followed: their values are
// the plan's (bound by the plan hash where they change) or the instance's.
type resolver struct {
	b   *binder
	out map[string]string
}

func (r *resolver) body(m *module, body *hclsyntax.Body) error {
	for _, name := range slices.Sorted(maps.Keys(body.Attributes)) {
		if err := r.expr(m, body.Attributes[name].Expr); err != nil {
			return err
		}
	}
	for _, blk := range body.Blocks {
		if err := r.body(m, blk.Body); err != nil {
			return err
		}
	}
	return nil
}

func (r *resolver) expr(m *module, e hclsyntax.Expression) error {
	for _, t := range e.Variables() {
		if err := r.traversal(m, t); err != nil {
			return err
		}
	}
	return nil
}

func (r *resolver) traversal(m *module, t hcl.Traversal) error {
	if len(t) < 2 {
		return nil
	}
	attr, ok := t[1].(hcl.TraverseAttr)
	if !ok {
		return nil
	}
	ref := t.RootName() + "." + attr.Name
	id := "module." + m.key + " " + ref
	if _, seen := r.out[id]; seen {
		return nil
	}
	switch t.RootName() {
	case "var":
		if m.key == "" {
			v, ok := r.b.vars[attr.Name]
			if !ok {
				// A saved plan file records only the variables set;
				// show -json adds the defaults, as here.
				if v, ok = defaultValue(m.variables[attr.Name]); !ok {
					r.out[id] = "absent"
					return nil
				}
			}
			var c bytes.Buffer
			if err := json.Compact(&c, v); err != nil {
				return fmt.Errorf("variable %s: %w", attr.Name, err)
			}
			r.out[id] = "value " + c.String()
			return nil
		}
		parentKey, call := "", m.key
		if i := strings.LastIndexByte(m.key, '.'); i >= 0 {
			parentKey, call = m.key[:i], m.key[i+1:]
		}
		parent, err := r.b.mods.get(parentKey)
		if err != nil {
			return err
		}
		if blk := parent.calls[call]; blk != nil {
			if a := blk.Body.Attributes[attr.Name]; a != nil {
				r.out[id] = "argument " + string(parent.source(a.Expr.Range()))
				return r.expr(parent, a.Expr)
			}
		}
		if v := m.variables[attr.Name]; v != nil {
			r.out[id] = "declaration " + string(m.source(v.Range()))
			return r.body(m, v.Body)
		}
		r.out[id] = "absent"
	case "local":
		a := m.locals[attr.Name]
		if a == nil {
			r.out[id] = "absent"
			return nil
		}
		r.out[id] = "local " + string(m.source(a.Expr.Range()))
		return r.expr(m, a.Expr)
	}
	return nil
}

// compact is a short expression's source without spaces.
func compact(b []byte) string {
	return strings.Join(strings.Fields(string(b)), "")
}

// defaultValue is the JSON of a variable's default converted to its type,
// as show -json writes a variable that was not set; ok is false when the
// variable is not declared, has no default, or one that does not convert.
func defaultValue(blk *hclsyntax.Block) (json.RawMessage, bool) {
	if blk == nil {
		return nil, false
	}
	d := blk.Body.Attributes["default"]
	if d == nil {
		return nil, false
	}
	v, diags := d.Expr.Value(nil)
	if diags.HasErrors() {
		return nil, false
	}
	if t := blk.Body.Attributes["type"]; t != nil {
		ty, defaults, diags := typeexpr.TypeConstraintWithDefaults(t.Expr)
		if diags.HasErrors() {
			return nil, false
		}
		if defaults != nil {
			v = defaults.Apply(v)
		}
		var err error
		if v, err = convert.Convert(v, ty); err != nil {
			return nil, false
		}
	}
	js, err := ctyjson.Marshal(v, v.Type())
	if err != nil {
		return nil, false
	}
	return js, true
}
