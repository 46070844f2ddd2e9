// Package fingerprint computes the p2 plan hash of spec 000 and the report
// that goes with it, from the JSON of `terraform show -json` (terraform 1.5
// and later, OpenTofu 1.6 and later) and a secret key.
//
// The hash is built from one line per change, "<name> <actions> <hmac>",
// where name is the resource address or output.<name>, actions are the
// plan's actions comma-joined in plan order, and hmac is the hex
// HMAC-SHA256, under the key, of the canonical JSON of the change's effect.
// The lines are sorted and joined with newlines; the hash is "p2:" and the
// hex SHA-256 of that text.
//
// The package reads the plan as a stream and holds one resource change at a
// time; what it returns carries addresses, actions, counts and keyed digests,
// never a value, but for ReadValues, which returns the values a plan marks
// sensitive so that a log can hide them. It imports nothing outside the
// standard library.
package fingerprint

import (
	"bytes"
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"
	"strings"
)

// Prefix starts every hash this package produces.
const Prefix = "p2:"

// EmptyPlanHash is the hash of a plan with no change: p2: and the SHA-256
// of the empty string. An apply of it needs no approval.
const EmptyPlanHash = Prefix + "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// MinKeySize is the shortest plan key accepted, in bytes.
const MinKeySize = 32

// MaxResources is how many entries Report.Resources holds at most.
const MaxResources = 50

var (
	// ErrNoKey is returned when no plan key is given.
	ErrNoKey = errors.New("no plan key")
	// ErrShortKey is returned for a key shorter than MinKeySize bytes.
	ErrShortKey = fmt.Errorf("plan key shorter than %d bytes", MinKeySize)
	// ErrMalformedPlan wraps every error about the plan document itself.
	ErrMalformedPlan = errors.New("malformed plan")
)

// Report is what a plan does, without a value: counts, the changed
// resources with their labels, and the hash to approve.
type Report struct {
	Add     int `json:"add"`
	Change  int `json:"change"`
	Destroy int `json:"destroy"`
	// Replace counts the replacements among Add and Destroy (each is
	// counted in both), for summaries that show them apart.
	Replace       int      `json:"replace,omitempty"`
	OutputChanges int      `json:"outputChanges"`
	Resources     []string `json:"resources"`
	Truncated     bool     `json:"truncated,omitempty"`
	PlanHash      string   `json:"planHash"`
}

// Empty reports whether the plan has no change at all.
func (r *Report) Empty() bool { return r.PlanHash == EmptyPlanHash }

// Change is one line of the hash: a resource or output change with its
// keyed digest. Paths maps each attribute path the change touches to a
// keyed digest of what it does there, so two plans can be compared path by
// path without a value. It is the form in which a Detail is written out
// and read back.
type Change struct {
	Address string            `json:"address"`
	Actions string            `json:"actions"`
	Labels  string            `json:"labels"`
	Digest  string            `json:"digest"`
	Output  bool              `json:"output,omitempty"`
	Paths   map[string]string `json:"paths,omitempty"`
}

// Line is the change's line in the hashed text.
func (c *Change) Line() string { return c.Address + " " + c.Actions + " " + c.Digest }

// Result is a report and, when the Hasher has Detail, the changes behind
// its hash.
type Result struct {
	Report  Report
	Changes *Detail // nil without Detail
	// Ignored names, sorted, the outputs of Hasher.IgnoreOutputs that the
	// plan changes. They are in neither Report nor Changes: a plan whose
	// report is empty still changes something when Ignored is not empty.
	Ignored []string
	// Sections holds the raw JSON of each of Hasher.Sections the plan
	// has. It may hold values: keep it in memory only.
	Sections map[string][]byte
}

// Hasher computes fingerprints under one key.
type Hasher struct {
	key []byte
	// Detail asks for Result.Changes, with a keyed digest per attribute
	// path. It costs an extra HMAC per path.
	Detail bool
	// IgnoreOutputs names root outputs that are not the plan's own changes
	// (a value its caller records in state for itself): a change of one is
	// left out of the hash, the counts, the report and Changes, and only
	// named in Result.Ignored. The change is still read and checked.
	IgnoreOutputs []string
	// Sections names top-level sections of the plan document that the
	// hash skips (such as "variables" or "configuration") to return as
	// they are in Result.Sections, for a caller that binds them
	// elsewhere. They change nothing of the hash.
	Sections []string
}

// New returns a Hasher for key. The key is checked before anything else:
// no hash is ever produced without a key of at least MinKeySize bytes.
func New(key []byte) (*Hasher, error) {
	if len(key) == 0 {
		return nil, ErrNoKey
	}
	if len(key) < MinKeySize {
		return nil, fmt.Errorf("%w: got %d", ErrShortKey, len(key))
	}
	return &Hasher{key: slices.Clone(key)}, nil
}

// Compute returns the fingerprint of the plan JSON read from r under key.
func Compute(key []byte, r io.Reader) (*Result, error) {
	h, err := New(key)
	if err != nil {
		return nil, err
	}
	return h.Compute(r)
}

// Compute reads a plan document from r and returns its fingerprint.
func (h *Hasher) Compute(r io.Reader) (*Result, error) {
	c := &computation{
		mac: hmac.New(sha256.New, h.key),
		s:   newScanner(r),
	}
	c.e.t = &c.t
	c.e.detail = h.Detail
	c.ignore = h.IgnoreOutputs
	c.sections = h.Sections
	c.lines.detail = h.Detail
	if err := c.document(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformedPlan, err)
	}
	return c.result(), nil
}

// Matches reports whether a fresh plan hash is the approved one. A hash
// from another scheme (p1:) or a malformed one never matches.
func Matches(approved, fresh string) bool {
	if !strings.HasPrefix(approved, Prefix) || !strings.HasPrefix(fresh, Prefix) {
		return false
	}
	return hmac.Equal([]byte(approved), []byte(fresh))
}

// computation is the state of one Compute call.
type computation struct {
	mac    hash.Hash
	s      *scanner
	t      tree
	e      effect
	lines  lines
	report Report
	isPlan bool
	joined []byte
	// ignore is Hasher.IgnoreOutputs; ignored the ones that change.
	ignore  []string
	ignored []string
	// sections are Hasher.Sections; captured what was read of them.
	sections []string
	captured map[string][]byte
	sumBuf   []byte

	// With Detail: the path names, and per name where its digest for the
	// current change may be in the refs of lines.next().
	names   pathNames
	seen    []uint32
	scratch []byte
}

func (c *computation) document() error {
	s := c.s
	more, err := s.first('{', '}')
	if err != nil {
		return fmt.Errorf("plan document: %w", err)
	}
	for more {
		name, err := s.key()
		if err != nil {
			return err
		}
		switch name {
		case "format_version":
			if err := c.formatVersion(); err != nil {
				return err
			}
		case "errored":
			v, err := s.capture()
			if err != nil {
				return err
			}
			if string(v) == "true" {
				return errors.New("the plan is marked errored: Terraform could not finish it")
			}
		case "planned_values":
			c.isPlan = true
			if err := s.skipValue(); err != nil {
				return err
			}
		case "resource_changes":
			c.isPlan = true
			if err := c.resourceChanges(); err != nil {
				return err
			}
		case "output_changes":
			if err := c.outputChanges(); err != nil {
				return err
			}
		default:
			if slices.Contains(c.sections, name) {
				v, err := s.capture()
				if err != nil {
					return err
				}
				if c.captured == nil {
					c.captured = map[string][]byte{}
				}
				c.captured[name] = slices.Clone(v)
				break
			}
			if err := s.skipValue(); err != nil {
				return err
			}
		}
		if more, err = s.more('}'); err != nil {
			return err
		}
	}
	if err := s.done(); err != nil {
		return err
	}
	if !c.isPlan {
		return errors.New("not a plan: the document has neither planned_values nor resource_changes (is it state or configuration JSON?)")
	}
	return nil
}

func (c *computation) formatVersion() error {
	v, err := c.s.capture()
	if err != nil {
		return err
	}
	root, err := c.t.parse(v)
	if err != nil {
		return fmt.Errorf("format_version: %w", err)
	}
	ver, ok := c.t.stringOf(root)
	if !ok {
		return errors.New("format_version: not a string")
	}
	switch {
	case strings.HasPrefix(ver, "1."), ver == "0.2":
		// 0.2 is the format of terraform 0.15 and 1.0: it has every field
		// the hash binds (sensitivity markers included) but moves and
		// imports, which those releases cannot plan.
		return nil
	case ver == "0.1":
		return fmt.Errorf("format_version %q: this plan comes from terraform 0.14 or older, whose plans do not mark sensitive values; plan with terraform 0.15 or later", ver)
	}
	return fmt.Errorf("format_version %q: only plan documents of format 0.2 (terraform 0.15 and 1.0) and 1.x are understood", ver)
}

func (c *computation) resourceChanges() error {
	s := c.s
	more, err := s.first('[', ']')
	if err != nil {
		return fmt.Errorf("resource_changes: %w", err)
	}
	for i := 0; more; i++ {
		// Element (depth 1) and change (depth 2) stay unsorted; the values
		// from depth 3 on are sorted for their canonical form.
		root, err := s.parseInto(&c.t, 3)
		if err != nil {
			return fmt.Errorf("resource_changes[%d]: %w", i, err)
		}
		if err := c.resource(root); err != nil {
			return fmt.Errorf("resource_changes[%d]: %w", i, err)
		}
		if more, err = s.more(']'); err != nil {
			return fmt.Errorf("resource_changes: %w", err)
		}
	}
	return nil
}

func (c *computation) outputChanges() error {
	s := c.s
	more, err := s.first('{', '}')
	if err != nil {
		return fmt.Errorf("output_changes: %w", err)
	}
	for more {
		name, err := s.key()
		if err != nil {
			return fmt.Errorf("output_changes: %w", err)
		}
		raw, err := s.capture()
		if err != nil {
			return fmt.Errorf("output_changes.%s: %w", name, err)
		}
		if err := c.output(name, raw); err != nil {
			return fmt.Errorf("output_changes.%s: %w", name, err)
		}
		if more, err = s.more('}'); err != nil {
			return fmt.Errorf("output_changes: %w", err)
		}
	}
	return nil
}

func (c *computation) resource(root int32) error {
	t := &c.t
	if t.kindOf(root) != kindObject {
		return errors.New("not an object")
	}
	// The members of a resource change come in Terraform's struct order,
	// unsorted (the tree sorts only the values below them): one pass finds
	// the three that matter.
	an, prev, obj := none, none, none
	for _, m := range t.children(root) {
		switch string(t.nameOf(m)) {
		case "address":
			an = m
		case "previous_address":
			prev = m
		case "change":
			obj = m
		}
	}
	if t.kindOf(an) != kindString || len(t.textOf(an)) == 0 {
		return errors.New("address: missing or not a string")
	}
	addr := t.textOf(an)
	ch := change{address: addr}
	if prev != none {
		var ok bool
		if ch.movedFrom, ok = t.stringOf(prev); !ok {
			return fmt.Errorf("%s: previous_address: not a string", addr)
		}
	}
	if err := c.read(&ch, obj); err != nil {
		return fmt.Errorf("%s: %w", addr, err)
	}
	if ch.class == classNone && ch.importing == none && ch.movedFrom == "" {
		return nil
	}
	switch ch.label {
	case "create":
		c.report.Add++
	case "update":
		c.report.Change++
	case "delete":
		c.report.Destroy++
	case "replace":
		c.report.Add++
		c.report.Destroy++
		c.report.Replace++
	}
	c.add(&ch)
	return nil
}

func (c *computation) output(name string, raw []byte) error {
	t := &c.t
	root, err := t.parse(raw)
	if err != nil {
		return err
	}
	ch := change{address: []byte("output." + name), output: true}
	if err := c.read(&ch, root); err != nil {
		return err
	}
	// Outputs have no imports or moves; a no-op output is not a change.
	ch.importing = none
	if ch.class == classNone {
		return nil
	}
	if slices.Contains(c.ignore, name) {
		c.ignored = append(c.ignored, name)
		return nil
	}
	c.report.OutputChanges++
	c.add(&ch)
	return nil
}

// read fills ch from a change object: actions, values, markers, import.
func (c *computation) read(ch *change, obj int32) error {
	t := &c.t
	if t.kindOf(obj) != kindObject {
		return errors.New("change: missing or not an object")
	}
	acts := none
	ch.before, ch.after, ch.unknown, ch.beforeSensitive, ch.afterSensitive, ch.importing = none, none, none, none, none, none
	for _, m := range t.children(obj) {
		switch string(t.nameOf(m)) {
		case "actions":
			acts = m
		case "before":
			ch.before = m
		case "after":
			ch.after = m
		case "after_unknown":
			ch.unknown = m
		case "before_sensitive":
			ch.beforeSensitive = m
		case "after_sensitive":
			ch.afterSensitive = m
		case "importing":
			ch.importing = m
		}
	}
	if t.kindOf(acts) != kindArray || t.size(acts) == 0 {
		return errors.New("change.actions: missing, empty or not an array")
	}
	c.joined = c.joined[:0]
	for j, a := range t.children(acts) {
		if t.kindOf(a) != kindString || bytes.IndexByte(t.textOf(a), ',') >= 0 {
			return errors.New("change.actions: not a list of action names")
		}
		if j > 0 {
			c.joined = append(c.joined, ',')
		}
		c.joined = append(c.joined, t.textOf(a)...)
	}
	k, ok := kindIndex(string(c.joined))
	if !ok {
		return fmt.Errorf("change.actions: unsupported actions %q", c.joined)
	}
	ch.kind, ch.class, ch.label = k, kindList[k].class, kindList[k].label
	if ch.importing != none {
		switch t.kindOf(ch.importing) {
		case kindNull:
			ch.importing = none
		case kindObject:
			if t.size(ch.importing) == 0 {
				return errors.New("change.importing: empty object")
			}
		default:
			return errors.New("change.importing: not an object")
		}
	}
	return nil
}

// actionKind is how a plan's comma-joined actions are hashed and labelled.
type actionKind struct {
	actions string
	class   class
	label   string
}

// kindList is every action list Terraform writes. Any other list is
// refused: a new kind of change must be understood before it is hashed.
var kindList = []actionKind{
	{"no-op", classNone, ""},
	{"create", classPlanned, "create"},
	{"read", classPlanned, "read"},
	{"update", classDiff, "update"},
	{"delete,create", classDiff, "replace"},
	{"create,delete", classDiff, "replace"},
	{"delete", classGone, "delete"},
	{"forget", classGone, "forget"},
}

// kindIndex returns the index in kindList of the comma-joined actions.
// Looking through eight short strings costs less than hashing for a map.
func kindIndex(actions string) (uint8, bool) {
	for i, k := range kindList {
		if k.actions == actions {
			return uint8(i), true
		}
	}
	return 0, false
}

// add computes the keyed digest of ch and keeps its line.
func (c *computation) add(ch *change) {
	effect := c.e.build(ch)
	var flags uint8
	if ch.importing != none {
		flags |= flagImport
	}
	if ch.movedFrom != "" {
		flags |= flagMove
	}
	if ch.output {
		flags |= flagOutput
	}
	if c.e.detail {
		c.addPaths(ch)
	}
	c.lines.add(ch.address, ch.kind, flags, c.sum(effect))
}

// Path names of what is not an attribute.
var (
	importPath = []byte("(import)")
	movedPath  = []byte("(moved from)")
)

// addPaths keeps, for Detail, a keyed digest per attribute path of ch (of
// its import and its move too), as the refs of the line added next.
func (c *computation) addPaths(ch *change) {
	start := len(c.lines.next().refs)
	for _, l := range c.e.list {
		c.putPath(start, c.e.paths[l.pathStart:l.pathEnd], c.sum(c.e.leaves[l.start:l.end]), true)
	}
	if ch.importing != none {
		c.scratch = c.t.appendValue(c.scratch[:0], ch.importing)
		c.putPath(start, importPath, c.sum(c.scratch), false)
	}
	if ch.movedFrom != "" {
		c.putPath(start, movedPath, c.sum([]byte(ch.movedFrom)), false)
	}
}

// putPath keeps the digest d of path for the change whose refs begin at
// start. Two leaves can share a path once it is cut at a sensitive
// container: with combine their digests then combine (the keyed digest of
// both in hex, earlier first), else d replaces the earlier one.
func (c *computation) putPath(start int, path []byte, d [sha256.Size]byte, combine bool) {
	b := c.lines.next()
	refs := b.refs
	id := c.names.id(path)
	if int(id) >= len(c.seen) {
		c.seen = append(c.seen, make([]uint32, int(id)+1-len(c.seen))...)
	}
	if at := int(c.seen[id]); at >= start && at < len(refs) && refs[at].name == id {
		if combine {
			c.scratch = hex.AppendEncode(c.scratch[:0], refs[at].digest[:])
			c.scratch = hex.AppendEncode(c.scratch, d[:])
			d = c.sum(c.scratch)
		}
		refs[at].digest = d
		return
	}
	c.seen[id] = uint32(len(refs))
	b.refs = append(refs, pathRef{name: id, digest: d})
}

// sum is the keyed HMAC of b.
func (c *computation) sum(b []byte) (out [sha256.Size]byte) {
	c.mac.Reset()
	c.mac.Write(b)
	c.sumBuf = c.mac.Sum(c.sumBuf[:0])
	copy(out[:], c.sumBuf)
	return out
}

func (c *computation) result() *Result {
	l := &c.lines
	order := l.sorted()
	sum := sha256.New()
	var buf []byte
	for i, r := range order {
		buf = l.appendLine(buf[:0], r)
		if i < len(order)-1 {
			buf = append(buf, '\n')
		}
		sum.Write(buf)
	}
	c.report.PlanHash = Prefix + hex.EncodeToString(sum.Sum(nil))

	// The report lists the resources with the smallest addresses. Line
	// order is address order but for addresses holding bytes below ' ', so
	// the selection compares addresses itself.
	var first []int32
	n := 0
	for _, r := range order {
		if l.rec(r).flags&flagOutput != 0 {
			continue
		}
		n++
		addr := l.address(r)
		if len(first) == MaxResources && bytes.Compare(addr, l.address(first[MaxResources-1])) >= 0 {
			continue
		}
		at, _ := slices.BinarySearchFunc(first, addr, func(e int32, a []byte) int {
			return cmp.Or(bytes.Compare(l.address(e), a), -1)
		})
		first = slices.Insert(first, at, r)
		if len(first) > MaxResources {
			first = first[:MaxResources]
		}
	}
	c.report.Resources = make([]string, len(first))
	for i, r := range first {
		c.report.Resources[i] = string(l.address(r)) + " (" + l.labels(r) + ")"
	}
	c.report.Truncated = n > MaxResources

	res := &Result{Report: c.report, Sections: c.captured}
	if len(c.ignored) > 0 {
		slices.Sort(c.ignored)
		res.Ignored = slices.Compact(c.ignored)
	}
	if c.e.detail {
		l.sortByAddress(order)
		res.Changes = &Detail{lines: c.lines, order: order, names: c.names.names}
	}
	return res
}
