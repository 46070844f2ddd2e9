package arm

import (
	"fmt"
	"strings"
)

// A template string "[…]" is an expression of ARM's template language:
// function calls, single-quoted strings (” for a quote), integers, and
// property access by .name, ['name'] or [index]. "[[" at the start escapes
// a literal string that starts with "[".

// expression returns the expression inside s and true when s is one; for a
// literal it returns s with its escape undone and false.
func expression(s string) (string, bool) {
	if strings.HasPrefix(s, "[[") {
		return s[1:], false
	}
	if len(s) >= 2 && s[0] == '[' && s[len(s)-1] == ']' {
		return s[1 : len(s)-1], true
	}
	return s, false
}

// node is a parsed expression.
type node interface{ pos() int }

type (
	// call is a function call, name as written.
	call struct {
		at   int
		name string
		args []node
	}
	// literal is a string or an integer (json.Number).
	literal struct {
		at int
		v  any
	}
	// access reads a property or an index of target.
	access struct {
		at     int
		target node
		key    node
	}
)

func (c call) pos() int    { return c.at }
func (l literal) pos() int { return l.at }
func (a access) pos() int  { return a.at }

type token struct {
	kind byte // 'i' identifier, 's' string, 'n' number, or the punctuation itself
	text string
	at   int
}

func lex(src string) ([]token, error) {
	var out []token
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case strings.IndexByte("(),.[]", c) >= 0:
			out = append(out, token{kind: c, text: string(c), at: i})
			i++
		case c == '\'':
			var b strings.Builder
			j := i + 1
			for {
				if j >= len(src) {
					return nil, fmt.Errorf("a string that starts at %d is not closed", i+1)
				}
				if src[j] == '\'' {
					if j+1 < len(src) && src[j+1] == '\'' {
						b.WriteByte('\'')
						j += 2
						continue
					}
					break
				}
				b.WriteByte(src[j])
				j++
			}
			out = append(out, token{kind: 's', text: b.String(), at: i})
			i = j + 1
		case c == '-' || (c >= '0' && c <= '9'):
			j := i + 1
			for j < len(src) && src[j] >= '0' && src[j] <= '9' {
				j++
			}
			if src[i:j] == "-" {
				return nil, fmt.Errorf("a '-' at %d is not followed by a number", i+1)
			}
			out = append(out, token{kind: 'n', text: src[i:j], at: i})
			i = j
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i + 1
			for j < len(src) && (src[j] == '_' || src[j] >= 'a' && src[j] <= 'z' || src[j] >= 'A' && src[j] <= 'Z' || src[j] >= '0' && src[j] <= '9') {
				j++
			}
			out = append(out, token{kind: 'i', text: src[i:j], at: i})
			i = j
		default:
			return nil, fmt.Errorf("unexpected character %q at %d", c, i+1)
		}
	}
	return out, nil
}

type parser struct {
	toks []token
	i    int
}

// parse reads an expression (the text inside the brackets).
func parse(src string) (node, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	n, err := p.expr()
	if err != nil {
		return nil, err
	}
	if p.i < len(p.toks) {
		return nil, fmt.Errorf("unexpected %q at %d", p.toks[p.i].text, p.toks[p.i].at+1)
	}
	return n, nil
}

func (p *parser) peek() *token {
	if p.i < len(p.toks) {
		return &p.toks[p.i]
	}
	return nil
}

func (p *parser) expect(kind byte) (token, error) {
	t := p.peek()
	if t == nil {
		return token{}, fmt.Errorf("the expression ends where %q is expected", string(kind))
	}
	if t.kind != kind {
		return token{}, fmt.Errorf("unexpected %q at %d", t.text, t.at+1)
	}
	p.i++
	return *t, nil
}

func (p *parser) expr() (node, error) {
	t := p.peek()
	if t == nil {
		return nil, fmt.Errorf("empty expression")
	}
	var n node
	switch t.kind {
	case 's':
		p.i++
		n = literal{at: t.at, v: t.text}
	case 'n':
		p.i++
		n = literal{at: t.at, v: numberOf(t.text)}
	case 'i':
		p.i++
		if next := p.peek(); next == nil || next.kind != '(' {
			// ARM writes true(), false() and null(); the bare words are
			// read as the same.
			switch strings.ToLower(t.text) {
			case "true":
				n = literal{at: t.at, v: true}
			case "false":
				n = literal{at: t.at, v: false}
			case "null":
				n = literal{at: t.at, v: nil}
			}
			if n != nil {
				break
			}
		}
		if _, err := p.expect('('); err != nil {
			return nil, fmt.Errorf("%s: %w (a function call needs its arguments in parentheses)", t.text, err)
		}
		c := call{at: t.at, name: t.text}
		if next := p.peek(); next != nil && next.kind == ')' {
			p.i++
		} else {
			for {
				arg, err := p.expr()
				if err != nil {
					return nil, err
				}
				c.args = append(c.args, arg)
				sep := p.peek()
				if sep == nil {
					return nil, fmt.Errorf("%s( at %d is not closed", t.text, t.at+1)
				}
				p.i++
				if sep.kind == ')' {
					break
				}
				if sep.kind != ',' {
					return nil, fmt.Errorf("unexpected %q at %d", sep.text, sep.at+1)
				}
			}
		}
		n = c
	default:
		return nil, fmt.Errorf("unexpected %q at %d", t.text, t.at+1)
	}
	for {
		t := p.peek()
		if t == nil || (t.kind != '.' && t.kind != '[') {
			return n, nil
		}
		p.i++
		if t.kind == '.' {
			name, err := p.expect('i')
			if err != nil {
				return nil, err
			}
			n = access{at: t.at, target: n, key: literal{at: name.at, v: name.text}}
			continue
		}
		key, err := p.expr()
		if err != nil {
			return nil, err
		}
		if _, err := p.expect(']'); err != nil {
			return nil, err
		}
		n = access{at: t.at, target: n, key: key}
	}
}
