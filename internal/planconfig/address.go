package planconfig

import (
	"fmt"
	"strings"
)

// resourceAddr is a resource instance address taken apart: the module path
// without instance keys ("a.b" for module.a[0].module.b), the mode, type
// and name. The instance key is not needed: every instance of a resource
// has the configuration of its one block.
type resourceAddr struct {
	module string
	mode   string // managed or data
	typ    string
	name   string
}

func (a resourceAddr) key() string { return a.mode + "." + a.typ + "." + a.name }

// parseAddress reads a resource instance address as terraform and tofu
// write it, e.g. module.a["x.y"].module.b[0].data.t.n["k"].
func parseAddress(s string) (resourceAddr, error) {
	var a resourceAddr
	var mods []string
	rest := s
	for strings.HasPrefix(rest, "module.") {
		name, r, err := step(rest[len("module."):])
		if err != nil {
			return a, fmt.Errorf("address %q: %w", s, err)
		}
		mods = append(mods, name)
		if !strings.HasPrefix(r, ".") {
			return a, fmt.Errorf("address %q: no resource after module.%s", s, name)
		}
		rest = r[1:]
	}
	a.module = strings.Join(mods, ".")
	a.mode = "managed"
	if strings.HasPrefix(rest, "data.") {
		a.mode = "data"
		rest = rest[len("data."):]
	}
	dot := strings.IndexByte(rest, '.')
	if dot <= 0 {
		return a, fmt.Errorf("address %q: no resource type and name", s)
	}
	a.typ = rest[:dot]
	name, r, err := step(rest[dot+1:])
	if err != nil {
		return a, fmt.Errorf("address %q: %w", s, err)
	}
	if r != "" {
		return a, fmt.Errorf("address %q: %q after the resource", s, r)
	}
	a.name = name
	return a, nil
}

// step reads a name and an optional instance key ([0] or ["k"]) and
// returns the name and what follows the key.
func step(s string) (name, rest string, err error) {
	end := strings.IndexAny(s, ".[")
	if end < 0 {
		end = len(s)
	}
	name = s[:end]
	if name == "" {
		return "", "", fmt.Errorf("empty name")
	}
	rest = s[end:]
	if !strings.HasPrefix(rest, "[") {
		return name, rest, nil
	}
	i := 1
	if i < len(rest) && rest[i] == '"' {
		// A quoted key: skip to the closing quote, past escapes.
		for i++; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] == '\\' {
				i++
			}
		}
		i++
	} else {
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
	}
	if i >= len(rest) || rest[i] != ']' {
		return "", "", fmt.Errorf("unclosed instance key")
	}
	return name, rest[i+1:], nil
}

// moduleKey turns a module address (module.a[0].module.b) into the key of
// modules.json ("a.b").
func moduleKey(addr string) (string, error) {
	if addr == "" {
		return "", nil
	}
	var mods []string
	rest := addr
	for rest != "" {
		if !strings.HasPrefix(rest, "module.") {
			return "", fmt.Errorf("module address %q", addr)
		}
		name, r, err := step(rest[len("module."):])
		if err != nil {
			return "", fmt.Errorf("module address %q: %w", addr, err)
		}
		mods = append(mods, name)
		rest = strings.TrimPrefix(r, ".")
	}
	return strings.Join(mods, "."), nil
}
