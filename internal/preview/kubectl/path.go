package kubectl

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// A path names one field of an object, as a list of segments: a string is a
// map key, an int a list index. It is written with dots between segments,
// list indexes as numbers, and a key that is not a plain word (it holds a
// dot, a slash, starts with a digit…) as a quoted string in brackets:
//
//	spec.template.spec.containers.0.image
//	metadata.labels["app.kubernetes.io/name"]
type path []any

var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// String writes the path in the syntax above.
func (p path) String() string {
	var b strings.Builder
	for i, seg := range p {
		switch s := seg.(type) {
		case int:
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(strconv.Itoa(s))
		case string:
			if !plainKey.MatchString(s) {
				q, _ := json.Marshal(s) // a string always marshals
				b.WriteString("[" + string(q) + "]")
				continue
			}
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s)
		}
	}
	return b.String()
}

// child returns a copy of p with seg appended, so siblings never share
// a backing array.
func (p path) child(seg any) path {
	out := make(path, len(p), len(p)+1)
	copy(out, p)
	return append(out, seg)
}

// parsePath reads the syntax String writes. A plain segment made of digits
// stays a string: lookup reads it as an index where the value is a list.
func parsePath(s string) (path, error) {
	if s == "" {
		return nil, fmt.Errorf("empty field path")
	}
	var p path
	rest := s
	for rest != "" {
		switch {
		case strings.HasPrefix(rest, "["):
			end := strings.Index(rest, "\"]")
			if !strings.HasPrefix(rest, "[\"") || end < 0 {
				return nil, fmt.Errorf("field path %q: a bracket holds a quoted key, e.g. [\"app.kubernetes.io/name\"]", s)
			}
			var key string
			if err := json.Unmarshal([]byte(rest[1:end+1]), &key); err != nil {
				return nil, fmt.Errorf("field path %q: bad quoted key: %w", s, err)
			}
			p = append(p, key)
			rest = rest[end+2:]
		default:
			end := strings.IndexAny(rest, ".[")
			if end < 0 {
				end = len(rest)
			}
			if end == 0 {
				return nil, fmt.Errorf("field path %q: empty segment", s)
			}
			p = append(p, rest[:end])
			rest = rest[end:]
		}
		if strings.HasPrefix(rest, ".") {
			rest = rest[1:]
			if rest == "" {
				return nil, fmt.Errorf("field path %q: ends with a dot", s)
			}
		} else if rest != "" && !strings.HasPrefix(rest, "[") {
			return nil, fmt.Errorf("field path %q: expected a dot or a bracket after a quoted key", s)
		}
	}
	return p, nil
}

// lookup returns the value at p in obj and whether it is there. A string
// segment of digits indexes a list.
func lookup(obj any, p path) (any, bool) {
	cur := obj
	for _, seg := range p {
		switch node := cur.(type) {
		case map[string]any:
			key, ok := seg.(string)
			if !ok {
				key = strconv.Itoa(seg.(int))
			}
			v, ok := node[key]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, ok := seg.(int)
			if !ok {
				n, err := strconv.Atoi(seg.(string))
				if err != nil {
					return nil, false
				}
				i = n
			}
			if i < 0 || i >= len(node) {
				return nil, false
			}
			cur = node[i]
		default:
			return nil, false
		}
	}
	return cur, true
}
