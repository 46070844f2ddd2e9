package fingerprint

import (
	"bytes"
	"cmp"
	"fmt"
	"iter"
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
// those of a fresh one, both made under the same key, sorted by address.
// Paths are named only when both sides have path digests. A nil Detail has
// no change.
func Compare(approved, fresh *Detail) []Difference {
	// A Detail is in address order: CompareChanges has nothing to refuse.
	out, _ := CompareChanges(approved.All(), fresh)
	return out
}

// CompareChanges is Compare with the approved plan's changes read one at a
// time, in address order as Detail.All gives them (and a record keeps
// them), so that they are never all held. It refuses changes out of that
// order.
func CompareChanges(approved iter.Seq[Change], fresh *Detail) ([]Difference, error) {
	c := comparison{fresh: fresh}
	for a := range approved {
		if len(c.group) > 0 && a.Address != c.group[0].Address {
			if a.Address < c.group[0].Address {
				return nil, fmt.Errorf("approved changes: %s comes after %s, out of address order", a.Address, c.group[0].Address)
			}
			c.flush()
		}
		c.group = append(c.group, a)
	}
	c.flush()
	for ; c.next < fresh.Len(); c.next++ {
		c.added(c.next)
	}
	slices.SortFunc(c.out, func(a, b Difference) int {
		return cmp.Or(cmp.Compare(a.Address, b.Address), cmp.Compare(a.Kind, b.Kind))
	})
	return c.out, nil
}

// comparison is a merge of the approved changes, one address at a time,
// with the fresh ones.
type comparison struct {
	fresh *Detail
	next  int      // the first fresh change not yet compared
	group []Change // the approved changes at one address
	out   []Difference
}

func (c *comparison) added(j int) {
	c.out = append(c.out, Difference{Address: string(c.fresh.address(j)), Kind: Added, Labels: c.fresh.labels(j)})
}

// flush compares the approved group with the fresh changes at its address,
// after noting the fresh ones before it as added.
func (c *comparison) flush() {
	if len(c.group) == 0 {
		return
	}
	addr := []byte(c.group[0].Address)
	for ; c.next < c.fresh.Len() && bytes.Compare(c.fresh.address(c.next), addr) < 0; c.next++ {
		c.added(c.next)
	}
	end := c.next
	for end < c.fresh.Len() && bytes.Equal(c.fresh.address(end), addr) {
		end++
	}
	// An output and a resource never share an address in a plan, but the
	// two are kept apart as if they could.
	for _, output := range []bool{false, true} {
		var oc, nc []Change
		for _, a := range c.group {
			if a.Output == output {
				oc = append(oc, a)
			}
		}
		for j := c.next; j < end; j++ {
			if c.fresh.rec(j).flags&flagOutput != 0 == output {
				nc = append(nc, c.fresh.Change(j))
			}
		}
		c.out = compareAt(c.out, oc, nc)
	}
	c.next = end
	c.group = c.group[:0]
}

// compareAt compares the approved and fresh changes at one address.
func compareAt(out []Difference, oc, nc []Change) []Difference {
	switch {
	case len(oc) == 0:
		for _, c := range nc {
			out = append(out, Difference{Address: c.Address, Kind: Added, Labels: c.Labels})
		}
	case len(nc) == 0:
		for _, c := range oc {
			out = append(out, Difference{Address: c.Address, Kind: Gone, Labels: c.Labels})
		}
	case len(oc) != 1 || len(nc) != 1:
		// Deposed objects share an address: compare them as a set.
		if !sameDigests(oc, nc) {
			out = append(out, Difference{Address: nc[0].Address, Kind: Changed, Labels: nc[0].Labels})
		}
	case oc[0].Digest != nc[0].Digest || oc[0].Actions != nc[0].Actions:
		d := Difference{Address: nc[0].Address, Kind: Changed, Labels: nc[0].Labels, Paths: diffPaths(oc[0].Paths, nc[0].Paths)}
		if oc[0].Labels != nc[0].Labels {
			d.Was = oc[0].Labels
		}
		out = append(out, d)
	}
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
