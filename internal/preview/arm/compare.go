package arm

import (
	"slices"
	"strings"

	"github.com/captf/captf/internal/preview/fieldpath"
	"github.com/captf/captf/pkg/changeset"
)

// Tags captf stamps on every top-level resource it PUTs. OwnerTag's value
// is the step's component: prune deletes only resources that carry it.
// SecureTag holds the keyed digest (preview.KeyedDigest under the preview
// key) of the secure values the resource was PUT with, since ARM does not
// return a secure property on GET. Neither is ever compared.
const (
	OwnerTag  = "captf-owner"
	SecureTag = "captf-secure"
)

// path names one property of a resource body (fieldpath.Path). It is
// written in the PlainDollar syntax, since ARM property names such as
// $schema hold '$': the plan's attribute names and the secure-value digest
// kept in SecureTag hold what it writes, so it must not change.
type path fieldpath.Path

func (p path) String() string { return fieldpath.PlainDollar.Format(fieldpath.Path(p)) }

func (p path) child(seg any) path { return path(fieldpath.Path(p).Child(seg)) }

// change is one property that differs, or one a create declares.
type change struct {
	Path      path
	Before    any
	After     any
	HasBefore bool
	HasAfter  bool
	// Unknown: the new value is known only after apply.
	Unknown bool
	// Sensitive: neither value is ever shown.
	Sensitive bool
}

// attribute is the change as the document shows it.
func (c change) attribute() (changeset.Attribute, error) {
	a := changeset.Attribute{Name: c.Path.String(), Unknown: c.Unknown, Sensitive: c.Sensitive}
	if c.Sensitive {
		return a, nil
	}
	var err error
	if c.HasBefore {
		if a.Before, err = changeset.Canonical(c.Before); err != nil {
			return a, err
		}
	}
	if c.HasAfter && !c.Unknown {
		if a.After, err = changeset.Canonical(c.After); err != nil {
			return a, err
		}
	}
	return a, nil
}

// Noise rules: fields the server adds or rewrites, dropped from both sides
// before they are compared.
var (
	// serverFields are top-level fields of a GET answer ARM adds.
	serverFields = []string{"id", "name", "type", "etag", "systemData", "apiVersion"}
	// serverAnywhere are fields ARM adds at any depth.
	serverAnywhere = []string{"provisioningState"}
)

// withoutNoise returns a copy of a body without the server's fields and
// captf's own tags.
func withoutNoise(body map[string]any) map[string]any {
	out := make(map[string]any, len(body))
	for k, v := range body {
		if slices.ContainsFunc(serverFields, func(f string) bool { return strings.EqualFold(f, k) }) {
			continue
		}
		out[k] = dropAnywhere(v)
	}
	if tags, ok := out["tags"].(map[string]any); ok {
		clean := make(map[string]any, len(tags))
		for k, v := range tags {
			if !strings.EqualFold(k, OwnerTag) && !strings.EqualFold(k, SecureTag) {
				clean[k] = v
			}
		}
		out["tags"] = clean
	}
	return out
}

func dropAnywhere(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if slices.ContainsFunc(serverAnywhere, func(f string) bool { return strings.EqualFold(f, k) }) {
				continue
			}
			out[k] = dropAnywhere(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = dropAnywhere(e)
		}
		return out
	}
	return v
}

// secretLeaf is a secure value of a body, where it is.
type secretLeaf struct {
	Path  path
	Value any
}

// declared lists every property a body declares, for a create: its leaves
// (empty objects and arrays are leaves), secure ones sensitive, ones known
// only after apply unknown.
func declared(p path, v any, out *[]change) {
	switch x := v.(type) {
	case unknownValue:
		*out = append(*out, change{Path: p, Unknown: true, Sensitive: x.Sensitive})
	case secretValue:
		*out = append(*out, change{Path: p, Sensitive: true})
	case map[string]any:
		if len(x) == 0 {
			*out = append(*out, change{Path: p, After: x, HasAfter: true})
			return
		}
		for _, k := range sortedKeys(x) {
			declared(p.child(k), x[k], out)
		}
	case []any:
		if len(x) == 0 {
			*out = append(*out, change{Path: p, After: x, HasAfter: true})
			return
		}
		for i, e := range x {
			declared(p.child(i), e, out)
		}
	default:
		*out = append(*out, change{Path: p, After: v, HasAfter: true})
	}
}

// compare walks what the template declares against the live body, both
// without noise. Only declared properties are compared: a property the
// server adds (a default, a read-only value) never counts as a change.
// Secure values are not compared here; they go to secrets.
func compare(p path, want, live any, hasLive bool, out *[]change, secrets *[]secretLeaf) {
	switch w := want.(type) {
	case unknownValue:
		c := change{Path: p, Unknown: true, Sensitive: w.Sensitive}
		if hasLive && !w.Sensitive {
			c.Before, c.HasBefore = live, true
		}
		*out = append(*out, c)
	case secretValue:
		*secrets = append(*secrets, secretLeaf{Path: p, Value: w.V})
	case map[string]any:
		lm, isMap := live.(map[string]any)
		if hasLive && live != nil && !isMap {
			*out = append(*out, whole(p, want, live, hasLive))
			return
		}
		// An empty object declares nothing: ARM leaves one out of a GET.
		for _, k := range sortedKeys(w) {
			lv, has := lookupFold(lm, k)
			compare(p.child(k), w[k], lv, has, out, secrets)
		}
	case []any:
		la, isList := live.([]any)
		switch {
		case len(w) == 0 && (!hasLive || live == nil || (isList && len(la) == 0)):
			// An empty array is no array: ARM leaves one out of a GET.
		case hasLive && isList && len(la) == len(w):
			for i := range w {
				compare(p.child(i), w[i], la[i], true, out, secrets)
			}
		default:
			// A list of another length is one change holding both lists:
			// an element inserted would otherwise move every index after it.
			*out = append(*out, whole(p, want, live, hasLive))
		}
	default:
		switch {
		case !hasLive && want == nil:
		case !hasLive:
			*out = append(*out, change{Path: p, After: want, HasAfter: true})
		case !sameScalar(p, want, live):
			*out = append(*out, change{Path: p, Before: live, HasBefore: true, After: want, HasAfter: true})
		}
	}
}

// whole is a change of a whole value: sensitive when it holds a secure
// value, unknown when it holds a value known only after apply.
func whole(p path, want, live any, hasLive bool) change {
	u, sensitive := scan(want)
	switch {
	case sensitive:
		return change{Path: p, Sensitive: true, Unknown: u}
	case u:
		return change{Path: p, Before: live, HasBefore: hasLive, Unknown: true}
	}
	return change{Path: p, Before: live, HasBefore: hasLive, After: want, HasAfter: true}
}

// lookupFold finds a key of an object, exactly or else without case (ARM's
// property names compare without case).
func lookupFold(m map[string]any, k string) (any, bool) {
	if m == nil {
		return nil, false
	}
	if v, ok := m[k]; ok {
		return v, true
	}
	for name, v := range m {
		if strings.EqualFold(name, k) {
			return v, true
		}
	}
	return nil, false
}

// sameScalar compares two leaves: numbers by value, a location as ARM
// normalises it ("West Europe" is "westeurope"), a resource id without
// case (ARM's ids compare without case).
func sameScalar(p path, want, live any) bool {
	if ws, ok := want.(string); ok {
		ls, ok := live.(string)
		switch {
		case !ok:
			return false
		case ws == ls:
			return true
		case len(p) == 1 && p[0] == "location":
			return normaliseLocation(ws) == normaliseLocation(ls)
		case isResourceID(ws):
			return strings.EqualFold(ws, ls)
		}
		return false
	}
	return equalJSON(want, live)
}

func isResourceID(s string) bool {
	return len(s) > len("/subscriptions/") && strings.EqualFold(s[:len("/subscriptions/")], "/subscriptions/")
}

// lookupPath reads the value at p.
func lookupPath(v any, p path) (any, bool) {
	cur := v
	for _, seg := range p {
		switch node := cur.(type) {
		case map[string]any:
			k, ok := seg.(string)
			if !ok {
				return nil, false
			}
			next, ok := lookupFold(node, k)
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			i, ok := seg.(int)
			if !ok || i < 0 || i >= len(node) {
				return nil, false
			}
			cur = node[i]
		default:
			return nil, false
		}
	}
	return cur, true
}
