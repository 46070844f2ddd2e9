package fingerprint

import (
	"strconv"
)

// class is how spec 000 treats a change's actions.
type class uint8

const (
	classNone    class = iota // no-op: only an import or a move can make it a change
	classPlanned              // create, read: the planned object
	classDiff                 // update, replace: the leaf paths that differ
	classGone                 // delete, forget: address and action only
)

// change is one resource or output change as read from the plan, pointing
// into the tree it was parsed into.
type change struct {
	address []byte
	output  bool
	kind    uint8 // index into kindList
	class   class
	label   string // create, update, delete, replace, read, forget or ""

	before, after, unknown, beforeSensitive, afterSensitive int32
	importing                                               int32 // change.importing, or none
	movedFrom                                               string
}

// leaf is one differing path of an update, written into effect.leaves.
type leaf struct {
	start, end int // its bytes in effect.leaves
	// With Detail, its path for people (input.tags["env"], cut at a
	// sensitive container) in effect.paths.
	pathStart, pathEnd int
}

// effect builds the canonical JSON of one change's effect.
type effect struct {
	t      *tree
	out    []byte
	leaves []byte
	list   []leaf
	paths  []byte
	detail bool

	steps   []step
	sensCut int // len(steps) where the first sensitive container began, or -1
}

type step struct {
	name  []byte
	index int // -1 for an object member
}

// build writes the effect of c into e.out and returns it.
func (e *effect) build(c *change) []byte {
	e.out, e.leaves, e.list, e.paths = e.out[:0], e.leaves[:0], e.list[:0], e.paths[:0]
	e.out = append(e.out, '{')
	first := true
	t := e.t
	switch c.class {
	case classPlanned:
		if c.after != none {
			e.out = appendKey(e.out, first, "after")
			e.out = t.appendValue(e.out, c.after)
			first = false
		}
		if !t.markEmpty(c.afterSensitive) {
			e.out = appendKey(e.out, first, "afterSensitive")
			e.out = t.appendMarker(e.out, c.afterSensitive)
			first = false
		}
		if !t.markEmpty(c.unknown) {
			e.out = appendKey(e.out, first, "afterUnknown")
			e.out = t.appendMarker(e.out, c.unknown)
			first = false
		}
		if e.detail {
			e.plannedDetail(c)
		}
	case classDiff:
		e.steps, e.sensCut = e.steps[:0], -1
		e.walk(c.before, c.after, c.unknown, c.beforeSensitive, c.afterSensitive, false, false)
		if len(e.list) > 0 {
			e.out = appendKey(e.out, first, "changes")
			e.out = append(e.out, '[')
			for j, l := range e.list {
				if j > 0 {
					e.out = append(e.out, ',')
				}
				e.out = append(e.out, e.leaves[l.start:l.end]...)
			}
			e.out = append(e.out, ']')
			first = false
		}
	}
	if c.importing != none {
		e.out = appendKey(e.out, first, "import")
		e.out = t.appendValue(e.out, c.importing)
		first = false
	}
	if c.movedFrom != "" {
		e.out = appendKey(e.out, first, "movedFrom")
		e.out = appendString(e.out, []byte(c.movedFrom))
	}
	return append(e.out, '}')
}

// walk visits the union of before, after and their markers, and writes a
// leaf for every path whose value, presence, unknownness or sensitivity
// differs. bs and as say whether an enclosing container is wholly sensitive.
func (e *effect) walk(b, a, u, sb, sa int32, bs, as bool) {
	t := e.t
	if t.isTrue(u) {
		e.emit(b, a, u, sb, sa, bs, as)
		return
	}
	bs = bs || t.isTrue(sb)
	as = as || t.isTrue(sa)
	kb, ka := t.kindOf(b), t.kindOf(a)
	if b != none && a != none && kb == ka && (kb == kindObject || kb == kindArray) &&
		(t.size(b) > 0 || t.size(a) > 0) {
		cut := e.sensCut
		if cut < 0 && (bs || as) {
			e.sensCut = len(e.steps)
		}
		if kb == kindObject {
			e.walkObject(b, a, u, sb, sa, bs, as)
		} else {
			e.walkArray(b, a, u, sb, sa, bs, as)
		}
		e.sensCut = cut
		return
	}
	if t.scalarMark(u) && t.scalarMark(sb) && t.scalarMark(sa) {
		// The usual leaf, its markers absent or false: what follows,
		// without the calls (markEmpty of each is true, so equalMarker
		// is bs == as).
		if !t.equalValue(b, a) || bs != as {
			e.emit(b, a, u, sb, sa, bs, as)
		}
		return
	}
	if !t.equalValue(b, a) || !t.markEmpty(u) ||
		!t.equalMarker(sb, bs, sa, as) {
		e.emit(b, a, u, sb, sa, bs, as)
	}
}

// scalarMark reports whether marker i is absent or a scalar other than true
// (false, mostly): it marks nothing, and has no parts.
func (t *tree) scalarMark(i int32) bool {
	if i == none {
		return true
	}
	k := t.nodes[i].kind
	return k != kindTrue && k != kindObject && k != kindArray
}

// walkObject merges the sorted members of the five trees.
func (e *effect) walkObject(b, a, u, sb, sa int32, bs, as bool) {
	t := e.t
	lists := [5][]int32{t.objectKids(b), t.objectKids(a), t.objectKids(u), t.objectKids(sb), t.objectKids(sa)}
	var at [5]int32
	for {
		name, ok := t.nextMember(&lists, &at)
		if !ok {
			return
		}
		e.steps = append(e.steps, step{name: name, index: -1})
		e.walk(at[0], at[1], at[2], at[3], at[4], bs, as)
		e.steps = e.steps[:len(e.steps)-1]
	}
}

func (e *effect) walkArray(b, a, u, sb, sa int32, bs, as bool) {
	t := e.t
	lists := [5][]int32{t.arrayKids(b), t.arrayKids(a), t.arrayKids(u), t.arrayKids(sb), t.arrayKids(sa)}
	n := 0
	for _, l := range lists {
		n = max(n, len(l))
	}
	for i := range n {
		var at [5]int32
		for j, l := range lists {
			at[j] = none
			if i < len(l) {
				at[j] = l[i]
			}
		}
		e.steps = append(e.steps, step{index: i})
		e.walk(at[0], at[1], at[2], at[3], at[4], bs, as)
		e.steps = e.steps[:len(e.steps)-1]
	}
}

// nextMember steps a merge of member lists sorted by name: it returns the
// smallest name at the head of any list, sets at[j] to list j's member of
// that name (or none) and moves those lists on. ok is false when all lists
// are used up. The lists are an array of as many as a walk merges (a merge
// of fewer leaves the others empty): indexing it needs no bounds check.
func (t *tree) nextMember(lists *[5][]int32, at *[5]int32) (name []byte, ok bool) {
	// heads marks the lists whose head has the smallest name so far: the
	// lists of a merge mostly hold the same names, so a head is mostly
	// found equal at once and compared only once.
	var heads uint
	for j, l := range lists {
		if len(l) == 0 {
			continue
		}
		switch n := t.nameOf(l[0]); {
		case heads != 0 && string(n) == string(name):
			heads |= 1 << j
		case heads == 0 || string(n) < string(name):
			name, heads = n, 1<<j
		}
	}
	for j, l := range lists {
		at[j] = none
		if heads&(1<<j) != 0 {
			at[j], lists[j] = l[0], l[1:]
		}
	}
	return name, heads != 0
}

func (t *tree) objectKids(i int32) []int32 { return t.kidsOf(i, kindObject) }

func (t *tree) arrayKids(i int32) []int32 { return t.kidsOf(i, kindArray) }

// kidsOf returns the children of node i when it is a container of kind k,
// else nil.
func (t *tree) kidsOf(i int32, k kind) []int32 {
	if i == none || t.nodes[i].kind != k {
		return nil
	}
	run := t.nodes[i].text
	return t.kids[run.off : run.off+run.n]
}

// emit writes one leaf: its path, its values where present, its markers.
func (e *effect) emit(b, a, u, sb, sa int32, bs, as bool) {
	t := e.t
	start := len(e.leaves)
	out := append(e.leaves, '{')
	first := true
	if a != none {
		out = appendKey(out, first, "after")
		out = t.appendValue(out, a)
		first = false
	}
	if as || !t.markEmpty(sa) {
		out = appendKey(out, first, "afterSensitive")
		if as || t.isTrue(sa) {
			out = append(out, "true"...)
		} else {
			out = t.appendMarker(out, sa)
		}
		first = false
	}
	if !t.markEmpty(u) {
		out = appendKey(out, first, "afterUnknown")
		out = t.appendMarker(out, u)
		first = false
	}
	if b != none {
		out = appendKey(out, first, "before")
		out = t.appendValue(out, b)
		first = false
	}
	if bs || !t.markEmpty(sb) {
		out = appendKey(out, first, "beforeSensitive")
		if bs || t.isTrue(sb) {
			out = append(out, "true"...)
		} else {
			out = t.appendMarker(out, sb)
		}
		first = false
	}
	out = appendKey(out, first, "path")
	out = append(out, '[')
	for j, s := range e.steps {
		if j > 0 {
			out = append(out, ',')
		}
		if s.index >= 0 {
			out = appendIndex(out, s.index)
		} else {
			out = appendString(out, s.name)
		}
	}
	out = append(out, ']', '}')
	e.leaves = out
	l := leaf{start: start, end: len(out)}
	if e.detail {
		cut := len(e.steps)
		if e.sensCut >= 0 {
			cut = e.sensCut
		}
		l.pathStart = len(e.paths)
		e.paths = appendPath(e.paths, e.steps[:cut])
		l.pathEnd = len(e.paths)
	}
	e.list = append(e.list, l)
}

// plannedDetail records one leaf per top-level attribute of a planned
// object, so a changed create can say which attributes moved.
func (e *effect) plannedDetail(c *change) {
	t := e.t
	e.steps, e.sensCut = e.steps[:0], -1
	lists := [5][]int32{t.objectKids(c.after), t.objectKids(c.unknown), t.objectKids(c.afterSensitive)} // and two empty
	if t.kindOf(c.after) != kindObject {
		// An output or a scalar: the whole value is one leaf.
		e.emit(none, c.after, c.unknown, none, c.afterSensitive, false, false)
		return
	}
	var at [5]int32
	for {
		name, ok := t.nextMember(&lists, &at)
		if !ok {
			return
		}
		e.steps = append(e.steps, step{name: name, index: -1})
		e.emit(none, at[0], at[1], none, at[2], false, t.isTrue(at[2]))
		e.steps = e.steps[:0]
	}
}

// appendPath renders steps the way Terraform prints attribute paths:
// name.sub, map["key"], list[0]; the empty path is (value).
func appendPath(dst []byte, steps []step) []byte {
	if len(steps) == 0 {
		return append(dst, "(value)"...)
	}
	for i, s := range steps {
		switch {
		case s.index >= 0:
			dst = append(dst, '[')
			dst = strconv.AppendInt(dst, int64(s.index), 10)
			dst = append(dst, ']')
		case isIdentifier(s.name):
			if i > 0 {
				dst = append(dst, '.')
			}
			dst = append(dst, s.name...)
		default:
			dst = append(dst, '[')
			dst = strconv.AppendQuote(dst, string(s.name))
			dst = append(dst, ']')
		}
	}
	return dst
}

func isIdentifier(s []byte) bool {
	if len(s) == 0 {
		return false
	}
	for i, c := range s {
		letter := c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
		digit := c >= '0' && c <= '9' || c == '-'
		if !letter && (i == 0 || !digit) {
			return false
		}
	}
	return true
}
