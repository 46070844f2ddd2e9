package tfplan

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
	ctymsgpack "github.com/zclconf/go-cty/cty/msgpack"
)

// TestValueMatchesCty holds the decoder to go-cty, the library terraform
// encodes and writes values with: random values of random types are
// encoded with go-cty's msgpack, then written here and by go-cty's JSON
// under the rules of show -json (unknown values left out, the unknown
// and sensitivity markers), and must come out the same.
func TestValueMatchesCty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	d := newDecoder()
	for i := range 3000 {
		ty := randomType(rng, 0, true)
		orig := randomValue(rng, ty, 0)
		enc, err := ctymsgpack.Marshal(orig, ty)
		if err != nil {
			t.Fatalf("%d: marshal %#v: %v", i, orig, err)
		}
		// What terraform reads from the plan file and writes: the value
		// as go-cty decodes it (an integral float comes back an integer).
		v, err := ctymsgpack.Unmarshal(enc, ty)
		if err != nil {
			t.Fatal(err)
		}
		paths := randomPaths(rng, v, nil)
		got, err := d.decode(enc, ty)
		if err != nil {
			t.Fatalf("%d: decode %#v: %v", i, v, err)
		}
		for _, p := range paths {
			got.mark(steps(t, d, p))
		}
		got.hoist()

		want := []byte("null")
		if known := refOmitUnknowns(v); known != cty.NilVal {
			if want, err = ctyjson.Marshal(known, known.Type()); err != nil {
				t.Fatal(err)
			}
		}
		if g := got.appendJSON(nil); got.kind != kindUnknown && !bytes.Equal(g, want) {
			t.Fatalf("%d: value %#v\n got  %s\n want %s", i, v, g, want)
		}
		u := refUnknownAsBool(v)
		wantU, _ := ctyjson.Marshal(u, u.Type())
		if g := got.appendUnknown(nil); !sameMarker(t, g, wantU) {
			t.Fatalf("%d: unknown marker of %#v\n got  %s\n want %s", i, v, g, wantU)
		}
		s := refSensitiveAsBool(markPaths(v, paths))
		wantS, _ := ctyjson.Marshal(s, s.Type())
		if g := got.appendSensitive(nil); !sameMarker(t, g, wantS) {
			t.Fatalf("%d: sensitivity marker of %#v at %#v\n got  %s\n want %s", i, v, paths, g, wantS)
		}
	}
}

// TestNumbers holds number literals to go-cty's on the edges of each
// encoding: integers, uint64, float64 and the decimal text of numbers
// neither holds.
func TestNumbers(t *testing.T) {
	d := newDecoder()
	big1, _ := new(big.Float).SetPrec(512).SetString("123456789012345678901234567890.000000000000000000000000001")
	for _, n := range []cty.Value{
		cty.NumberIntVal(0), cty.NumberIntVal(-1), cty.NumberIntVal(math.MinInt64), cty.NumberIntVal(math.MaxInt64),
		cty.NumberUIntVal(math.MaxUint64), cty.NumberFloatVal(0.1), cty.NumberFloatVal(-2.5e-7), cty.NumberFloatVal(1e30),
		cty.NumberFloatVal(math.SmallestNonzeroFloat64), cty.NumberFloatVal(math.MaxFloat64), cty.NumberVal(big1),
		cty.MustParseNumberVal("1.10"), cty.MustParseNumberVal("1e400"),
	} {
		enc, err := ctymsgpack.Marshal(n, cty.Number)
		if err != nil {
			t.Fatal(err)
		}
		got, err := d.decode(enc, cty.Number)
		if err != nil {
			t.Fatalf("%s: %v", n.AsBigFloat(), err)
		}
		want, _ := ctyjson.Marshal(n, cty.Number)
		if !bytes.Equal(got.lit, want) {
			t.Errorf("%s: got %s, want %s", n.AsBigFloat().Text('g', 40), got.lit, want)
		}
	}
}

func steps(t *testing.T, d *decoder, p cty.Path) []step {
	var out []step
	for _, s := range p {
		switch s := s.(type) {
		case cty.GetAttrStep:
			out = append(out, step{name: s.Name})
		case cty.IndexStep:
			// As terraform writes a path step: the key by its own type.
			enc, err := ctymsgpack.Marshal(s.Key, s.Key.Type())
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, d.key(enc))
		}
	}
	return out
}

// sameMarker compares markers as the fingerprint reads them: only where
// they are true.
func sameMarker(t *testing.T, a, b []byte) bool {
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("marker %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("marker %s: %v", b, err)
	}
	return reflect.DeepEqual(trueOnly(x), trueOnly(y))
}

func trueOnly(v any) any {
	switch v := v.(type) {
	case bool:
		if v {
			return true
		}
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			if e := trueOnly(e); e != nil {
				out[k] = e
			}
		}
		if len(out) > 0 {
			return out
		}
	case []any:
		out := make([]any, len(v))
		last := -1
		for i, e := range v {
			if out[i] = trueOnly(e); out[i] != nil {
				last = i
			}
		}
		if last >= 0 {
			return out[:last+1]
		}
	}
	return nil
}

var primitives = []cty.Type{cty.String, cty.Number, cty.Bool}

// randomType returns a type; dyn allows the dynamic type in it, which a
// collection's element type cannot hold here (its elements would differ).
func randomType(rng *rand.Rand, depth int, dyn bool) cty.Type {
	if depth > 3 || rng.IntN(3) == 0 {
		if dyn && rng.IntN(8) == 0 {
			return cty.DynamicPseudoType
		}
		return primitives[rng.IntN(len(primitives))]
	}
	switch rng.IntN(6) {
	case 0:
		return cty.List(randomType(rng, depth+1, false))
	case 1:
		return cty.Set(randomType(rng, depth+1, false))
	case 2:
		return cty.Map(randomType(rng, depth+1, false))
	case 3:
		n := rng.IntN(3)
		ets := make([]cty.Type, n)
		for i := range ets {
			ets[i] = randomType(rng, depth+1, dyn)
		}
		return cty.Tuple(ets)
	}
	attrs := map[string]cty.Type{}
	for i := range rng.IntN(4) {
		attrs[fmt.Sprintf("a%d", i)] = randomType(rng, depth+1, dyn)
	}
	return cty.Object(attrs)
}

var strs = []string{"", "x", "<&>", "q\"\\", "line\nbreak\t", "\u2028\u2029", "é", "e\u0301", "\x01", "ключ"}

func randomValue(rng *rand.Rand, ty cty.Type, depth int) cty.Value {
	switch rng.IntN(12) {
	case 0:
		return cty.NullVal(ty)
	case 1:
		return cty.UnknownVal(ty)
	case 2:
		return cty.UnknownVal(ty).RefineNotNull()
	}
	switch {
	case ty == cty.DynamicPseudoType:
		return randomValue(rng, randomType(rng, depth+1, true), depth+1)
	case ty == cty.String:
		return cty.StringVal(strs[rng.IntN(len(strs))])
	case ty == cty.Bool:
		return cty.BoolVal(rng.IntN(2) == 0)
	case ty == cty.Number:
		switch rng.IntN(4) {
		case 0:
			return cty.NumberIntVal(rng.Int64() - math.MaxInt64/2)
		case 1:
			return cty.NumberFloatVal(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(40)-20)))
		case 2:
			return cty.MustParseNumberVal(fmt.Sprintf("%d.%d", rng.Int64(), rng.Int64()))
		}
		return cty.NumberIntVal(int64(rng.IntN(5)))
	case ty.IsListType(), ty.IsSetType():
		n := rng.IntN(4)
		if n == 0 {
			if ty.IsListType() {
				return cty.ListValEmpty(ty.ElementType())
			}
			return cty.SetValEmpty(ty.ElementType())
		}
		var vals []cty.Value
		for range n {
			vals = append(vals, randomValue(rng, ty.ElementType(), depth+1))
		}
		if ty.IsListType() {
			return cty.ListVal(vals)
		}
		return cty.SetVal(vals)
	case ty.IsMapType():
		n := rng.IntN(4)
		if n == 0 {
			return cty.MapValEmpty(ty.ElementType())
		}
		vals := map[string]cty.Value{}
		for range n {
			vals[strs[rng.IntN(len(strs))]] = randomValue(rng, ty.ElementType(), depth+1)
		}
		return cty.MapVal(vals)
	case ty.IsTupleType():
		var vals []cty.Value
		for _, et := range ty.TupleElementTypes() {
			vals = append(vals, randomValue(rng, et, depth+1))
		}
		return cty.TupleVal(vals)
	case ty.IsObjectType():
		vals := map[string]cty.Value{}
		for name, at := range ty.AttributeTypes() {
			vals[name] = randomValue(rng, at, depth+1)
		}
		return cty.ObjectVal(vals)
	}
	panic(ty.FriendlyName())
}

// randomPaths picks paths of v to mark sensitive, some ending at nothing.
func randomPaths(rng *rand.Rand, v cty.Value, base cty.Path) []cty.Path {
	var out []cty.Path
	if rng.IntN(6) == 0 {
		out = append(out, base.Copy())
	}
	if rng.IntN(20) == 0 {
		out = append(out, append(base.Copy(), cty.GetAttrStep{Name: "none"}))
	}
	if v.IsNull() || !v.IsKnown() {
		return out
	}
	ty := v.Type()
	if ty.IsObjectType() {
		for name := range ty.AttributeTypes() {
			out = append(out, randomPaths(rng, v.GetAttr(name), append(base.Copy(), cty.GetAttrStep{Name: name}))...)
		}
		return out
	}
	if ty.IsListType() || ty.IsSetType() || ty.IsMapType() || ty.IsTupleType() {
		for it := v.ElementIterator(); it.Next(); {
			k, e := it.Element()
			if ty.IsSetType() {
				// terraform records no path into a set: cty keeps the
				// marks of a set's elements on the set.
				break
			}
			out = append(out, randomPaths(rng, e, append(base.Copy(), cty.IndexStep{Key: k}))...)
		}
	}
	return out
}

// The reference functions below are terraform's jsonplan rules written
// over cty values, as show -json applies them.

func markPaths(v cty.Value, paths []cty.Path) cty.Value {
	if len(paths) == 0 {
		return v
	}
	pvm := make([]cty.PathValueMarks, len(paths))
	for i, p := range paths {
		pvm[i] = cty.PathValueMarks{Path: p, Marks: cty.NewValueMarks("sensitive")}
	}
	return v.MarkWithPaths(pvm)
}

func refOmitUnknowns(val cty.Value) cty.Value {
	ty := val.Type()
	switch {
	case val.IsNull():
		return val
	case !val.IsKnown():
		return cty.NilVal
	case ty.IsPrimitiveType():
		return val
	case ty.IsListType() || ty.IsTupleType() || ty.IsSetType():
		var vals []cty.Value
		for it := val.ElementIterator(); it.Next(); {
			_, v := it.Element()
			if nv := refOmitUnknowns(v); nv != cty.NilVal {
				vals = append(vals, nv)
			} else {
				vals = append(vals, cty.NullVal(v.Type()))
			}
		}
		return cty.TupleVal(vals)
	}
	vals := map[string]cty.Value{}
	for it := val.ElementIterator(); it.Next(); {
		k, v := it.Element()
		if nv := refOmitUnknowns(v); nv != cty.NilVal {
			vals[k.AsString()] = nv
		}
	}
	return cty.ObjectVal(vals)
}

func refUnknownAsBool(val cty.Value) cty.Value {
	ty := val.Type()
	switch {
	case val.IsNull():
		return cty.False
	case !val.IsKnown():
		return cty.True
	case ty.IsPrimitiveType():
		return cty.False
	case ty.IsListType() || ty.IsTupleType() || ty.IsSetType():
		var vals []cty.Value
		for it := val.ElementIterator(); it.Next(); {
			_, v := it.Element()
			vals = append(vals, refUnknownAsBool(v))
		}
		return cty.TupleVal(vals)
	}
	vals := map[string]cty.Value{}
	for it := val.ElementIterator(); it.Next(); {
		k, v := it.Element()
		if u := refUnknownAsBool(v); !u.RawEquals(cty.False) {
			vals[k.AsString()] = u
		}
	}
	return cty.ObjectVal(vals)
}

func refSensitiveAsBool(val cty.Value) cty.Value {
	if val.HasMark("sensitive") {
		return cty.True
	}
	ty := val.Type()
	switch {
	case val.IsNull(), ty.IsPrimitiveType(), ty.Equals(cty.DynamicPseudoType), !val.IsKnown():
		return cty.False
	case ty.IsListType() || ty.IsTupleType() || ty.IsSetType():
		var vals []cty.Value
		for it := val.ElementIterator(); it.Next(); {
			_, v := it.Element()
			vals = append(vals, refSensitiveAsBool(v))
		}
		return cty.TupleVal(vals)
	}
	vals := map[string]cty.Value{}
	for it := val.ElementIterator(); it.Next(); {
		k, v := it.Element()
		if s := refSensitiveAsBool(v); !s.RawEquals(cty.False) {
			vals[k.AsString()] = s
		}
	}
	return cty.ObjectVal(vals)
}
