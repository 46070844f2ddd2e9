package modulelint

import (
	"fmt"
	"slices"
	"strings"

	"github.com/zclconf/go-cty/cty"

	"github.com/captf/captf/internal/modulecontract"
)

// judge says what is wrong with an output's static value (see static) for
// a value of kind k, or "" when nothing the text tells is wrong. It
// follows what the runner accepts (internal/runner: endpoint.go,
// health.go).
func judge(k modulecontract.Kind, v cty.Value) string {
	if unjudged(v) {
		return ""
	}
	t := v.Type()
	switch k {
	case modulecontract.KindString:
		return want(t, t == cty.String)
	case modulecontract.KindNumber:
		return want(t, t == cty.Number)
	case modulecontract.KindBool:
		return want(t, t == cty.Bool)
	case modulecontract.KindObject:
		return want(t, objectLike(t))
	case modulecontract.KindPort:
		return port(v)
	case modulecontract.KindStringList:
		if !listLike(t) {
			return "the value is " + describe(t)
		}
		for _, e := range listEntries(v) {
			if !unjudged(e.v) && e.v.Type() != cty.String {
				return e.label + " is " + describe(e.v.Type())
			}
		}
	case modulecontract.KindStringMap:
		if !objectLike(t) {
			return "the value is " + describe(t)
		}
		for _, e := range objectEntries(v, "entry") {
			if !unjudged(e.v) && e.v.Type() != cty.String {
				return e.label + " is " + describe(e.v.Type())
			}
		}
	case modulecontract.KindHealth:
		return health(v)
	case modulecontract.KindFailureDomains:
		return failureDomains(v)
	case modulecontract.KindAddresses:
		return addresses(v)
	}
	return ""
}

// unjudged: the text does not tell v's type, or v is null (which the
// runner reads as an output not set).
func unjudged(v cty.Value) bool {
	return v.Type() == cty.DynamicPseudoType || (v.IsKnown() && v.IsNull())
}

func want(t cty.Type, ok bool) string {
	if ok {
		return ""
	}
	return "the value is " + describe(t)
}

// describe names a type as a module author thinks of it: a tuple written
// out is a list, an object is an object whatever its attributes.
func describe(t cty.Type) string {
	switch {
	case t == cty.String:
		return "a string"
	case t == cty.Number:
		return "a number"
	case t == cty.Bool:
		return "a bool"
	case listLike(t):
		return "a list"
	case objectLike(t):
		return "an object"
	}
	return t.FriendlyName()
}

func listLike(t cty.Type) bool {
	return t.IsListType() || t.IsSetType() || t.IsTupleType()
}

func objectLike(t cty.Type) bool {
	return t.IsObjectType() || t.IsMapType()
}

// entry is one element of a list or object value, named for a message.
type entry struct {
	label string
	v     cty.Value
}

// listEntries are the elements of a list-like v. An unknown list of known
// element type stands for its entries with one unknown element.
func listEntries(v cty.Value) []entry {
	t := v.Type()
	var out []entry
	switch {
	case t.IsTupleType() && (!v.IsKnown() || v.IsNull()):
		for i, et := range t.TupleElementTypes() {
			out = append(out, entry{fmt.Sprintf("entry %d", i), cty.UnknownVal(et)})
		}
	case !v.IsKnown() || v.IsNull():
		out = append(out, entry{"each entry", cty.UnknownVal(t.ElementType())})
	default:
		for i, e := range v.AsValueSlice() {
			out = append(out, entry{fmt.Sprintf("entry %d", i), e})
		}
	}
	return out
}

// objectEntries are the attributes of an object-like v, sorted by name,
// each labelled noun and its name.
func objectEntries(v cty.Value, noun string) []entry {
	t := v.Type()
	var out []entry
	switch {
	case t.IsObjectType() && (!v.IsKnown() || v.IsNull()):
		for name, at := range t.AttributeTypes() {
			out = append(out, entry{fmt.Sprintf("%s %q", noun, name), cty.UnknownVal(at)})
		}
	case !v.IsKnown() || v.IsNull():
		out = append(out, entry{"each " + noun, cty.UnknownVal(t.ElementType())})
	default:
		for name, e := range v.AsValueMap() {
			out = append(out, entry{fmt.Sprintf("%s %q", noun, name), e})
		}
	}
	slices.SortFunc(out, func(a, b entry) int { return strings.Compare(a.label, b.label) })
	return out
}

// field is the attribute name of an object-like v, and false when v is
// known not to have it.
func field(v cty.Value, name string) (cty.Value, bool) {
	t := v.Type()
	switch {
	case t.IsObjectType() && !t.HasAttribute(name):
		return cty.NilVal, false
	case t.IsObjectType() && (!v.IsKnown() || v.IsNull()):
		return cty.UnknownVal(t.AttributeType(name)), true
	case t.IsObjectType():
		return v.GetAttr(name), true
	case t.IsMapType() && v.IsKnown() && !v.IsNull():
		k := cty.StringVal(name)
		if v.HasIndex(k).True() {
			return v.Index(k), true
		}
		return cty.NilVal, false
	case t.IsMapType():
		return cty.UnknownVal(t.ElementType()), true
	}
	return cty.DynamicVal, true
}

// knownString says whether v is a known string, and what.
func knownString(v cty.Value) (string, bool) {
	if v.Type() != cty.String || !v.IsKnown() || v.IsNull() {
		return "", false
	}
	return v.AsString(), true
}

const maxPort = 65535

// port: a number or a string of digits, from 1 to 65535.
func port(v cty.Value) string {
	t := v.Type()
	switch {
	case t == cty.Number && v.IsKnown():
		if n, acc := v.AsBigFloat().Int64(); acc != 0 || n < 1 || n > maxPort {
			return fmt.Sprintf("the value is not a port number (1 to %d)", maxPort)
		}
	case t == cty.String:
		s, ok := knownString(v)
		if !ok {
			return ""
		}
		var n int
		for _, r := range s {
			if r < '0' || r > '9' || n > maxPort {
				return "the value is a string that is not a port number"
			}
			n = n*10 + int(r-'0')
		}
		if n < 1 || n > maxPort {
			return "the value is a string that is not a port number"
		}
	case t != cty.Number:
		return "the value is " + describe(t)
	}
	return ""
}

// healthWords are the states a module may report (docs/drift.md,
// Health); the manager reads any other word as unknown, which a literal
// would always be.
var healthWords = []string{modulecontract.HealthRunning, modulecontract.HealthPending, modulecontract.HealthFailed, modulecontract.HealthUnknown}

const notHealthWord = `not "running", "pending", "failed" or "unknown"`

// health: an object whose state is a health word, or the word alone.
func health(v cty.Value) string {
	t := v.Type()
	switch {
	case t == cty.String:
		if s, ok := knownString(v); ok && !slices.Contains(healthWords, s) {
			return "the value is " + notHealthWord
		}
	case objectLike(t):
		state, ok := field(v, "state")
		switch {
		case !ok:
			return "the value has no state"
		case unjudged(state):
		case state.Type() != cty.String:
			return "its state is " + describe(state.Type())
		default:
			if s, ok := knownString(state); ok && !slices.Contains(healthWords, s) {
				return "its state is " + notHealthWord
			}
		}
	default:
		return "the value is " + describe(t)
	}
	return ""
}

// failureDomains: a list of names, a list of objects with a name, or an
// object of objects by name (each object with control_plane, a bool, and
// attributes, strings).
func failureDomains(v cty.Value) string {
	t := v.Type()
	switch {
	case listLike(t):
		var names, objects int
		seen := map[string]bool{}
		for _, e := range listEntries(v) {
			et := e.v.Type()
			switch {
			case unjudged(e.v):
			case et == cty.String:
				names++
				if s, ok := knownString(e.v); ok {
					if p := domainName(e.label, s, seen); p != "" {
						return p
					}
				}
			case objectLike(et):
				objects++
				name, ok := field(e.v, "name")
				switch {
				case !ok:
					return e.label + " has no name"
				case unjudged(name):
				case name.Type() != cty.String:
					return e.label + "'s name is " + describe(name.Type())
				default:
					if s, ok := knownString(name); ok {
						if p := domainName(e.label, s, seen); p != "" {
							return p
						}
					}
				}
				if p := domain(e); p != "" {
					return p
				}
			default:
				return e.label + " is " + describe(et)
			}
		}
		if names > 0 && objects > 0 {
			return "the value mixes names and objects"
		}
	case objectLike(t):
		for _, e := range objectEntries(v, "entry") {
			switch {
			case unjudged(e.v):
			case !objectLike(e.v.Type()):
				return e.label + " is " + describe(e.v.Type())
			default:
				if p := domain(e); p != "" {
					return p
				}
			}
		}
	default:
		return "the value is " + describe(t)
	}
	return ""
}

// domainName checks a failure domain's name, known from the text, among
// those seen before it.
func domainName(label, name string, seen map[string]bool) string {
	switch {
	case name == "":
		return label + " has an empty name"
	case seen[name]:
		return label + " repeats a name"
	}
	seen[name] = true
	return ""
}

// domain checks a failure domain object's control_plane and attributes.
func domain(e entry) string {
	if cp, ok := field(e.v, "control_plane"); ok && !unjudged(cp) && cp.Type() != cty.Bool {
		return e.label + "'s control_plane is " + describe(cp.Type())
	}
	attrs, ok := field(e.v, "attributes")
	if !ok || unjudged(attrs) {
		return ""
	}
	if !objectLike(attrs.Type()) {
		return e.label + "'s attributes are " + describe(attrs.Type())
	}
	for _, a := range objectEntries(attrs, "attribute") {
		if !unjudged(a.v) && a.v.Type() != cty.String {
			return fmt.Sprintf("%s's %s is %s", e.label, a.label, describe(a.v.Type()))
		}
	}
	return ""
}

// addresses: a list of objects with a type (a Cluster API address type)
// and an address.
func addresses(v cty.Value) string {
	if !listLike(v.Type()) {
		return "the value is " + describe(v.Type())
	}
	for _, e := range listEntries(v) {
		if unjudged(e.v) {
			continue
		}
		if !objectLike(e.v.Type()) {
			return e.label + " is " + describe(e.v.Type())
		}
		typ, ok := field(e.v, "type")
		switch {
		case !ok:
			return e.label + " has no type"
		case unjudged(typ):
		case typ.Type() != cty.String:
			return e.label + "'s type is " + describe(typ.Type())
		default:
			if s, ok := knownString(typ); ok && !slices.Contains(modulecontract.AddressTypes, s) {
				return e.label + "'s type is not one of " + strings.Join(modulecontract.AddressTypes, ", ")
			}
		}
		addr, ok := field(e.v, "address")
		switch {
		case !ok:
			return e.label + " has no address"
		case !unjudged(addr) && addr.Type() != cty.String:
			return e.label + "'s address is " + describe(addr.Type())
		}
	}
	return ""
}
