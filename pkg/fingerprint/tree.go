package fingerprint

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// kind is the JSON type of a node.
type kind uint8

const (
	kindNull kind = iota
	kindFalse
	kindTrue
	kindNumber
	kindString
	kindObject
	kindArray
)

// none is the index of an absent node.
const none int32 = -1

// node is one JSON value of a parsed resource change. Strings and names are
// held decoded; numbers keep the literal text as written. A node holds no
// pointer (its bytes are spans of the input or of tree.text), so the
// garbage collector never scans the node slice.
type node struct {
	kind kind
	text span  // number literal or decoded string
	name span  // decoded member name, for members of an object
	kids int32 // first index into tree.kids
	n    int32 // number of children
}

// span is a run of bytes in tree.src, or in tree.text when off has the
// inText bit.
type span struct{ off, n uint32 }

const inText = 1 << 31

// bytes returns the bytes of s.
func (t *tree) bytes(s span) []byte {
	if s.off&inText != 0 {
		o := s.off &^ inText
		return t.text[o : o+s.n]
	}
	return t.src[s.off : s.off+s.n]
}

// textOf returns the literal or decoded string of node i.
func (t *tree) textOf(i int32) []byte { return t.bytes(t.nodes[i].text) }

// nameOf returns the member name of node i.
func (t *tree) nameOf(i int32) []byte { return t.bytes(t.nodes[i].name) }

// tree is one resource change parsed into nodes. Object members are sorted
// by name when the container closes, so every walk visits them in canonical
// order. A tree is reused from change to change; its slices only grow.
type tree struct {
	src   []byte
	pos   int
	nodes []node
	kids  []int32 // children of containers, contiguous per container
	stack []int32 // children of the containers still open
	text  []byte  // decoded strings that needed unescaping
	depth int
	final bool // src is all the input there is
	// sortFrom is the depth from which object members are sorted.
	sortFrom int
}

const maxDepth = 512

var errDepth = errors.New("nesting deeper than 512 levels")

// errNeedMore says src ended inside the value and more input may follow.
var errNeedMore = errors.New("need more input")

// parse reads src, one complete JSON value, into t and returns its root.
func (t *tree) parse(src []byte) (int32, error) {
	root, n, err := t.parsePrefix(src, true, 1)
	if err != nil {
		return none, err
	}
	t.pos = n
	t.space()
	if t.pos != len(t.src) {
		return none, t.errorf("unexpected %q after value", t.src[t.pos])
	}
	return root, nil
}

// parsePrefix reads the JSON value at the start of src and returns its root
// and how many bytes it took. When src ends inside the value it returns
// errNeedMore, unless final says no more input follows. Objects from depth
// sortFrom on (the root is depth 1) have their members sorted; shallower
// ones keep input order.
func (t *tree) parsePrefix(src []byte, final bool, sortFrom int) (int32, int, error) {
	t.src, t.pos, t.final, t.sortFrom = src, 0, final, sortFrom
	t.nodes, t.kids, t.stack, t.text = t.nodes[:0], t.kids[:0], t.stack[:0], t.text[:0]
	t.depth = 0
	root, err := t.value()
	if err != nil {
		return none, 0, err
	}
	return root, t.pos, nil
}

// end is the error for src ending inside a value.
func (t *tree) end() error {
	if t.final {
		return t.errorf("unexpected end of input")
	}
	return errNeedMore
}

func (t *tree) errorf(format string, args ...any) error {
	return fmt.Errorf("invalid JSON at byte %d of the change: %s", t.pos, fmt.Sprintf(format, args...))
}

func (t *tree) space() {
	// Terraform writes no whitespace: the usual case returns at once.
	if t.pos < len(t.src) && t.src[t.pos] > ' ' {
		return
	}
	for t.pos < len(t.src) {
		switch t.src[t.pos] {
		case ' ', '\n', '\r', '\t':
			t.pos++
		default:
			return
		}
	}
}

func (t *tree) add(n node) int32 {
	t.nodes = append(t.nodes, n)
	return int32(len(t.nodes) - 1)
}

func (t *tree) value() (int32, error) {
	t.space()
	if t.pos >= len(t.src) {
		return none, t.end()
	}
	switch c := t.src[t.pos]; c {
	case '{':
		return t.object()
	case '[':
		return t.array()
	case '"':
		s, err := t.str()
		if err != nil {
			return none, err
		}
		return t.add(node{kind: kindString, text: s}), nil
	default:
		start := t.pos
		for t.pos < len(t.src) && byteClass[t.src[t.pos]] == clsOther {
			t.pos++
		}
		if t.pos == len(t.src) && !t.final {
			return none, errNeedMore
		}
		lit := t.src[start:t.pos]
		switch {
		case string(lit) == "null":
			return t.add(node{kind: kindNull}), nil
		case string(lit) == "true":
			return t.add(node{kind: kindTrue}), nil
		case string(lit) == "false":
			return t.add(node{kind: kindFalse}), nil
		case validNumber(lit):
			return t.add(node{kind: kindNumber, text: span{uint32(start), uint32(len(lit))}}), nil
		}
		t.pos = start
		if len(lit) == 0 {
			return none, t.errorf("unexpected %q", c)
		}
		// The literal is not echoed: malformed or not, it may be a value.
		return none, t.errorf("invalid literal of %d bytes", len(lit))
	}
}

// str reads a string at pos and returns it decoded.
func (t *tree) str() (span, error) {
	start := t.pos + 1
	// Most strings are short names and values: one loop looks for the
	// closing quote and a backslash together; a long string goes to
	// bytes.IndexByte.
	i, esc := -1, false
	for j := start; j < len(t.src) && j < start+32; j++ {
		if c := t.src[j]; c == '"' {
			i = j - start
			break
		} else if c == '\\' {
			esc = true
			break
		}
	}
	if i < 0 && !esc {
		i = bytes.IndexByte(t.src[start:], '"')
		if i < 0 {
			return span{}, t.end()
		}
		esc = bytes.IndexByte(t.src[start:start+i], '\\') >= 0
	}
	if !esc {
		t.pos = start + i + 1
		return span{uint32(start), uint32(i)}, nil
	}
	// Find the real closing quote, then decode the escapes.
	end := start
	for {
		if end >= len(t.src) {
			return span{}, t.end()
		}
		c := t.src[end]
		if c == '"' {
			break
		}
		if c == '\\' {
			end++
		}
		end++
	}
	raw := t.src[start:end]
	off := len(t.text)
	var err error
	t.text, err = appendUnescaped(t.text, raw)
	if err != nil {
		return span{}, t.errorf("%v", err)
	}
	t.pos = end + 1
	return span{uint32(off) | inText, uint32(len(t.text) - off)}, nil
}

func (t *tree) object() (int32, error) {
	base := len(t.stack)
	empty, err := t.open('}')
	if err != nil {
		return none, err
	}
	if !empty {
		for {
			t.space()
			if t.pos >= len(t.src) {
				return none, t.end()
			}
			if t.src[t.pos] != '"' {
				return none, t.errorf("expected member name")
			}
			name, err := t.str()
			if err != nil {
				return none, err
			}
			t.space()
			if t.pos >= len(t.src) {
				return none, t.end()
			}
			if t.src[t.pos] != ':' {
				return none, t.errorf("expected ':' after member name")
			}
			t.pos++
			v, err := t.value()
			if err != nil {
				return none, err
			}
			t.nodes[v].name = name
			t.stack = append(t.stack, v)
			if more, err := t.next('}'); !more || err != nil {
				if err != nil {
					return none, err
				}
				break
			}
		}
	}
	if t.depth >= t.sortFrom {
		members := t.stack[base:]
		if !slices.IsSortedFunc(members, t.byName) {
			slices.SortStableFunc(members, t.byName)
		}
	}
	t.depth--
	return t.close(kindObject, base), nil
}

func (t *tree) byName(a, b int32) int {
	return bytes.Compare(t.nameOf(a), t.nameOf(b))
}

func (t *tree) array() (int32, error) {
	base := len(t.stack)
	empty, err := t.open(']')
	if err != nil {
		return none, err
	}
	if !empty {
		for {
			v, err := t.value()
			if err != nil {
				return none, err
			}
			t.stack = append(t.stack, v)
			if more, err := t.next(']'); !more || err != nil {
				if err != nil {
					return none, err
				}
				break
			}
		}
	}
	t.depth--
	return t.close(kindArray, base), nil
}

// open starts a container at pos: it checks the depth, consumes the opening
// byte and reports whether the container is empty (then its closing byte
// is consumed too).
func (t *tree) open(closing byte) (empty bool, err error) {
	if t.depth++; t.depth > maxDepth {
		return false, errDepth
	}
	t.pos++
	t.space()
	if t.pos >= len(t.src) {
		return false, t.end()
	}
	if t.src[t.pos] == closing {
		t.pos++
		return true, nil
	}
	return false, nil
}

// next ends an element of a container: it consumes a comma and reports
// more, or consumes the closing byte and reports no more.
func (t *tree) next(closing byte) (more bool, err error) {
	t.space()
	if t.pos >= len(t.src) {
		return false, t.end()
	}
	switch t.src[t.pos] {
	case ',':
		t.pos++
		return true, nil
	case closing:
		t.pos++
		return false, nil
	}
	return false, t.errorf("expected ',' or %q", closing)
}

// close moves the children on the stack above base into kids and adds the
// container node.
func (t *tree) close(k kind, base int) int32 {
	first := int32(len(t.kids))
	t.kids = append(t.kids, t.stack[base:]...)
	n := int32(len(t.stack) - base)
	t.stack = t.stack[:base]
	return t.add(node{kind: k, kids: first, n: n})
}

// children returns the children of a container node, or nil.
func (t *tree) children(i int32) []int32 {
	if i == none {
		return nil
	}
	nd := &t.nodes[i]
	if nd.kind != kindObject && nd.kind != kindArray {
		return nil
	}
	return t.kids[nd.kids : nd.kids+nd.n]
}

func (t *tree) kindOf(i int32) kind {
	if i == none {
		return kindNull
	}
	return t.nodes[i].kind
}

func (t *tree) isTrue(i int32) bool { return i != none && t.nodes[i].kind == kindTrue }

// stringOf returns the string value of node i and whether it is a string.
func (t *tree) stringOf(i int32) (string, bool) {
	if i == none || t.nodes[i].kind != kindString {
		return "", false
	}
	return string(t.textOf(i)), true
}

// appendUnescaped decodes the JSON string body raw onto dst.
func appendUnescaped(dst, raw []byte) ([]byte, error) {
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' {
			dst = append(dst, c)
			continue
		}
		i++
		if i >= len(raw) {
			return dst, errors.New("string ends in a backslash")
		}
		switch raw[i] {
		case '"', '\\', '/':
			dst = append(dst, raw[i])
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, ok := hex4(raw[i+1:])
			if !ok {
				return dst, errors.New(`invalid \u escape`)
			}
			i += 4
			if utf16.IsSurrogate(r) {
				if r2, ok := hex4(raw[min(i+3, len(raw)):]); ok && i+2 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						dst = utf8.AppendRune(dst, dec)
						i += 6
						continue
					}
				}
				r = utf8.RuneError
			}
			dst = utf8.AppendRune(dst, r)
		default:
			return dst, fmt.Errorf("invalid escape %q", raw[i-1:i+1])
		}
	}
	return dst, nil
}

func unescape(dst, raw []byte) []byte {
	out, _ := appendUnescaped(dst, raw)
	return out
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[:4]), 16, 16)
	return rune(v), err == nil
}

// validScalar reports whether b is a JSON number, true, false or null.
func validScalar(b []byte) bool {
	switch string(b) {
	case "true", "false", "null":
		return true
	}
	return validNumber(b)
}

// validNumber reports whether b is a number in JSON's grammar.
func validNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	return i == len(b)
}
