// Package fieldpath names one field of a JSON-like object (maps with string
// keys, lists) as a list of segments, and writes and reads it as a reviewer
// reads it: dots between segments, list indexes as numbers, and a key that
// is not a plain word as a JSON-quoted string in brackets:
//
//	spec.template.spec.containers.0.image
//	metadata.labels["app.kubernetes.io/name"]
//
// kubectl-apply and arm-deploy name the fields of the changes they plan with
// it. Both write the names into their plan digests, so a name once written
// must never change: a new way of writing one is a new Syntax.
package fieldpath

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// A Path names one field: a string segment is a map key, an int a list
// index.
type Path []any

// Child returns a copy of p with seg appended, so siblings never share a
// backing array.
func (p Path) Child(seg any) Path {
	out := make(Path, len(p), len(p)+1)
	copy(out, p)
	return append(out, seg)
}

// String writes p in the Plain syntax.
func (p Path) String() string { return Plain.Format(p) }

// A Syntax writes paths. Syntaxes differ only in the keys they write bare.
type Syntax struct {
	bare *regexp.Regexp
}

var (
	// Plain writes bare a key that starts with a letter or an underscore and
	// holds only letters, digits, underscores and hyphens (kubectl-apply's
	// documented syntax).
	Plain = Syntax{bare: regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)}
	// PlainDollar is Plain that also writes bare a key holding '$', as in
	// ARM's $schema (arm-deploy's syntax, which its secure-value digests,
	// kept in Azure tags, hold).
	PlainDollar = Syntax{bare: regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$-]*$`)}
)

// Format writes p: segments joined by dots, a key the syntax does not write
// bare as ["key"] with no dot before it.
func (s Syntax) Format(p Path) string {
	var b strings.Builder
	for i, seg := range p {
		switch v := seg.(type) {
		case int:
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(strconv.Itoa(v))
		case string:
			if !s.bare.MatchString(v) {
				q, _ := json.Marshal(v) // a string always marshals
				b.WriteString("[" + string(q) + "]")
				continue
			}
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(v)
		}
	}
	return b.String()
}

// Parse reads what any Syntax writes. A bare segment stays a string, digits
// too: whoever looks the path up decides whether it indexes a list.
func Parse(s string) (Path, error) {
	if s == "" {
		return nil, fmt.Errorf("empty field path")
	}
	var p Path
	rest := s
	for rest != "" {
		switch {
		case strings.HasPrefix(rest, "["):
			if !strings.HasPrefix(rest, "[\"") {
				return nil, fmt.Errorf("field path %q: a bracket holds a quoted key, e.g. [\"app.kubernetes.io/name\"]", s)
			}
			// The decoder finds where the quoted key ends, so a key that
			// holds "] itself reads back as Format wrote it.
			dec := json.NewDecoder(strings.NewReader(rest[1:]))
			var key string
			if err := dec.Decode(&key); err != nil {
				return nil, fmt.Errorf("field path %q: bad quoted key: %w", s, err)
			}
			rest = rest[1+dec.InputOffset():]
			if !strings.HasPrefix(rest, "]") {
				return nil, fmt.Errorf("field path %q: a bracket holds a quoted key, e.g. [\"app.kubernetes.io/name\"]", s)
			}
			p = append(p, key)
			rest = rest[1:]
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
