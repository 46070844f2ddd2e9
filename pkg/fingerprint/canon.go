package fingerprint

import (
	"bytes"
	"strconv"
)

// Canonical JSON, as spec 000 defines it for the effect of a change: object
// members sorted by name (the tree sorts them when it parses), no
// whitespace, numbers as the literal Terraform wrote, strings decoded and
// written again with the fewest escapes.

// appendValue writes node i of t in canonical form.
func (t *tree) appendValue(dst []byte, i int32) []byte {
	nd := &t.nodes[i]
	switch nd.kind {
	case kindNull:
		return append(dst, "null"...)
	case kindTrue:
		return append(dst, "true"...)
	case kindFalse:
		return append(dst, "false"...)
	case kindNumber:
		return append(dst, t.bytes(nd.text)...)
	case kindString:
		return appendString(dst, t.bytes(nd.text))
	case kindObject:
		dst = append(dst, '{')
		for j, m := range t.children(i) {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = appendString(dst, t.nameOf(m))
			dst = append(dst, ':')
			dst = t.appendValue(dst, m)
		}
		return append(dst, '}')
	default:
		dst = append(dst, '[')
		for j, e := range t.children(i) {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = t.appendValue(dst, e)
		}
		return append(dst, ']')
	}
}

// needsEscape marks the bytes a canonical string escapes.
var needsEscape = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// appendString writes s as a JSON string: '"' and '\\' escaped, control
// characters as \u00XX (\n, \r, \t short), everything else as UTF-8 bytes
// unchanged. Invalid UTF-8 is kept byte for byte so no two decoded strings
// share a spelling.
func appendString(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !needsEscape[c] {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, `\u00`...)
			dst = append(dst, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// equalValue reports whether nodes a of t and b of t are the same JSON value
// in canonical form. Either may be none (absent); absent equals only absent.
func (t *tree) equalValue(a, b int32) bool {
	if a == none || b == none {
		return a == b
	}
	na, nb := &t.nodes[a], &t.nodes[b]
	if na.kind != nb.kind {
		return false
	}
	switch na.kind {
	case kindNumber, kindString:
		return bytes.Equal(t.bytes(na.text), t.bytes(nb.text))
	case kindObject, kindArray:
		ka, kb := t.children(a), t.children(b)
		if len(ka) != len(kb) {
			return false
		}
		for j := range ka {
			if na.kind == kindObject && !bytes.Equal(t.nameOf(ka[j]), t.nameOf(kb[j])) {
				return false
			}
			if !t.equalValue(ka[j], kb[j]) {
				return false
			}
		}
	}
	return true
}

// Markers. after_unknown, before_sensitive and after_sensitive mirror a
// value with true where a part is unknown or sensitive. false, {}, [] and an
// absent marker all say "nothing marked" and must hash alike, so a marker is
// normalised before it is written: true stays, containers keep only their
// marked parts, and an array keeps positions (unmarked ones as false) up to
// its last marked element.

// markEmpty reports whether marker i marks nothing.
func (t *tree) markEmpty(i int32) bool {
	if i == none {
		return true
	}
	switch t.nodes[i].kind {
	case kindTrue:
		return false
	case kindObject, kindArray:
		for _, k := range t.children(i) {
			if !t.markEmpty(k) {
				return false
			}
		}
	}
	return true
}

// appendMarker writes the normalised marker i; it must not be empty.
func (t *tree) appendMarker(dst []byte, i int32) []byte {
	nd := &t.nodes[i]
	switch nd.kind {
	case kindObject:
		dst = append(dst, '{')
		first := true
		for _, m := range t.children(i) {
			if t.markEmpty(m) {
				continue
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = appendString(dst, t.nameOf(m))
			dst = append(dst, ':')
			dst = t.appendMarker(dst, m)
		}
		return append(dst, '}')
	case kindArray:
		kids := t.children(i)
		last := len(kids) - 1
		for last >= 0 && t.markEmpty(kids[last]) {
			last--
		}
		dst = append(dst, '[')
		for j, e := range kids[:last+1] {
			if j > 0 {
				dst = append(dst, ',')
			}
			if t.markEmpty(e) {
				dst = append(dst, "false"...)
			} else {
				dst = t.appendMarker(dst, e)
			}
		}
		return append(dst, ']')
	default:
		return append(dst, "true"...)
	}
}

// equalMarker reports whether two markers, with inherited marks, mark the
// same parts.
func (t *tree) equalMarker(a int32, aInherited bool, b int32, bInherited bool) bool {
	aAll := aInherited || t.isTrue(a)
	bAll := bInherited || t.isTrue(b)
	if aAll || bAll {
		return aAll == bAll
	}
	ae, be := t.markEmpty(a), t.markEmpty(b)
	if ae || be {
		return ae == be
	}
	// Both are non-empty containers: compare normalised forms.
	return bytes.Equal(t.appendMarker(nil, a), t.appendMarker(nil, b))
}

// appendKey writes ,"name": (or just "name": when first); name needs no
// escaping.
func appendKey(dst []byte, first bool, name string) []byte {
	if !first {
		dst = append(dst, ',')
	}
	dst = append(dst, '"')
	dst = append(dst, name...)
	return append(dst, '"', ':')
}

func appendIndex(dst []byte, i int) []byte {
	return strconv.AppendInt(dst, int64(i), 10)
}
