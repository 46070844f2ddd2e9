package arm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/captf/captf/pkg/changeset"
)

// unknownValue is a value known only after apply: what reference() or
// listKeys() return while planning. A sensitive one (from listKeys) is
// never shown, not even the value it replaces.
type unknownValue struct{ Sensitive bool }

// secretValue wraps a value that comes from a secure parameter
// (securestring, secureobject); whatever is computed from it is one too.
type secretValue struct{ V any }

// errNothing says an expression comes to nothing: a parameter without a
// value, a resource that is not there, a property it does not have, a
// listKeys() outside an apply. An output that comes to nothing is skipped.
var errNothing = errors.New("no value")

// resolver answers reference() and listKeys().
type resolver interface {
	// reference returns the resource's properties, or its whole body when
	// full, or an unknownValue.
	reference(ctx context.Context, id, apiVersion string, full bool) (any, error)
	// listKeys returns the answer of the resource's listKeys action, or an
	// unknownValue.
	listKeys(ctx context.Context, id, apiVersion string) (any, error)
}

// planning is the resolver of a plan: every reference() and listKeys() is
// known only after apply, and nothing is called.
type planning struct{}

func (planning) reference(context.Context, string, string, bool) (any, error) {
	return unknownValue{}, nil
}

func (planning) listKeys(context.Context, string, string) (any, error) {
	return unknownValue{Sensitive: true}, nil
}

// groupInfo is what resourceGroup() returns.
type groupInfo struct {
	Name, ID, Location string
}

// evaluator evaluates template expressions.
type evaluator struct {
	ctx          context.Context
	tmpl         *template
	subscription string
	group        groupInfo
	// params are the bound parameter values by lower-case name; a declared
	// parameter without one is absent.
	params  map[string]any
	resolve resolver
	// resources are the template's resources whose ids are known, for
	// reference() by name and for the apiVersion of reference(id).
	resources []*resource
	// busy holds the variables being evaluated, to find a cycle.
	busy map[string]bool
}

// tree evaluates every expression in a template value.
func (e *evaluator) tree(v any) (any, error) {
	switch x := v.(type) {
	case string:
		src, ok := expression(x)
		if !ok {
			return src, nil
		}
		n, err := parse(src)
		if err != nil {
			return nil, fmt.Errorf("expression %q: %w", x, err)
		}
		return e.eval(n)
	case map[string]any:
		out := make(map[string]any, len(x))
		for _, k := range sortedKeys(x) {
			ev, err := e.tree(x[k])
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			out[k] = ev
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, el := range x {
			ev, err := e.tree(el)
			if err != nil {
				return nil, fmt.Errorf("%d: %w", i, err)
			}
			out[i] = ev
		}
		return out, nil
	default:
		return v, nil
	}
}

func (e *evaluator) eval(n node) (any, error) {
	switch x := n.(type) {
	case literal:
		return x.v, nil
	case access:
		target, err := e.eval(x.target)
		if err != nil {
			return nil, err
		}
		key, err := e.eval(x.key)
		if err != nil {
			return nil, err
		}
		return property(target, key)
	case call:
		return e.call(x)
	}
	return nil, fmt.Errorf("unknown expression")
}

// property reads key of target: a property of an object (names compare
// without case, as ARM's do) or an index of an array.
func property(target, key any) (any, error) {
	if u, ok := markedUnknown(target, key); ok {
		return u, nil
	}
	if isSecret(target) || isSecret(key) {
		v, err := property(reveal(target), reveal(key))
		switch {
		case err != nil && isSecret(key) && errors.Is(err, errNothing):
			return nil, fmt.Errorf("%w: the property named by a secure value is not there", errNothing)
		case err != nil && isSecret(key):
			return nil, fmt.Errorf("a property named by a secure value cannot be read")
		case err != nil:
			return nil, err
		}
		return secretValue{v}, nil
	}
	switch t := target.(type) {
	case map[string]any:
		k, ok := key.(string)
		if !ok {
			return nil, fmt.Errorf("an object's property is named by a string, not %s", kindOf(key))
		}
		if v, ok := t[k]; ok {
			return v, nil
		}
		for name, v := range t {
			if strings.EqualFold(name, k) {
				return v, nil
			}
		}
		return nil, fmt.Errorf("%w: the object has no property %q", errNothing, k)
	case []any:
		i, err := integer(key)
		if err != nil {
			return nil, fmt.Errorf("an array is indexed by an integer: %w", err)
		}
		if i < 0 || i >= int64(len(t)) {
			return nil, fmt.Errorf("%w: index %d is outside the array's %d elements", errNothing, i, len(t))
		}
		return t[i], nil
	}
	return nil, fmt.Errorf("%s has no properties", kindOf(target))
}

// functions are the template functions captf evaluates, by lower-case
// name; each takes its arguments evaluated.
var pureFunctions = map[string]func(args []any) (any, error){
	"concat":  concat,
	"format":  format,
	"tolower": func(a []any) (any, error) { return stringFunc("toLower", a, strings.ToLower) },
	"toupper": func(a []any) (any, error) { return stringFunc("toUpper", a, strings.ToUpper) },
	"string": func(a []any) (any, error) {
		if len(a) != 1 {
			return nil, fmt.Errorf("string takes 1 argument, not %d", len(a))
		}
		return toString(a[0]), nil
	},
	"int": func(a []any) (any, error) {
		if len(a) != 1 {
			return nil, fmt.Errorf("int takes 1 argument, not %d", len(a))
		}
		if s, ok := a[0].(string); ok {
			if _, err := strconv.ParseInt(s, 10, 64); err != nil {
				return nil, fmt.Errorf("int: the string is not an integer")
			}
			return json.Number(s), nil
		}
		i, err := integer(a[0])
		if err != nil {
			return nil, fmt.Errorf("int: %w", err)
		}
		return json.Number(strconv.FormatInt(i, 10)), nil
	},
	"equals": func(a []any) (any, error) {
		if len(a) != 2 {
			return nil, fmt.Errorf("equals takes 2 arguments, not %d", len(a))
		}
		return equalJSON(a[0], a[1]), nil
	},
	"not": func(a []any) (any, error) {
		if len(a) != 1 {
			return nil, fmt.Errorf("not takes 1 argument, not %d", len(a))
		}
		b, ok := a[0].(bool)
		if !ok {
			return nil, fmt.Errorf("not takes a boolean, not %s", kindOf(a[0]))
		}
		return !b, nil
	},
	"and": func(a []any) (any, error) { return logic("and", a, true) },
	"or":  func(a []any) (any, error) { return logic("or", a, false) },
	"true": func(a []any) (any, error) {
		return true, arity("true", a, 0)
	},
	"false": func(a []any) (any, error) {
		return false, arity("false", a, 0)
	},
	"null": func(a []any) (any, error) {
		return nil, arity("null", a, 0)
	},
}

// knownFunctions lists every function captf evaluates, for errors.
const knownFunctions = "parameters, variables, concat, format, resourceGroup, subscription, resourceId, reference, listKeys, if, equals, not, and, or, toLower, toUpper, string, int, true, false, null"

func arity(name string, args []any, n int) error {
	if len(args) != n {
		return fmt.Errorf("%s takes %d arguments, not %d", name, n, len(args))
	}
	return nil
}

func (e *evaluator) call(c call) (any, error) {
	name := strings.ToLower(c.name)
	if name == "if" {
		return e.ifFunc(c)
	}
	args := make([]any, len(c.args))
	for i, a := range c.args {
		v, err := e.eval(a)
		if err != nil {
			return nil, err
		}
		args[i] = v
	}
	switch name {
	case "parameters":
		return e.parameter(args)
	case "variables":
		return e.variable(args)
	case "resourcegroup":
		if err := arity("resourceGroup", args, 0); err != nil {
			return nil, err
		}
		return map[string]any{"id": e.group.ID, "name": e.group.Name, "type": "Microsoft.Resources/resourceGroups", "location": e.group.Location}, nil
	case "subscription":
		if err := arity("subscription", args, 0); err != nil {
			return nil, err
		}
		return map[string]any{"id": "/subscriptions/" + e.subscription, "subscriptionId": e.subscription}, nil
	case "resourceid":
		return e.pure("resourceId", args, e.resourceID)
	case "reference":
		return e.reference(args)
	case "listkeys":
		return e.listKeys(args)
	}
	if f, ok := pureFunctions[name]; ok {
		return e.pure(c.name, args, f)
	}
	return nil, fmt.Errorf("%s() is not a template function captf evaluates (it evaluates %s)", c.name, knownFunctions)
}

// pure calls f on args: a value known only after apply among them makes the
// result one, and a secure value makes the result secure.
func (e *evaluator) pure(name string, args []any, f func([]any) (any, error)) (any, error) {
	if u, ok := markedUnknown(args...); ok {
		return u, nil
	}
	secret := false
	plain := make([]any, len(args))
	for i, a := range args {
		secret = secret || containsSecret(a)
		plain[i] = reveal(a)
	}
	v, err := f(plain)
	if err != nil && secret {
		// The message could quote the secure value.
		return nil, fmt.Errorf("%s() of a secure value fails (the reason is withheld: it could hold the value)", name)
	}
	if err != nil {
		return nil, err
	}
	if secret {
		return secretValue{v}, nil
	}
	return v, nil
}

func (e *evaluator) ifFunc(c call) (any, error) {
	if len(c.args) != 3 {
		return nil, fmt.Errorf("if takes 3 arguments, not %d", len(c.args))
	}
	cond, err := e.eval(c.args[0])
	if err != nil {
		return nil, err
	}
	if u, ok := markedUnknown(cond); ok {
		return u, nil
	}
	b, ok := reveal(cond).(bool)
	if !ok {
		return nil, fmt.Errorf("if takes a boolean condition, not %s", kindOf(reveal(cond)))
	}
	branch := c.args[2]
	if b {
		branch = c.args[1]
	}
	v, err := e.eval(branch)
	if err != nil {
		return nil, err
	}
	if isSecret(cond) && !isSecret(v) {
		return secretValue{v}, nil
	}
	return v, nil
}

// name reads the one string argument of parameters() or variables().
func nameArg(fn string, args []any) (string, error) {
	if len(args) != 1 {
		return "", fmt.Errorf("%s takes 1 argument, not %d", fn, len(args))
	}
	s, ok := args[0].(string)
	if !ok {
		return "", fmt.Errorf("%s takes a name, not %s", fn, kindOf(args[0]))
	}
	return s, nil
}

func (e *evaluator) parameter(args []any) (any, error) {
	name, err := nameArg("parameters", args)
	if err != nil {
		return nil, err
	}
	p := e.tmpl.parameter(name)
	if p == nil {
		return nil, fmt.Errorf("parameters('%s'): the template declares no parameter %s", name, name)
	}
	v, ok := e.params[strings.ToLower(p.Name)]
	if !ok {
		return nil, fmt.Errorf("%w: parameter %s has no value", errNothing, p.Name)
	}
	return v, nil
}

func (e *evaluator) variable(args []any) (any, error) {
	name, err := nameArg("variables", args)
	if err != nil {
		return nil, err
	}
	key, raw, ok := e.tmpl.variable(name)
	if !ok {
		return nil, fmt.Errorf("variables('%s'): the template declares no variable %s", name, name)
	}
	if e.busy[key] {
		return nil, fmt.Errorf("variables('%s'): the variable reads itself", name)
	}
	if e.busy == nil {
		e.busy = map[string]bool{}
	}
	e.busy[key] = true
	defer delete(e.busy, key)
	v, err := e.tree(raw)
	if err != nil {
		return nil, fmt.Errorf("variable %s: %w", name, err)
	}
	return v, nil
}

// resourceID is resourceId([subscriptionId], [resourceGroupName],
// resourceType, name…): the first argument holding a '/' is the type, the
// ones before it the subscription and the group.
func (e *evaluator) resourceID(args []any) (any, error) {
	strs := make([]string, len(args))
	for i, a := range args {
		s, ok := a.(string)
		if !ok {
			return nil, fmt.Errorf("resourceId takes strings, not %s", kindOf(a))
		}
		strs[i] = s
	}
	at := -1
	for i, s := range strs {
		if strings.Contains(s, "/") {
			at = i
			break
		}
	}
	if at < 0 || at > 2 {
		return nil, fmt.Errorf("resourceId: no resource type (Namespace/type) among its first three arguments")
	}
	sub, group := e.subscription, e.group.Name
	switch at {
	case 1:
		group = strs[0]
	case 2:
		sub, group = strs[0], strs[1]
	}
	types := strings.Split(strs[at], "/")
	names := strs[at+1:]
	if len(names) == 1 && len(types) > 2 {
		names = strings.Split(names[0], "/")
	}
	if len(names) != len(types)-1 {
		return nil, fmt.Errorf("resourceId: type %s takes %d names, not %d", strs[at], len(types)-1, len(names))
	}
	return buildID(sub, group, strs[at], strings.Join(names, "/"))
}

// buildID is the id of a resource of type Namespace/type[/child…] named
// name[/child…] in a group.
func buildID(subscription, group, resourceType, name string) (string, error) {
	types := strings.Split(resourceType, "/")
	names := strings.Split(name, "/")
	if len(types) < 2 || len(names) != len(types)-1 {
		return "", fmt.Errorf("type %s takes %d name segments, not %d", resourceType, max(len(types)-1, 1), len(names))
	}
	for _, s := range append(types, names...) {
		if s == "" {
			return "", fmt.Errorf("type %s with name %s has an empty segment", resourceType, name)
		}
	}
	id := "/subscriptions/" + subscription + "/resourceGroups/" + group + "/providers/" + types[0]
	for i, t := range types[1:] {
		id += "/" + t + "/" + names[i]
	}
	return id, nil
}

// target finds what reference() or listKeys() reads: a resource id, or
// the name of a resource of the template; and its apiVersion, given or
// the template resource's.
func (e *evaluator) target(fn string, args []any) (id, apiVersion string, err error) {
	if len(args) < 1 {
		return "", "", fmt.Errorf("%s takes a resource id or name", fn)
	}
	if isSecret(args[0]) {
		return "", "", fmt.Errorf("%s: the resource is named by a secure value", fn)
	}
	s, ok := args[0].(string)
	if !ok {
		return "", "", fmt.Errorf("%s takes a resource id or name, not %s", fn, kindOf(args[0]))
	}
	var declared *resource
	for _, r := range e.resources {
		if strings.EqualFold(r.ID, s) || (!strings.HasPrefix(s, "/") && strings.EqualFold(r.Name, s)) {
			declared = r
			break
		}
	}
	switch {
	case declared != nil:
		id, apiVersion = declared.ID, declared.APIVersion
	case strings.HasPrefix(s, "/subscriptions/"):
		id = s
	default:
		return "", "", fmt.Errorf("%s('%s'): no resource of the template has that name (give a resource id)", fn, s)
	}
	if len(args) >= 2 {
		v, ok := args[1].(string)
		if !ok {
			return "", "", fmt.Errorf("%s takes an apiVersion string as its second argument, not %s", fn, kindOf(args[1]))
		}
		apiVersion = v
	}
	if apiVersion == "" {
		return "", "", fmt.Errorf("%s of %s: a resource outside the template needs an apiVersion", fn, id)
	}
	return id, apiVersion, nil
}

func (e *evaluator) reference(args []any) (any, error) {
	if u, ok := markedUnknown(args...); ok {
		return u, nil
	}
	if len(args) > 3 {
		return nil, fmt.Errorf("reference takes at most 3 arguments, not %d", len(args))
	}
	id, version, err := e.target("reference", args)
	if err != nil {
		return nil, err
	}
	full := false
	if len(args) == 3 {
		s, _ := args[2].(string)
		if !strings.EqualFold(s, "Full") {
			return nil, fmt.Errorf("reference: the third argument is 'Full' or nothing")
		}
		full = true
	}
	return e.resolve.reference(e.ctx, id, version, full)
}

func (e *evaluator) listKeys(args []any) (any, error) {
	if _, ok := markedUnknown(args...); ok {
		return unknownValue{Sensitive: true}, nil
	}
	if len(args) != 2 {
		return nil, fmt.Errorf("listKeys takes a resource id and an apiVersion, not %d arguments", len(args))
	}
	id, version, err := e.target("listKeys", args)
	if err != nil {
		return nil, err
	}
	v, err := e.resolve.listKeys(e.ctx, id, version)
	if err != nil {
		return nil, err
	}
	if _, ok := v.(unknownValue); ok {
		return unknownValue{Sensitive: true}, nil
	}
	// Keys are secrets: whatever is made of them is never shown.
	return secretValue{v}, nil
}

func concat(args []any) (any, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("concat takes at least 1 argument")
	}
	if _, ok := args[0].([]any); ok {
		var out []any
		for _, a := range args {
			arr, ok := a.([]any)
			if !ok {
				return nil, fmt.Errorf("concat of arrays takes only arrays, not %s", kindOf(a))
			}
			out = append(out, arr...)
		}
		if out == nil {
			out = []any{}
		}
		return out, nil
	}
	var b strings.Builder
	for _, a := range args {
		if _, ok := a.([]any); ok {
			return nil, fmt.Errorf("concat of strings takes no array")
		}
		b.WriteString(toString(a))
	}
	return b.String(), nil
}

// format is format(formatString, args…) with .NET's composite format:
// {0}, {1}, …, and {{ and }} for braces. Format specifiers ({0:N2}) are
// not evaluated.
func format(args []any) (any, error) {
	if len(args) < 1 {
		return nil, fmt.Errorf("format takes a format string")
	}
	f, ok := args[0].(string)
	if !ok {
		return nil, fmt.Errorf("format takes a format string, not %s", kindOf(args[0]))
	}
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		c := f[i]
		switch {
		case c == '{' && i+1 < len(f) && f[i+1] == '{':
			b.WriteByte('{')
			i++
		case c == '}' && i+1 < len(f) && f[i+1] == '}':
			b.WriteByte('}')
			i++
		case c == '{':
			end := strings.IndexByte(f[i:], '}')
			if end < 0 {
				return nil, fmt.Errorf("format: a '{' at %d is not closed", i+1)
			}
			spec := f[i+1 : i+end]
			n, err := strconv.Atoi(spec)
			if err != nil {
				return nil, fmt.Errorf("format: {%s} is not an argument index (format specifiers are not evaluated)", spec)
			}
			if n < 0 || n+1 >= len(args) {
				return nil, fmt.Errorf("format: {%d} has no argument", n)
			}
			b.WriteString(toString(args[n+1]))
			i += end
		case c == '}':
			return nil, fmt.Errorf("format: a '}' at %d is not escaped", i+1)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

func stringFunc(name string, args []any, f func(string) string) (any, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("%s takes 1 argument, not %d", name, len(args))
	}
	s, ok := args[0].(string)
	if !ok {
		return nil, fmt.Errorf("%s takes a string, not %s", name, kindOf(args[0]))
	}
	return f(s), nil
}

func logic(name string, args []any, and bool) (any, error) {
	if len(args) < 2 {
		return nil, fmt.Errorf("%s takes at least 2 arguments", name)
	}
	out := and
	for _, a := range args {
		b, ok := a.(bool)
		if !ok {
			return nil, fmt.Errorf("%s takes booleans, not %s", name, kindOf(a))
		}
		if and {
			out = out && b
		} else {
			out = out || b
		}
	}
	return out, nil
}

// toString writes a value as ARM's string() does: strings as they are,
// numbers as written, True and False, objects and arrays as JSON.
func toString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		if x {
			return "True"
		}
		return "False"
	case nil:
		return ""
	default:
		b, err := changeset.Canonical(v)
		if err != nil {
			return fmt.Sprint(v)
		}
		return string(b)
	}
}

func numberOf(text string) json.Number { return json.Number(text) }

// integer reads a whole number.
func integer(v any) (int64, error) {
	switch x := v.(type) {
	case json.Number:
		i, err := x.Int64()
		if err != nil {
			return 0, fmt.Errorf("not an integer")
		}
		return i, nil
	case int:
		return int64(x), nil
	case int64:
		return x, nil
	case float64:
		if x != float64(int64(x)) {
			return 0, fmt.Errorf("not an integer")
		}
		return int64(x), nil
	}
	return 0, fmt.Errorf("%s is not an integer", kindOf(v))
}

// equalJSON compares two JSON values; numbers by value.
func equalJSON(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !equalJSON(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalJSON(x[i], y[i]) {
				return false
			}
		}
		return true
	case json.Number:
		return sameNumber(x, b)
	default:
		if _, ok := b.(json.Number); ok {
			return sameNumber(b.(json.Number), a)
		}
		return a == b
	}
}

// sameNumber compares a number with another value by value: 1 and 1.0 are
// the same.
func sameNumber(a json.Number, b any) bool {
	var bs string
	switch y := b.(type) {
	case json.Number:
		bs = y.String()
	case int:
		bs = strconv.Itoa(y)
	case int64:
		bs = strconv.FormatInt(y, 10)
	case float64:
		bs = strconv.FormatFloat(y, 'g', -1, 64)
	default:
		return false
	}
	ra, ok1 := new(big.Rat).SetString(a.String())
	rb, ok2 := new(big.Rat).SetString(bs)
	return ok1 && ok2 && ra.Cmp(rb) == 0
}

// markedUnknown says whether any of vs holds a value known only after
// apply, and returns the unknown value a result made of them is: a
// sensitive one when any of them is sensitive or secure.
func markedUnknown(vs ...any) (unknownValue, bool) {
	found, sensitive := false, false
	for _, v := range vs {
		u, s := scan(v)
		found = found || u
		sensitive = sensitive || s
	}
	return unknownValue{Sensitive: sensitive}, found
}

// scan says whether v holds an unknown value, and whether it holds a
// sensitive unknown or a secret.
func scan(v any) (unknown, sensitive bool) {
	switch x := v.(type) {
	case unknownValue:
		return true, x.Sensitive
	case secretValue:
		u, _ := scan(x.V)
		return u, true
	case map[string]any:
		for _, e := range x {
			u, s := scan(e)
			unknown, sensitive = unknown || u, sensitive || s
		}
	case []any:
		for _, e := range x {
			u, s := scan(e)
			unknown, sensitive = unknown || u, sensitive || s
		}
	}
	return unknown, sensitive
}

func isSecret(v any) bool {
	_, ok := v.(secretValue)
	return ok
}

// containsSecret says whether v is or holds a secure value.
func containsSecret(v any) bool {
	switch x := v.(type) {
	case secretValue:
		return true
	case map[string]any:
		for _, e := range x {
			if containsSecret(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if containsSecret(e) {
				return true
			}
		}
	}
	return false
}

// containsUnknown says whether v is or holds a value known only after
// apply.
func containsUnknown(v any) bool {
	u, _ := scan(v)
	return u
}

// reveal returns v with every secure value unwrapped: what is PUT.
func reveal(v any) any {
	switch x := v.(type) {
	case secretValue:
		return reveal(x.V)
	case map[string]any:
		if !containsSecret(x) {
			return x
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = reveal(e)
		}
		return out
	case []any:
		if !containsSecret(x) {
			return x
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = reveal(e)
		}
		return out
	}
	return v
}
