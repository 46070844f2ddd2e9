package fingerprint

import (
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
)

// Detail is every change behind a plan hash, sorted by address, with its
// actions, labels, keyed digest and, per attribute path, a keyed digest of
// what the change does there; never a value. It is held compactly, in
// pointer-free blocks with the path names interned: the benchmark's
// 100,000-change plan takes about 17 MB, where a []Change with maps of hex
// strings took about 70. Change and All give the changes one at a time, as
// Change values; a DetailBuilder reads them back.
type Detail struct {
	lines lines    // the lines of the hash, with their path digests
	order []int32  // record indices by address
	names []string // path names, by index
}

// Len is the number of changes.
func (d *Detail) Len() int {
	if d == nil {
		return 0
	}
	return len(d.order)
}

// Change returns change i, in address order.
func (d *Detail) Change(i int) Change {
	r := d.order[i]
	rec := d.lines.rec(r)
	c := Change{
		Address: string(d.lines.address(r)),
		Actions: kindList[rec.kind].actions,
		Labels:  d.lines.labels(r),
		Digest:  hex.EncodeToString(rec.digest[:]),
		Output:  rec.flags&flagOutput != 0,
	}
	if refs := d.lines.refsOf(r); len(refs) > 0 {
		c.Paths = make(map[string]string, len(refs))
		for _, ref := range refs {
			c.Paths[d.names[ref.name]] = hex.EncodeToString(ref.digest[:])
		}
	}
	return c
}

// All yields the changes in address order.
func (d *Detail) All() iter.Seq[Change] {
	return func(yield func(Change) bool) {
		for i := range d.Len() {
			if !yield(d.Change(i)) {
				return
			}
		}
	}
}

func (d *Detail) address(i int) []byte { return d.lines.address(d.order[i]) }
func (d *Detail) rec(i int) *record    { return d.lines.rec(d.order[i]) }
func (d *Detail) labels(i int) string  { return d.lines.labels(d.order[i]) }

// A DetailBuilder reads a Detail back from its changes, as Detail.All gave
// them, in any order. The zero value is ready to use.
type DetailBuilder struct {
	lines lines
	names pathNames
}

// Add adds a change, after checking that it is one a Detail can hold:
// an address, a kind of actions this package knows, labels that go with
// them, and digests of 64 lower-case hex digits.
func (b *DetailBuilder) Add(c Change) error {
	if c.Address == "" {
		return errors.New("address: missing")
	}
	kind, ok := kindIndex(c.Actions)
	if !ok {
		return fmt.Errorf("actions %q: not a list of actions this release knows", c.Actions)
	}
	flags := -1
	for f, l := range labelTable[kind] {
		if l == c.Labels {
			flags = f
			break
		}
	}
	if flags < 0 {
		return fmt.Errorf("labels %q: do not go with the actions %q", c.Labels, c.Actions)
	}
	if c.Output {
		flags |= flagOutput
	}
	digest, err := parseDigest(c.Digest)
	if err != nil {
		return fmt.Errorf("digest: %w", err)
	}
	b.lines.detail = true
	blk := b.lines.next()
	start := len(blk.refs)
	for _, name := range slices.Sorted(maps.Keys(c.Paths)) {
		if name == "" {
			blk.refs = blk.refs[:start]
			return errors.New("paths: an empty path name")
		}
		d, err := parseDigest(c.Paths[name])
		if err != nil {
			blk.refs = blk.refs[:start]
			return fmt.Errorf("paths[%q]: %w", name, err)
		}
		blk.refs = append(blk.refs, pathRef{name: b.names.id([]byte(name)), digest: d})
	}
	b.lines.add([]byte(c.Address), kind, uint8(flags), digest)
	return nil
}

// Detail returns the changes added so far, sorted by address, and empties
// the builder.
func (b *DetailBuilder) Detail() *Detail {
	l := b.lines
	l.detail = true
	order := make([]int32, l.n)
	for i := range order {
		order[i] = int32(i)
	}
	l.sortByAddress(order)
	d := &Detail{lines: l, order: order, names: b.names.names}
	*b = DetailBuilder{}
	return d
}

// parseDigest reads a digest as this package writes it: 64 lower-case hex
// digits.
func parseDigest(s string) (d [32]byte, err error) {
	if len(s) != hex.EncodedLen(len(d)) {
		return d, fmt.Errorf("%d characters, want %d hex digits", len(s), hex.EncodedLen(len(d)))
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return d, fmt.Errorf("character %d is not a lower-case hex digit", i+1)
		}
	}
	_, err = hex.Decode(d[:], []byte(s))
	return d, err
}

// pathNames interns attribute path names: a plan names the same few paths
// over and over.
type pathNames struct {
	ids   map[string]uint32
	names []string
}

func (p *pathNames) id(name []byte) uint32 {
	if id, ok := p.ids[string(name)]; ok {
		return id
	}
	if p.ids == nil {
		p.ids = map[string]uint32{}
	}
	id := uint32(len(p.names))
	s := string(name)
	p.names = append(p.names, s)
	p.ids[s] = id
	return id
}
