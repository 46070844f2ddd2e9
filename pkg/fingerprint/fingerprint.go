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
// never a value. It imports nothing outside the standard library.
package fingerprint

import (
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
	Add           int      `json:"add"`
	Change        int      `json:"change"`
	Destroy       int      `json:"destroy"`
	OutputChanges int      `json:"outputChanges"`
	Resources     []string `json:"resources"`
	Truncated     bool     `json:"truncated,omitempty"`
	PlanHash      string   `json:"planHash"`
}

// Empty reports whether the plan has no change at all.
func (r *Report) Empty() bool { return r.PlanHash == EmptyPlanHash }

// Change is one line of the hash: a resource or output change with its
// keyed digest. With Detail, Paths maps each attribute path the change
// touches to a keyed digest of what it does there, so two plans can be
// compared path by path without a value.
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

// Result is a report and the changes behind its hash, sorted by address.
type Result struct {
	Report  Report
	Changes []Change
}

// Hasher computes fingerprints under one key.
type Hasher struct {
	key []byte
	// Detail asks for Change.Paths. It costs an extra HMAC per attribute.
	Detail bool
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
		h:   h,
		mac: hmac.New(sha256.New, h.key),
		s:   newScanner(r),
	}
	c.e.t = &c.t
	c.e.detail = h.Detail
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
	h       *Hasher
	mac     hash.Hash
	s       *scanner
	t       tree
	e       effect
	changes []Change
	report  Report
	isPlan  bool
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
	if !strings.HasPrefix(ver, "1.") {
		return fmt.Errorf("format_version %q: only 1.x plan documents are understood", ver)
	}
	return nil
}

func (c *computation) resourceChanges() error {
	s := c.s
	more, err := s.first('[', ']')
	if err != nil {
		return fmt.Errorf("resource_changes: %w", err)
	}
	for i := 0; more; i++ {
		raw, err := s.capture()
		if err != nil {
			return fmt.Errorf("resource_changes[%d]: %w", i, err)
		}
		if err := c.resource(raw); err != nil {
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

func (c *computation) resource(raw []byte) error {
	t := &c.t
	root, err := t.parse(raw)
	if err != nil {
		return err
	}
	if t.kindOf(root) != kindObject {
		return errors.New("not an object")
	}
	addr, ok := t.stringOf(t.member(root, "address"))
	if !ok || addr == "" {
		return errors.New("address: missing or not a string")
	}
	ch := change{address: addr}
	if p := t.member(root, "previous_address"); p != none {
		if ch.movedFrom, ok = t.stringOf(p); !ok {
			return fmt.Errorf("%s: previous_address: not a string", addr)
		}
	}
	if err := c.read(&ch, t.member(root, "change")); err != nil {
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
	ch := change{address: "output." + name, output: true}
	if err := c.read(&ch, root); err != nil {
		return err
	}
	// Outputs have no imports or moves; a no-op output is not a change.
	ch.importing = none
	if ch.class == classNone {
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
	acts := t.member(obj, "actions")
	if t.kindOf(acts) != kindArray || t.nodes[acts].n == 0 {
		return errors.New("change.actions: missing, empty or not an array")
	}
	for _, a := range t.children(acts) {
		s, ok := t.stringOf(a)
		if !ok {
			return errors.New("change.actions: not a list of strings")
		}
		ch.actions = append(ch.actions, s)
	}
	var err error
	if ch.class, ch.label, err = classify(ch.actions); err != nil {
		return fmt.Errorf("change.actions: %w", err)
	}
	ch.before = t.member(obj, "before")
	ch.after = t.member(obj, "after")
	ch.unknown = t.member(obj, "after_unknown")
	ch.beforeSensitive = t.member(obj, "before_sensitive")
	ch.afterSensitive = t.member(obj, "after_sensitive")
	ch.importing = t.member(obj, "importing")
	if ch.importing != none {
		switch t.kindOf(ch.importing) {
		case kindNull:
			ch.importing = none
		case kindObject:
			if t.nodes[ch.importing].n == 0 {
				return errors.New("change.importing: empty object")
			}
		default:
			return errors.New("change.importing: not an object")
		}
	}
	return nil
}

// classify maps a plan's actions to how their effect is hashed and to the
// label people read.
func classify(actions []string) (class, string, error) {
	switch strings.Join(actions, ",") {
	case "no-op":
		return classNone, "", nil
	case "create":
		return classPlanned, "create", nil
	case "read":
		return classPlanned, "read", nil
	case "update":
		return classDiff, "update", nil
	case "delete,create", "create,delete":
		return classDiff, "replace", nil
	case "delete":
		return classGone, "delete", nil
	case "forget":
		return classGone, "forget", nil
	}
	return 0, "", fmt.Errorf("unsupported actions %q", actions)
}

// add computes the keyed digest of ch and keeps its line.
func (c *computation) add(ch *change) {
	effect := c.e.build(ch)
	out := Change{
		Address: ch.address,
		Actions: strings.Join(ch.actions, ","),
		Labels:  labels(ch),
		Digest:  c.digest(effect),
		Output:  ch.output,
	}
	if c.e.detail {
		out.Paths = make(map[string]string, len(c.e.list)+2)
		for _, l := range c.e.list {
			// Two leaves can share a path string once it is cut at a
			// sensitive container; their digests then combine.
			d := c.digest(c.e.leaves[l.start:l.end])
			if prev, ok := out.Paths[l.path]; ok {
				d = c.digest([]byte(prev + d))
			}
			out.Paths[l.path] = d
		}
		if ch.importing != none {
			out.Paths["(import)"] = c.digest(c.t.appendValue(nil, ch.importing))
		}
		if ch.movedFrom != "" {
			out.Paths["(moved from)"] = c.digest([]byte(ch.movedFrom))
		}
	}
	c.changes = append(c.changes, out)
}

func (c *computation) digest(b []byte) string {
	c.mac.Reset()
	c.mac.Write(b)
	var sum [sha256.Size]byte
	return hex.EncodeToString(c.mac.Sum(sum[:0]))
}

// labels renders what a report entry shows in parentheses: the action,
// then import, then move.
func labels(ch *change) string {
	var parts []string
	if ch.label != "" {
		parts = append(parts, ch.label)
	}
	if ch.importing != none {
		parts = append(parts, "import")
	}
	if ch.movedFrom != "" {
		parts = append(parts, "move")
	}
	return strings.Join(parts, ", ")
}

func (c *computation) result() *Result {
	lines := make([]string, len(c.changes))
	for i := range c.changes {
		lines[i] = c.changes[i].Line()
	}
	slices.Sort(lines)
	sum := sha256.New()
	for i, l := range lines {
		if i > 0 {
			io.WriteString(sum, "\n")
		}
		io.WriteString(sum, l)
	}
	c.report.PlanHash = Prefix + hex.EncodeToString(sum.Sum(nil))

	slices.SortStableFunc(c.changes, func(a, b Change) int { return strings.Compare(a.Address, b.Address) })
	c.report.Resources = []string{}
	n := 0
	for i := range c.changes {
		ch := &c.changes[i]
		if ch.Output {
			continue
		}
		n++
		if len(c.report.Resources) < MaxResources {
			c.report.Resources = append(c.report.Resources, ch.Address+" ("+ch.Labels+")")
		}
	}
	c.report.Truncated = n > MaxResources
	return &Result{Report: c.report, Changes: c.changes}
}
