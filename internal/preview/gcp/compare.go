package gcp

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
)

// holds reports whether the live value holds what the manifest sets, as a
// subset at every depth: an object holds every field the manifest's sets
// (the API adds defaults and read-only fields: those never count), a list
// holds each element in order, and a scalar is equal. A string also
// equals a live string that ends with "/" and it (the API writes a
// reference as a full path or a self link), and a number equals a live
// number, or a string (how the API writes an int64), of the same value.
// A null, false, 0 or "" the manifest sets equals a field the API leaves
// out: Google's JSON leaves out a field at its default.
func holds(live, want any) bool {
	if live == nil && isZero(want) {
		return true
	}
	switch w := want.(type) {
	case nil:
		return live == nil
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return len(w) == 0 && live == nil
		}
		for k, v := range w {
			if !holds(l[k], v) {
				return false
			}
		}
		return true
	case []any:
		l, ok := live.([]any)
		if !ok {
			return len(w) == 0 && live == nil
		}
		if len(l) != len(w) {
			return false
		}
		for i := range w {
			if !holds(l[i], w[i]) {
				return false
			}
		}
		return true
	case string:
		l, ok := live.(string)
		return ok && (l == w || strings.HasSuffix(l, "/"+w))
	case bool:
		l, ok := live.(bool)
		return ok && l == w
	}
	wn, ok := number(want)
	if !ok {
		return false
	}
	ln, ok := number(live)
	return ok && ln.Cmp(wn) == 0
}

// number reads a number, or a string holding one, by its value.
func number(v any) (*big.Rat, bool) {
	var s string
	switch x := v.(type) {
	case json.Number:
		s = x.String()
	case string:
		s = x
	case int, int32, int64, uint64, float64:
		s = fmt.Sprint(x)
	default:
		return nil, false
	}
	r, ok := new(big.Rat).SetString(s)
	return r, ok
}

// isZero reports whether v is null, false, 0 or "".
func isZero(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case bool:
		return !x
	case string:
		return x == ""
	}
	n, ok := number(v)
	return ok && n.Sign() == 0
}
