package fingerprint

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
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
	// text is a number's literal or a string, decoded. For a container it
	// is its children, a run of tree.kids: a node is then 20 bytes, not
	// 28, and a change's nodes are written and read in fewer cache lines.
	text span
	name span // decoded member name, for members of an object
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
	nodes []node
	kids  []int32 // children of containers, contiguous per container
	stack []int32 // children of the containers still open
	open  []frame // the containers being read, innermost last
	text  []byte  // decoded strings that needed unescaping
	final bool    // src is all the input there is
	// sortFrom is the depth from which object members are sorted.
	sortFrom int
}

// frame is a container being read.
type frame struct {
	closing byte // '}' or ']'
	base    int  // where its children begin in tree.stack
	name    span // its member name in the enclosing object
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
	if n = skipSpace(src, n); n != len(src) {
		return none, t.errorAt(n, "unexpected %q after value", src[n])
	}
	return root, nil
}

// parsePrefix reads the JSON value at the start of src and returns its root
// and how many bytes it took. When src ends inside the value it returns
// errNeedMore, unless final says no more input follows. Objects from depth
// sortFrom on (the root is depth 1) have their members sorted; shallower
// ones keep input order.
//
// It is one loop over the values, the open containers kept in t.open
// rather than on the call stack: a change is mostly short names, strings
// and numbers, and a recursive call per value, with the position kept in
// the tree, cost about a sixth of the parse. For the same reason the usual
// strings and literals are read by small loops inlined here (plainEnd,
// plainInt, plainWord), and str and literal are called for the others.
func (t *tree) parsePrefix(src []byte, final bool, sortFrom int) (int32, int, error) {
	t.src, t.final, t.sortFrom = src, final, sortFrom
	t.nodes, t.kids, t.stack, t.open, t.text = t.nodes[:0], t.kids[:0], t.stack[:0], t.open[:0], t.text[:0]
	pos := 0
	member := false // an object member comes next: a name and a colon first
	var name span   // the member name of the value read next
	var err error
	for {
		if member {
			if pos = skipSpace(src, pos); pos >= len(src) {
				return none, 0, t.end(pos)
			}
			if src[pos] != '"' {
				return none, 0, t.errorAt(pos, "expected member name")
			}
			if end := plainEnd(src, pos); end >= 0 {
				name, pos = span{uint32(pos + 1), uint32(end - pos - 1)}, end+1
			} else if name, pos, err = t.str(pos); err != nil {
				return none, 0, err
			}
			if pos = skipSpace(src, pos); pos >= len(src) {
				return none, 0, t.end(pos)
			}
			if src[pos] != ':' {
				return none, 0, t.errorAt(pos, "expected ':' after member name")
			}
			pos++
		}
		// A value starts at pos.
		pos = skipSpace(src, pos)
		if pos >= len(src) {
			return none, 0, t.end(pos)
		}
		var v int32
		switch c := src[pos]; c {
		case '{', '[':
			if len(t.open) >= maxDepth {
				return none, 0, errDepth
			}
			closing := c + 2 // '{'+2 == '}', '['+2 == ']'
			t.open = append(t.open, frame{closing: closing, base: len(t.stack), name: name})
			if pos = skipSpace(src, pos+1); pos >= len(src) {
				return none, 0, t.end(pos)
			}
			if src[pos] != closing {
				// The first element follows.
				member, name = closing == '}', span{}
				continue
			}
			// The container is empty: it is closed below.
			v = none
		case '"':
			var s span
			if end := plainEnd(src, pos); end >= 0 {
				s, pos = span{uint32(pos + 1), uint32(end - pos - 1)}, end+1
			} else if s, pos, err = t.str(pos); err != nil {
				return none, 0, err
			}
			v = t.add(kindString, s, name)
		default:
			if end := plainInt(src, pos); end >= 0 {
				v, pos = t.add(kindNumber, span{uint32(pos), uint32(end - pos)}, name), end
			} else if k, end := plainWord(src, pos); end >= 0 {
				v, pos = t.add(k, span{}, name), end
			} else if v, pos, err = t.literal(pos, name); err != nil {
				return none, 0, err
			}
		}
		// v is complete: it is the next child of the innermost open
		// container, which then goes on to another element or ends, and
		// is then complete itself. (v is none when an empty container was
		// opened: it ends at pos.)
		for {
			if v != none {
				if len(t.open) == 0 {
					return v, pos, nil
				}
				t.stack = append(t.stack, v)
				if pos = skipSpace(src, pos); pos >= len(src) {
					return none, 0, t.end(pos)
				}
			}
			f := &t.open[len(t.open)-1]
			c := src[pos]
			if c == ',' {
				pos++
				member, name = f.closing == '}', span{}
				break
			}
			if c != f.closing {
				return none, 0, t.errorAt(pos, "expected ',' or %q", f.closing)
			}
			pos++
			// The container ends: its children move from the stack into
			// kids, and its node is added. (This is the one place a
			// container ends: it is written out here, not called.)
			kids := t.stack[f.base:]
			k := kindArray
			if f.closing == '}' {
				k = kindObject
				if len(t.open) >= sortFrom {
					t.sortMembers(kids)
				}
			}
			run := span{uint32(len(t.kids)), uint32(len(kids))}
			t.kids = append(t.kids, kids...)
			t.stack = t.stack[:f.base]
			v = t.add(k, run, f.name)
			t.open = t.open[:len(t.open)-1]
		}
	}
}

// end is the error for src ending inside a value, at pos.
func (t *tree) end(pos int) error {
	if t.final {
		return t.errorAt(pos, "unexpected end of input")
	}
	return errNeedMore
}

func (t *tree) errorAt(pos int, format string, args ...any) error {
	return fmt.Errorf("invalid JSON at byte %d of the change: %s", pos, fmt.Sprintf(format, args...))
}

// skipSpace returns the position of the first byte from pos on that is not
// whitespace.
func skipSpace(src []byte, pos int) int {
	// Terraform writes no whitespace: the usual case returns at once.
	if pos < len(src) && src[pos] > ' ' {
		return pos
	}
	for pos < len(src) {
		switch src[pos] {
		case ' ', '\n', '\r', '\t':
			pos++
		default:
			return pos
		}
	}
	return pos
}

// add appends a node and returns its index. It writes the node's fields
// in place: a node composed on the stack and copied in was read back with
// wide loads across its narrow stores, which stalls store forwarding.
func (t *tree) add(k kind, text, name span) int32 {
	i := len(t.nodes)
	if i == cap(t.nodes) {
		t.nodes = append(t.nodes, node{})[:i] // room for one more
	}
	t.nodes = t.nodes[:i+1]
	nd := &t.nodes[i]
	nd.kind, nd.text, nd.name = k, text, name
	return int32(i)
}

// plainInt returns where the number at pos ends when it is a plain integer
// (digits, no leading zero, sign, fraction or exponent) and a byte that
// ends a literal follows it, else -1. Most numbers are: this loop, inlined
// where values are read, saves them a call of literal, which reads the
// others, a literal at the end of the input and what is malformed.
func plainInt(src []byte, pos int) int {
	j := pos
	for j < len(src) && src[j]-'0' <= 9 {
		j++
	}
	if j == pos || j == len(src) || byteClass[src[j]] == clsOther || src[pos] == '0' && j > pos+1 {
		return -1
	}
	return j
}

// plainWord returns the kind of the true, false or null at pos and where it
// ends, when a byte that ends a literal follows it, else end -1. Like
// plainInt, it saves the usual literals a call of literal.
func plainWord(src []byte, pos int) (kind, int) {
	k, n := kindNull, 4
	switch src[pos] {
	case 't':
		k = kindTrue
	case 'f':
		k, n = kindFalse, 5
	}
	end := pos + n
	if end >= len(src) || string(src[pos:end]) != words[k] || byteClass[src[end]] == clsOther {
		return 0, -1
	}
	return k, end
}

var words = [...]string{kindNull: "null", kindFalse: "false", kindTrue: "true"}

// literal reads a number, true, false or null at pos into a node named
// name. It returns the node and where the literal ends.
func (t *tree) literal(pos int, name span) (int32, int, error) {
	src := t.src
	start := pos
	for pos < len(src) && byteClass[src[pos]] == clsOther {
		pos++
	}
	if pos == len(src) && !t.final {
		return none, 0, errNeedMore
	}
	lit := src[start:pos]
	switch {
	case string(lit) == "null":
		return t.add(kindNull, span{}, name), pos, nil
	case string(lit) == "true":
		return t.add(kindTrue, span{}, name), pos, nil
	case string(lit) == "false":
		return t.add(kindFalse, span{}, name), pos, nil
	case validNumber(lit):
		return t.add(kindNumber, span{uint32(start), uint32(len(lit))}, name), pos, nil
	}
	if len(lit) == 0 {
		return none, 0, t.errorAt(start, "unexpected %q", src[start])
	}
	// The literal is not echoed: malformed or not, it may be a value.
	return none, 0, t.errorAt(start, "invalid literal of %d bytes", len(lit))
}

// plainEnd returns where the string at pos ends (its closing quote) when it
// is short and has no escape, else -1. Most names and strings are: this
// loop, inlined where they are read, saves them a call of str.
func plainEnd(src []byte, pos int) int {
	for j := pos + 1; j < len(src) && j <= pos+32; j++ {
		if c := src[j]; c == '"' {
			return j
		} else if c == '\\' {
			break
		}
	}
	return -1
}

// str reads the string at pos that plainEnd did not, a long one or one
// with escapes, and returns it decoded, and where it ends.
func (t *tree) str(pos int) (span, int, error) {
	src := t.src
	start := pos + 1
	i := bytes.IndexByte(src[start:], '"')
	if i < 0 {
		return span{}, 0, t.end(pos)
	}
	esc := bytes.IndexByte(src[start:start+i], '\\')
	if esc < 0 {
		return span{uint32(start), uint32(i)}, start + i + 1, nil
	}
	// Find the real closing quote, from the first backslash on, then
	// decode the escapes.
	end := start + esc
	for {
		if end >= len(src) {
			return span{}, 0, t.end(pos)
		}
		c := src[end]
		if c == '"' {
			break
		}
		if c == '\\' {
			end++
		}
		end++
	}
	off := len(t.text)
	var err error
	t.text, err = appendUnescaped(t.text, src[start:end])
	if err != nil {
		return span{}, 0, t.errorAt(pos, "%v", err)
	}
	return span{uint32(off) | inText, uint32(len(t.text) - off)}, end + 1, nil
}

// sortMembers sorts the members of an object by name, keeping the order of
// equal names. Terraform writes objects sorted, so this is mostly a check.
func (t *tree) sortMembers(members []int32) {
	for i := 1; i < len(members); i++ {
		if string(t.nameOf(members[i-1])) > string(t.nameOf(members[i])) {
			slices.SortStableFunc(members, t.byName)
			return
		}
	}
}

func (t *tree) byName(a, b int32) int {
	return bytes.Compare(t.nameOf(a), t.nameOf(b))
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
	return t.kids[nd.text.off : nd.text.off+nd.text.n]
}

// size returns how many children node i has; it must be a container.
func (t *tree) size(i int32) int { return int(t.nodes[i].text.n) }

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
	// The bytes before the first backslash go in one copy: in an address
	// such as module.m.x.r["k"], they are most of the string.
	i := bytes.IndexByte(raw, '\\')
	if i < 0 {
		return append(dst, raw...), nil
	}
	dst = append(dst, raw[:i]...)
	for ; i < len(raw); i++ {
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

// hex4 decodes the four hex digits that b begins with.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
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
