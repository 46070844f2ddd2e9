package fingerprint

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// scanner reads one JSON document from a stream, a value at a time. It keeps
// a window of the input, never the whole document: skipped values pass
// through the window, and a captured value (one resource change) is held
// only until the next call.
//
// It is written for this package rather than taken from a library because the
// fingerprint must keep up with SHA-256 over the same bytes (a floor of 0.2
// of its speed, on a CPU with SHA instructions; see hack/bench.sh).
// Measured when this was chosen, on a machine of the project's over a
// 121 MB plan: crypto/sha256 408 MB/s, go-json-experiment/jsontext
// SkipValue 181 MB/s, jsontext plus valyala/fastjson per change 130 MB/s.
// Skipped regions (prior_state, configuration, …) are checked for
// structure only: strings closed, brackets balanced and matched.
type scanner struct {
	r    io.Reader
	buf  []byte
	pos  int // next unread byte in buf
	end  int // end of valid data in buf
	mark int // start of a value being captured, or -1
	off  int64
	eof  bool
	err  error
}

const scanWindow = 256 << 10

func newScanner(r io.Reader) *scanner {
	return &scanner{r: r, buf: make([]byte, scanWindow), mark: -1}
}

// errSyntax reports malformed JSON with the byte offset where it was found.
type syntaxError struct {
	off int64
	msg string
}

func (e *syntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at byte %d: %s", e.off, e.msg)
}

func (s *scanner) syntax(format string, args ...any) error {
	return &syntaxError{off: s.off + int64(s.pos), msg: fmt.Sprintf(format, args...)}
}

// fill reads more input, keeping bytes from mark (or pos) on. It returns
// false at the end of input or on a read error (kept in s.err).
func (s *scanner) fill() bool {
	if s.eof {
		return false
	}
	keep := s.pos
	if s.mark >= 0 {
		keep = s.mark
	}
	if keep > 0 {
		n := copy(s.buf, s.buf[keep:s.end])
		s.off += int64(keep)
		s.pos -= keep
		if s.mark >= 0 {
			s.mark -= keep
		}
		s.end = n
	}
	if s.end == len(s.buf) {
		s.buf = append(s.buf, make([]byte, len(s.buf))...)
	}
	for {
		n, err := s.r.Read(s.buf[s.end:])
		s.end += n
		if err != nil {
			s.eof = true
			if !errors.Is(err, io.EOF) {
				s.err = err
			}
			return n > 0
		}
		if n > 0 {
			return true
		}
	}
}

// peek skips whitespace and returns the next byte, or 0 at the end.
func (s *scanner) peek() byte {
	for {
		for s.pos < s.end {
			c := s.buf[s.pos]
			if c != ' ' && c != '\n' && c != '\r' && c != '\t' {
				return c
			}
			s.pos++
		}
		if !s.fill() {
			return 0
		}
	}
}

func (s *scanner) readErr() error {
	if s.err != nil {
		return fmt.Errorf("read plan: %w", s.err)
	}
	return s.syntax("unexpected end of input")
}

// expect consumes the byte c after optional whitespace.
func (s *scanner) expect(c byte) error {
	got := s.peek()
	if got == 0 {
		return s.readErr()
	}
	if got != c {
		return s.syntax("expected %q, found %q", c, got)
	}
	s.pos++
	return nil
}

// more reports whether a container continues after an element: it consumes
// a comma and returns true, or consumes the closing byte and returns false.
func (s *scanner) more(closing byte) (bool, error) {
	c := s.peek()
	switch c {
	case ',':
		s.pos++
		return true, nil
	case closing:
		s.pos++
		return false, nil
	case 0:
		return false, s.readErr()
	}
	return false, s.syntax("expected ',' or %q, found %q", closing, c)
}

// first starts a container: it consumes the opening byte and reports whether
// the container has any element.
func (s *scanner) first(opening, closing byte) (bool, error) {
	if err := s.expect(opening); err != nil {
		return false, err
	}
	if s.peek() == closing {
		s.pos++
		return false, nil
	}
	return true, nil
}

// key reads an object member name and its colon. The name is returned
// unescaped; it is only valid until the next call.
func (s *scanner) key() (string, error) {
	if c := s.peek(); c != '"' {
		if c == 0 {
			return "", s.readErr()
		}
		return "", s.syntax("expected object key, found %q", c)
	}
	// Keep the name in the window while it is read: a refill moves the
	// window's bytes, so the start is kept relative to the mark.
	own := s.mark < 0
	if own {
		s.mark = s.pos
	}
	rel := s.pos - s.mark
	err := s.skipString()
	start := s.mark + rel
	if own {
		s.mark = -1
	}
	if err != nil {
		return "", err
	}
	raw := s.buf[start+1 : s.pos-1]
	name := string(raw)
	if bytes.IndexByte(raw, '\\') >= 0 {
		name = string(unescape(nil, raw))
	}
	return name, s.expect(':')
}

// skipString consumes a string whose opening quote is at pos. It searches
// for quotes with bytes.IndexByte and decides whether one is escaped by the
// parity of the backslashes before it, carried across window refills.
func (s *scanner) skipString() error {
	s.pos++
	carry := false
	for {
		i := bytes.IndexByte(s.buf[s.pos:s.end], '"')
		if i < 0 {
			carry = oddBackslashes(s.buf[s.pos:s.end], carry)
			s.pos = s.end
			if !s.fill() {
				return s.readErr()
			}
			continue
		}
		q := s.pos + i
		escaped := oddBackslashes(s.buf[s.pos:q], carry)
		s.pos = q + 1
		if !escaped {
			return nil
		}
		carry = false
	}
}

// oddBackslashes reports whether b ends in a run of backslashes of odd
// length; carry says whether an odd run ended just before b.
func oddBackslashes(b []byte, carry bool) bool {
	n := 0
	for n < len(b) && b[len(b)-1-n] == '\\' {
		n++
	}
	if n == len(b) {
		return carry != (n%2 == 1)
	}
	return n%2 == 1
}

// class of a byte outside strings, for skipValue.
const (
	clsOther = iota
	clsSpace
	clsQuote
	clsOpen
	clsClose
)

var byteClass = func() (t [256]uint8) {
	for _, c := range []byte(" \t\r\n,:") {
		t[c] = clsSpace
	}
	t['"'] = clsQuote
	t['{'], t['['] = clsOpen, clsOpen
	t['}'], t[']'] = clsClose, clsClose
	return t
}()

// skipValue consumes one value, checking only its structure.
func (s *scanner) skipValue() error {
	c := s.peek()
	switch c {
	case 0:
		return s.readErr()
	case '"':
		return s.skipString()
	case '{', '[':
	default:
		return s.skipScalar()
	}
	var stack []byte
	var small [32]byte
	stack = small[:0]
	for {
		for s.pos < s.end {
			c := s.buf[s.pos]
			switch byteClass[c] {
			case clsQuote:
				if err := s.skipString(); err != nil {
					return err
				}
				continue
			case clsOpen:
				stack = append(stack, c)
			case clsClose:
				if len(stack) == 0 || stack[len(stack)-1] != c-2 { // '}'-2 == '{', ']'-2 == '['
					return s.syntax("unexpected %q", c)
				}
				stack = stack[:len(stack)-1]
				if len(stack) == 0 {
					s.pos++
					return nil
				}
			}
			s.pos++
		}
		if !s.fill() {
			return s.readErr()
		}
	}
}

// skipScalar consumes a number, true, false or null.
func (s *scanner) skipScalar() error {
	// A mark set by the caller (capture) is moved by a refill and must
	// stay where the refill put it; one set here is cleared after.
	own := s.mark < 0
	if own {
		s.mark = s.pos
	}
	rel := s.pos - s.mark
scan:
	for {
		for s.pos < s.end {
			if byteClass[s.buf[s.pos]] != clsOther {
				break scan
			}
			s.pos++
		}
		if !s.fill() {
			break
		}
	}
	start := s.mark + rel
	if own {
		s.mark = -1
	}
	return s.checkScalar(start)
}

func (s *scanner) checkScalar(start int) error {
	if !validScalar(s.buf[start:s.pos]) {
		return s.syntax("invalid literal of %d bytes", s.pos-start)
	}
	return nil
}

// capture consumes one value and returns its bytes, valid until the next
// call on the scanner.
func (s *scanner) capture() ([]byte, error) {
	if s.peek() == 0 {
		return nil, s.readErr()
	}
	s.mark = s.pos
	err := s.skipValue()
	start := s.mark
	s.mark = -1
	if err != nil {
		return nil, err
	}
	return s.buf[start:s.pos], nil
}

// parseInto parses the next value straight from the window into t. When the
// window ends inside the value it reads more, keeping the value's start, and
// parses again; that happens about once per window. The tree refers to the
// window and is valid until the next call on the scanner.
func (s *scanner) parseInto(t *tree, sortFrom int) (int32, error) {
	if s.peek() == 0 {
		return none, s.readErr()
	}
	s.mark = s.pos
	defer func() { s.mark = -1 }()
	for {
		root, n, err := t.parsePrefix(s.buf[s.mark:s.end], s.eof, sortFrom)
		if errors.Is(err, errNeedMore) {
			// Read until the value has twice the bytes it had, so a value
			// that arrives in many small reads is parsed O(log n) times,
			// not once per read.
			want := 2 * (s.end - s.mark)
			for s.end-s.mark < want {
				s.pos = s.end
				if !s.fill() {
					break
				}
			}
			if s.err != nil {
				return none, fmt.Errorf("read plan: %w", s.err)
			}
			continue
		}
		if err != nil {
			return none, err
		}
		s.pos = s.mark + n
		return root, nil
	}
}

// done checks that only whitespace follows the document.
func (s *scanner) done() error {
	if c := s.peek(); c != 0 {
		return s.syntax("unexpected %q after the plan document", c)
	}
	if s.err != nil {
		return fmt.Errorf("read plan: %w", s.err)
	}
	return nil
}
