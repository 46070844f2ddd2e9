package planconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// module is the configuration of one module directory, parsed.
type module struct {
	key string // "" for the root, "a.b" for module.a.module.b
	// src holds each file's bytes by file name.
	src       map[string][]byte
	resources map[string][]*hclsyntax.Block // by "managed.type.name"
	removed   []*hclsyntax.Block
	providers map[string][]*hclsyntax.Block // by "name" or "name.alias"
	locals    map[string]*hclsyntax.Attribute
	variables map[string]*hclsyntax.Block
	calls     map[string]*hclsyntax.Block
	// required maps a provider's source address, as written in
	// required_providers, to the module's local name for it.
	required map[string]string
	// jsonFiles are the module's .tf.json (and .tofu.json) files, which
	// are not parsed: every digest in the module binds them whole.
	jsonFiles []string
}

// IsOverride says whether a file is an override file, merged into the
// blocks of the others.
func IsOverride(name string) bool {
	base := strings.TrimSuffix(strings.TrimSuffix(name, ".json"), filepath.Ext(strings.TrimSuffix(name, ".json")))
	return base == "override" || strings.HasSuffix(base, "_override")
}

// ConfigFiles lists the configuration files of dir as terraform and tofu
// read them: .tf and .tf.json, and tofu's .tofu and .tofu.json, which
// replace a .tf file of the same base name. Terraform ignores .tofu
// files; binding them as well only binds more. Primary files come first,
// then override files, each group sorted.
func ConfigFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, e := range entries {
		if !e.IsDir() {
			names[e.Name()] = true
		}
	}
	var primary, override []string
	for name := range names {
		var ok bool
		switch {
		case strings.HasSuffix(name, ".tf"):
			ok = !names[strings.TrimSuffix(name, ".tf")+".tofu"]
		case strings.HasSuffix(name, ".tf.json"):
			ok = !names[strings.TrimSuffix(name, ".tf.json")+".tofu.json"]
		case strings.HasSuffix(name, ".tofu"), strings.HasSuffix(name, ".tofu.json"):
			ok = true
		}
		if !ok || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "#") {
			continue
		}
		if IsOverride(name) {
			override = append(override, name)
		} else {
			primary = append(primary, name)
		}
	}
	slices.Sort(primary)
	slices.Sort(override)
	return append(primary, override...), nil
}

func loadModule(key, dir string) (*module, error) {
	files, err := ConfigFiles(dir)
	if err != nil {
		return nil, fmt.Errorf("module %q: %w", key, err)
	}
	m := &module{
		key:       key,
		src:       map[string][]byte{},
		resources: map[string][]*hclsyntax.Block{},
		providers: map[string][]*hclsyntax.Block{},
		locals:    map[string]*hclsyntax.Attribute{},
		variables: map[string]*hclsyntax.Block{},
		calls:     map[string]*hclsyntax.Block{},
		required:  map[string]string{},
	}
	for _, name := range files {
		path := filepath.Join(dir, name)
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		m.src[name] = b
		if strings.HasSuffix(name, ".json") {
			m.jsonFiles = append(m.jsonFiles, name)
			continue
		}
		f, diags := hclsyntax.ParseConfig(b, name, hcl.InitialPos)
		if diags.HasErrors() {
			// terraform planned this configuration, so it parses; a file
			// changed since is refused rather than half read.
			// Only the place: a diagnostic may quote the source.
			line := 0
			if s := diags.Errs()[0].(*hcl.Diagnostic).Subject; s != nil {
				line = s.Start.Line
			}
			return nil, fmt.Errorf("module %q: %s does not parse at line %d", key, name, line)
		}
		body, ok := f.Body.(*hclsyntax.Body)
		if !ok {
			return nil, fmt.Errorf("module %q: %s: not native syntax", key, name)
		}
		m.add(body)
	}
	return m, nil
}

func (m *module) add(body *hclsyntax.Body) {
	for _, b := range body.Blocks {
		switch {
		case b.Type == "resource" && len(b.Labels) == 2:
			k := "managed." + b.Labels[0] + "." + b.Labels[1]
			m.resources[k] = append(m.resources[k], b)
		case b.Type == "data" && len(b.Labels) == 2:
			k := "data." + b.Labels[0] + "." + b.Labels[1]
			m.resources[k] = append(m.resources[k], b)
		case b.Type == "removed":
			m.removed = append(m.removed, b)
		case b.Type == "provider" && len(b.Labels) == 1:
			k := b.Labels[0]
			if a := b.Body.Attributes["alias"]; a != nil {
				if v, diags := a.Expr.Value(nil); !diags.HasErrors() && v.Type().FriendlyName() == "string" && v.IsKnown() && !v.IsNull() {
					k += "." + v.AsString()
				}
			}
			m.providers[k] = append(m.providers[k], b)
		case b.Type == "locals":
			for name, a := range b.Body.Attributes {
				m.locals[name] = a
			}
		case b.Type == "variable" && len(b.Labels) == 1:
			m.variables[b.Labels[0]] = b
		case b.Type == "module" && len(b.Labels) == 1:
			m.calls[b.Labels[0]] = b
		case b.Type == "terraform":
			for _, rp := range b.Body.Blocks {
				if rp.Type != "required_providers" {
					continue
				}
				for name, a := range rp.Body.Attributes {
					if src := requiredSource(a); src != "" {
						m.required[src] = name
					}
				}
			}
		}
	}
}

// source is the text of a range of one of the module's files.
func (m *module) source(r hcl.Range) []byte {
	b := m.src[r.Filename]
	if r.Start.Byte < 0 || r.End.Byte > len(b) || r.Start.Byte > r.End.Byte {
		return nil
	}
	return b[r.Start.Byte:r.End.Byte]
}

// modules loads module directories on demand from the manifest that init
// writes (DATA_DIR/modules/modules.json).
type modules struct {
	root    string
	dirs    map[string]string
	loaded  map[string]*module
	dataDir string
}

func newModules(root, dataDir string) *modules {
	return &modules{root: root, dataDir: dataDir, loaded: map[string]*module{}}
}

func (ms *modules) get(key string) (*module, error) {
	if m := ms.loaded[key]; m != nil {
		return m, nil
	}
	dir := ms.root
	if key != "" {
		if ms.dirs == nil {
			if err := ms.readManifest(); err != nil {
				return nil, err
			}
		}
		d, ok := ms.dirs[key]
		if !ok {
			return nil, fmt.Errorf("module %q is not in the modules manifest: run init", key)
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(ms.root, d)
		}
		dir = d
	}
	m, err := loadModule(key, dir)
	if err != nil {
		return nil, err
	}
	ms.loaded[key] = m
	return m, nil
}

func (ms *modules) readManifest() error {
	path := filepath.Join(ms.dataDir, "modules", "modules.json")
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		ms.dirs = map[string]string{}
		return nil
	}
	if err != nil {
		return err
	}
	var manifest struct {
		Modules []struct{ Key, Dir string }
	}
	if err := json.Unmarshal(b, &manifest); err != nil {
		return fmt.Errorf("modules manifest %s: %w", path, err)
	}
	ms.dirs = map[string]string{}
	for _, mod := range manifest.Modules {
		ms.dirs[mod.Key] = mod.Dir
	}
	return nil
}

// requiredSource is the source of a required_providers entry, such as
// hashicorp/aws in aws = { source = "hashicorp/aws" }, lower-cased, or ""
// when it has none.
func requiredSource(a *hclsyntax.Attribute) string {
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() || !v.IsKnown() || v.IsNull() {
		return ""
	}
	var src cty.Value
	switch {
	case v.Type().IsObjectType() && v.Type().HasAttribute("source"):
		src = v.GetAttr("source")
	case v.Type().IsMapType() && v.HasIndex(cty.StringVal("source")).True():
		src = v.Index(cty.StringVal("source"))
	default:
		return ""
	}
	if !src.IsKnown() || src.IsNull() || !src.Type().Equals(cty.String) {
		return ""
	}
	return strings.ToLower(src.AsString())
}

// localName is the module's local name for the provider whose full source
// address is fqn (registry.terraform.io/hashicorp/aws): the name
// required_providers gives it, else the provider type, as terraform
// implies it.
func (m *module) localName(fqn string) string {
	fqn = strings.ToLower(fqn)
	for src, name := range m.required {
		if src == fqn || sourceMatches(src, fqn) {
			return name
		}
	}
	return fqn[strings.LastIndexByte(fqn, '/')+1:]
}

// sourceMatches says whether a required_providers source without a
// hostname (hashicorp/aws, or aws) names fqn on either public registry.
func sourceMatches(src, fqn string) bool {
	host, rest, ok := strings.Cut(fqn, "/")
	if !ok || (host != "registry.terraform.io" && host != "registry.opentofu.org") {
		return false
	}
	if !strings.Contains(src, "/") {
		src = "hashicorp/" + src
	}
	return src == rest
}
