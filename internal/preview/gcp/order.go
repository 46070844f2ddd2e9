package gcp

import (
	"fmt"
	"slices"
	"strings"
)

// applyOrder is the order the apply writes resources in: each after the
// resources its references name, else in manifest order. A reference
// cycle is an error that names it: no order creates every resource of
// one.
func applyOrder(resources []*resource) ([]*resource, error) {
	out := make([]*resource, 0, len(resources))
	placed := map[*resource]bool{}
	for len(out) < len(resources) {
		next := -1
		for i, r := range resources {
			if !placed[r] && !slices.ContainsFunc(r.deps, func(d *resource) bool { return !placed[d] }) {
				next = i
				break
			}
		}
		if next < 0 {
			return nil, cycleError(resources, placed)
		}
		placed[resources[next]] = true
		out = append(out, resources[next])
	}
	return out, nil
}

// cycleError names one cycle among the resources not placed: each of
// them references another resource not placed, or it would be.
func cycleError(resources []*resource, placed map[*resource]bool) error {
	i := slices.IndexFunc(resources, func(r *resource) bool { return !placed[r] })
	r := resources[i]
	at := map[*resource]int{}
	var path []*resource
	for {
		if first, again := at[r]; again {
			path = append(path[first:], r)
			break
		}
		at[r] = len(path)
		path = append(path, r)
		r = r.deps[slices.IndexFunc(r.deps, func(d *resource) bool { return !placed[d] })]
	}
	names := make([]string, len(path))
	for i, r := range path {
		names[i] = r.Address
	}
	return fmt.Errorf("%s: a reference cycle: %s; no order creates each after what it references", path[0].Doc.Where, strings.Join(names, " → "))
}
