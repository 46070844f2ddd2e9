package fingerprint

import (
	"cmp"
	"slices"
)

// Difference is one change that is not the same in two plans, said without
// a value: the address, how it differs, its labels, and for a changed entry
// the attribute paths whose digests differ.
type Difference struct {
	Address string   `json:"address"`
	Kind    string   `json:"kind"` // added, gone or changed
	Labels  string   `json:"labels"`
	Was     string   `json:"was,omitempty"` // labels in the approved plan, when they differ
	Paths   []string `json:"paths,omitempty"`
}

// Difference kinds.
const (
	Added   = "added"
	Gone    = "gone"
	Changed = "changed"
)

// Compare lists what differs between the changes of an approved plan and
// those of a fresh one, both made under the same key. Paths are named only
// when both sides were computed with Detail.
func Compare(approved, fresh []Change) []Difference {
	type key struct {
		addr   string
		output bool
	}
	index := func(cs []Change) map[key][]Change {
		m := make(map[key][]Change, len(cs))
		for _, c := range cs {
			k := key{c.Address, c.Output}
			m[k] = append(m[k], c)
		}
		return m
	}
	was, now := index(approved), index(fresh)
	var out []Difference
	for k, nc := range now {
		oc, ok := was[k]
		switch {
		case !ok:
			for _, c := range nc {
				out = append(out, Difference{Address: c.Address, Kind: Added, Labels: c.Labels})
			}
		case len(oc) != 1 || len(nc) != 1:
			// Deposed objects share an address: compare them as a set.
			if !sameDigests(oc, nc) {
				out = append(out, Difference{Address: k.addr, Kind: Changed, Labels: nc[0].Labels})
			}
		case oc[0].Digest != nc[0].Digest || oc[0].Actions != nc[0].Actions:
			d := Difference{Address: k.addr, Kind: Changed, Labels: nc[0].Labels, Paths: diffPaths(oc[0].Paths, nc[0].Paths)}
			if oc[0].Labels != nc[0].Labels {
				d.Was = oc[0].Labels
			}
			out = append(out, d)
		}
	}
	for k, oc := range was {
		if _, ok := now[k]; !ok {
			for _, c := range oc {
				out = append(out, Difference{Address: c.Address, Kind: Gone, Labels: c.Labels})
			}
		}
	}
	slices.SortFunc(out, func(a, b Difference) int {
		return cmp.Or(cmp.Compare(a.Address, b.Address), cmp.Compare(a.Kind, b.Kind))
	})
	return out
}

func sameDigests(a, b []Change) bool {
	da := make([]string, 0, len(a))
	for _, c := range a {
		da = append(da, c.Actions+" "+c.Digest)
	}
	db := make([]string, 0, len(b))
	for _, c := range b {
		db = append(db, c.Actions+" "+c.Digest)
	}
	slices.Sort(da)
	slices.Sort(db)
	return slices.Equal(da, db)
}

// diffPaths returns the paths whose digests differ or exist on one side.
func diffPaths(a, b map[string]string) []string {
	var out []string
	for p, d := range b {
		if a[p] != d {
			out = append(out, p)
		}
	}
	for p := range a {
		if _, ok := b[p]; !ok {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}
