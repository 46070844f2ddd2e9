package tfplan

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
	"github.com/zclconf/go-cty/cty"
	"golang.org/x/text/unicode/norm"
)

// A value as terraform encodes it in a plan file: msgpack laid out by a
// cty type (go-cty's cty/msgpack), decoded here into a small tree. Going
// through cty.Value itself costs ten times as much, mostly in parsing the
// type of every dynamic value again; the tree keeps what show -json
// writes: JSON literals, sequence order as terraform wrote it, and the
// sensitive marks.
type value struct {
	kind kind
	// set is a sequence that was a cty set: a mark on anything inside it
	// marks the set, as cty moves marks from set elements onto the set.
	set bool
	// sensitive is the value's mark.
	sensitive bool
	// lit is a primitive's JSON.
	lit []byte
	// keys are an object's or a map's keys, elems their values or a
	// sequence's elements.
	keys  []string
	elems []*value
}

type kind uint8

const (
	kindNull kind = iota
	kindUnknown
	kindPrimitive
	kindSeq
	kindObject
)

// decoder decodes values, keeping the types of dynamic values it parsed.
type decoder struct {
	types map[string]cty.Type
	dec   *msgpack.Decoder
	rd    bytes.Reader
}

func newDecoder() *decoder {
	d := &decoder{types: map[string]cty.Type{}}
	d.dec = msgpack.NewDecoder(&d.rd)
	return d
}

// decode reads b, a msgpack value of type ty.
func (d *decoder) decode(b []byte, ty cty.Type) (*value, error) {
	d.rd.Reset(b)
	d.dec.Reset(&d.rd)
	v, err := d.value(ty, 0)
	if err != nil {
		return nil, err
	}
	if d.rd.Len() > 0 {
		return nil, errors.New("bytes after the value")
	}
	return v, nil
}

// maxDepth bounds the nesting of a value.
const maxDepth = 256

func (d *decoder) value(ty cty.Type, depth int) (*value, error) {
	if depth > maxDepth {
		return nil, errors.New("value nested too deep")
	}
	code, err := d.dec.PeekCode()
	if err != nil {
		return nil, err
	}
	if msgpcode.IsExt(code) {
		// An unknown value, with or without refinements (which show
		// -json does not write).
		if _, n, err := d.dec.DecodeExtHeader(); err != nil {
			return nil, err
		} else if _, err := d.rd.Seek(int64(n), 1); err != nil {
			return nil, err
		}
		return &value{kind: kindUnknown}, nil
	}
	if ty == cty.DynamicPseudoType {
		return d.dynamic(depth)
	}
	if code == msgpcode.Nil {
		return &value{kind: kindNull}, d.dec.Skip()
	}
	switch {
	case ty == cty.String:
		s, err := d.dec.DecodeString()
		if err != nil {
			return nil, err
		}
		return &value{kind: kindPrimitive, lit: appendJSONString(nil, s)}, nil
	case ty == cty.Bool:
		b, err := d.dec.DecodeBool()
		if err != nil {
			return nil, err
		}
		return &value{kind: kindPrimitive, lit: strconv.AppendBool(nil, b)}, nil
	case ty == cty.Number:
		lit, err := d.number(code)
		if err != nil {
			return nil, err
		}
		return &value{kind: kindPrimitive, lit: lit}, nil
	case ty.IsListType(), ty.IsSetType():
		n, err := d.dec.DecodeArrayLen()
		if err != nil || n < 0 {
			return &value{kind: kindNull}, err
		}
		v := &value{kind: kindSeq, set: ty.IsSetType(), elems: make([]*value, n)}
		for i := range n {
			if v.elems[i], err = d.value(ty.ElementType(), depth+1); err != nil {
				return nil, err
			}
		}
		return v, nil
	case ty.IsTupleType():
		n, err := d.dec.DecodeArrayLen()
		if err != nil || n < 0 {
			return &value{kind: kindNull}, err
		}
		etys := ty.TupleElementTypes()
		if n != len(etys) && n != 0 {
			return nil, fmt.Errorf("a tuple of %d elements where %d are required", n, len(etys))
		}
		v := &value{kind: kindSeq, elems: make([]*value, n)}
		for i := range n {
			if v.elems[i], err = d.value(etys[i], depth+1); err != nil {
				return nil, err
			}
		}
		return v, nil
	case ty.IsMapType(), ty.IsObjectType():
		n, err := d.dec.DecodeMapLen()
		if err != nil || n < 0 {
			return &value{kind: kindNull}, err
		}
		obj := ty.IsObjectType()
		if obj && n != 0 && n != len(ty.AttributeTypes()) {
			return nil, fmt.Errorf("an object of %d attributes where %d are required", n, len(ty.AttributeTypes()))
		}
		v := &value{kind: kindObject, keys: make([]string, n), elems: make([]*value, n)}
		for i := range n {
			k, err := d.dec.DecodeString()
			if err != nil {
				return nil, err
			}
			var ety cty.Type
			if obj {
				var ok bool
				if ety, ok = ty.AttributeTypes()[k]; !ok {
					return nil, fmt.Errorf("attribute %q is not in the schema", k)
				}
			} else {
				ety = ty.ElementType()
			}
			v.keys[i] = nfc(k)
			if v.elems[i], err = d.value(ety, depth+1); err != nil {
				return nil, err
			}
		}
		return v, nil
	}
	return nil, fmt.Errorf("a value of type %s", ty.FriendlyName())
}

// key reads a path's element key, encoded by its own type: a map key (a
// string), an index (a number), or a set element (anything else, or a
// string or a number too), where mark stops.
func (d *decoder) key(b []byte) step {
	d.rd.Reset(b)
	d.dec.Reset(&d.rd)
	st := step{isIndex: true, index: -1}
	code, err := d.dec.PeekCode()
	switch {
	case err != nil:
	case msgpcode.IsString(code):
		if k, err := d.dec.DecodeString(); err == nil {
			st.key = nfc(k)
		}
	case msgpcode.IsFixedNum(code), code == msgpcode.Int8, code == msgpcode.Int16, code == msgpcode.Int32, code == msgpcode.Int64,
		code == msgpcode.Uint8, code == msgpcode.Uint16, code == msgpcode.Uint32, code == msgpcode.Uint64:
		if n, err := d.dec.DecodeInt64(); err == nil && n >= 0 && n <= math.MaxInt32 {
			st.index = int(n)
		}
	}
	return st
}

// dynamic reads a value of the dynamic type: its type's JSON, then the
// value.
func (d *decoder) dynamic(depth int) (*value, error) {
	n, err := d.dec.DecodeArrayLen()
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return &value{kind: kindNull}, nil
	}
	if n != 2 {
		return nil, errors.New("a dynamic value of other than two elements")
	}
	tj, err := d.dec.DecodeBytes()
	if err != nil {
		return nil, err
	}
	ty, ok := d.types[string(tj)]
	if !ok {
		if err := ty.UnmarshalJSON(tj); err != nil {
			return nil, err
		}
		d.types[string(tj)] = ty
	}
	return d.value(ty, depth+1)
}

// number reads a number as go-cty writes it (an integer, a float64, or
// the decimal text of one neither holds) and returns the JSON go-cty
// writes for it: the shortest decimal that reads back as the same number.
func (d *decoder) number(code byte) ([]byte, error) {
	switch {
	case msgpcode.IsFixedNum(code), code == msgpcode.Int8, code == msgpcode.Int16, code == msgpcode.Int32, code == msgpcode.Int64:
		n, err := d.dec.DecodeInt64()
		return strconv.AppendInt(nil, n, 10), err
	case code == msgpcode.Uint8, code == msgpcode.Uint16, code == msgpcode.Uint32, code == msgpcode.Uint64:
		n, err := d.dec.DecodeUint64()
		return strconv.AppendUint(nil, n, 10), err
	case code == msgpcode.Float, code == msgpcode.Double:
		f, err := d.dec.DecodeFloat64()
		if err != nil {
			return nil, err
		}
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, errors.New("an infinite number, which JSON cannot hold")
		}
		// As go-cty holds it (a big.Float of 53 bits) and writes it: for
		// a subnormal this is not strconv's shortest form.
		return big.NewFloat(f).Append(nil, 'f', -1), nil
	}
	s, err := d.dec.DecodeString()
	if err != nil {
		return nil, err
	}
	v, err := cty.ParseNumberVal(s)
	if err != nil {
		return nil, err
	}
	return []byte(v.AsBigFloat().Text('f', -1)), nil
}

// nfc is s as cty holds every string: valid UTF-8 in normal form C.
func nfc(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii || (utf8.ValidString(s) && norm.NFC.IsNormalString(s)) {
		return s
	}
	return norm.NFC.String(s)
}

// wholly says whether v has no unknown part.
func (v *value) wholly() bool {
	if v.kind == kindUnknown {
		return false
	}
	for _, e := range v.elems {
		if !e.wholly() {
			return false
		}
	}
	return true
}

// appendJSON writes v as show -json does: with its unknown parts left out
// of objects and null in sequences.
func (v *value) appendJSON(b []byte) []byte {
	switch v.kind {
	case kindPrimitive:
		return append(b, v.lit...)
	case kindSeq:
		b = append(b, '[')
		for i, e := range v.elems {
			if i > 0 {
				b = append(b, ',')
			}
			if e.kind == kindUnknown {
				b = append(b, "null"...)
			} else {
				b = e.appendJSON(b)
			}
		}
		return append(b, ']')
	case kindObject:
		b = append(b, '{')
		first := true
		for _, i := range v.sortedKeys() {
			e := v.elems[i]
			if e.kind == kindUnknown {
				continue
			}
			if !first {
				b = append(b, ',')
			}
			first = false
			b = appendJSONString(b, v.keys[i])
			b = append(b, ':')
			b = e.appendJSON(b)
		}
		return append(b, '}')
	}
	return append(b, "null"...)
}

// sortedKeys returns the indexes of v's keys in the order of the keys.
func (v *value) sortedKeys() []int {
	idx := make([]int, len(v.keys))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		switch {
		case v.keys[a] < v.keys[b]:
			return -1
		case v.keys[a] > v.keys[b]:
			return 1
		}
		return 0
	})
	return idx
}

// appendUnknown writes v's unknown marker: true where a value is unknown.
func (v *value) appendUnknown(b []byte) []byte {
	return v.appendMarker(b, func(v *value) bool { return v.kind == kindUnknown })
}

// appendSensitive writes v's sensitivity marker: true where v is marked.
func (v *value) appendSensitive(b []byte) []byte {
	return v.appendMarker(b, func(v *value) bool { return v.sensitive })
}

// appendMarker writes the marker of is: true where is holds, sequences in
// full, objects without the members that are scalars is does not hold for,
// false elsewhere, as show -json writes its markers.
func (v *value) appendMarker(b []byte, is func(*value) bool) []byte {
	if is(v) {
		return append(b, "true"...)
	}
	switch v.kind {
	case kindSeq:
		b = append(b, '[')
		for i, e := range v.elems {
			if i > 0 {
				b = append(b, ',')
			}
			b = e.appendMarker(b, is)
		}
		return append(b, ']')
	case kindObject:
		b = append(b, '{')
		first := true
		for _, i := range v.sortedKeys() {
			e := v.elems[i]
			if !is(e) && e.kind != kindObject && e.kind != kindSeq {
				continue
			}
			if !first {
				b = append(b, ',')
			}
			first = false
			b = appendJSONString(b, v.keys[i])
			b = append(b, ':')
			b = e.appendMarker(b, is)
		}
		return append(b, '}')
	}
	return append(b, "false"...)
}

// mark marks the value at path p sensitive. A path through a set marks
// the set; a path into a null or unknown value, or to nothing, marks
// nothing.
func (v *value) mark(p []step) {
	for len(p) > 0 {
		if v.set {
			// terraform records no path into a set: cty keeps the marks
			// of a set's elements on the set. Mark the set.
			v.sensitive = p[0].isIndex || v.sensitive
			return
		}
		var next *value
		switch v.kind {
		case kindObject:
			k := p[0].name
			if p[0].isIndex {
				k = p[0].key
			}
			next = v.member(k)
		case kindSeq:
			if p[0].isIndex && p[0].index >= 0 && p[0].index < len(v.elems) {
				next = v.elems[p[0].index]
			}
		}
		if next == nil {
			return
		}
		v, p = next, p[1:]
	}
	v.sensitive = true
}

// member is the value of an object's attribute or a map's key, or nil.
func (v *value) member(name string) *value {
	for i, k := range v.keys {
		if k == name {
			return v.elems[i]
		}
	}
	return nil
}

// hoist marks every set that holds a marked value, as cty does, and says
// whether v is or holds a marked value.
func (v *value) hoist() bool {
	any := v.sensitive
	for _, e := range v.elems {
		if e.hoist() {
			any = true
		}
	}
	if any && v.set {
		v.sensitive = true
	}
	return any
}

// step is one step of a path: an attribute name, or an element key (a map
// key or a sequence index).
type step struct {
	name    string
	isIndex bool
	key     string
	index   int
}

// appendJSONString writes s as encoding/json does, which go-cty's JSON
// uses: HTML characters and U+2028/U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	s = nfc(s)
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
