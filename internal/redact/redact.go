// Package redact writes a log without the values it is told are
// sensitive: each one's text is replaced by Mask, also when a value is
// split across writes. A Log can hold what is written to it until the
// values are known (a plan's are, once its JSON is read).
package redact

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
)

// Mask replaces each sensitive value's text, as terraform shows hidden
// values.
const Mask = "(sensitive value)"

// MinLen is the length of the shortest text a Set hides. Shorter values,
// and true, false and null, are left as they are: hiding every "1" or
// "true" of a log would leave nothing readable.
const MinLen = 4

// Set is a set of texts to hide. It is safe for concurrent use.
type Set struct {
	mu sync.RWMutex
	// byFirst lists the texts by their first byte, longest first.
	byFirst [256][]string
	seen    map[string]bool
}

// Add adds texts to hide: each text as it is, its JSON-escaped form (as
// terraform prints a quoted string), and each line of a text of several
// lines (as terraform prints one in a heredoc).
func (s *Set) Add(texts ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range texts {
		s.add(t)
		if e := escaped(t); e != t {
			s.add(e)
		}
		if strings.Contains(t, "\n") {
			for line := range strings.Lines(t) {
				s.add(strings.TrimSpace(line))
			}
		}
	}
}

func (s *Set) add(t string) {
	if len(t) < MinLen || t == "true" || t == "false" || t == "null" {
		return
	}
	if s.seen[t] {
		return
	}
	if s.seen == nil {
		s.seen = map[string]bool{}
	}
	s.seen[t] = true
	list := s.byFirst[t[0]]
	at := slices.IndexFunc(list, func(o string) bool { return len(o) < len(t) })
	if at < 0 {
		at = len(list)
	}
	s.byFirst[t[0]] = slices.Insert(list, at, t)
}

// AddJSON adds the text of every string and number in the JSON value raw
// (a variable's value, a resource attribute), and of every string and
// number in a string that is itself JSON (terraform renders those as
// jsonencode(…) and prints their parts).
func (s *Set) AddJSON(raw []byte) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return fmt.Errorf("sensitive value: %w", err)
	}
	s.Add(leaves(v, nil)...)
	return nil
}

// leaves appends the strings and numbers of v to out.
func leaves(v any, out []string) []string {
	switch v := v.(type) {
	case string:
		out = append(out, v)
		if t := strings.TrimSpace(v); strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") {
			d := json.NewDecoder(strings.NewReader(t))
			d.UseNumber()
			var inner any
			if d.Decode(&inner) == nil {
				out = leaves(inner, out)
			}
		}
	case json.Number:
		out = append(out, v.String())
	case map[string]any:
		for _, e := range v {
			out = leaves(e, out)
		}
	case []any:
		for _, e := range v {
			out = leaves(e, out)
		}
	}
	return out
}

// escaped is t as it appears between the quotes of a JSON string.
func escaped(t string) string {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	_ = e.Encode(t)
	return strings.TrimSuffix(strings.TrimSuffix(b.String(), "\n")[1:], `"`)
}

// Len is how many texts the set hides.
func (s *Set) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.seen)
}

// Writer writes what is written to it to another writer, with each text
// of its Set replaced by Mask. The end of a write that may be the start
// of a text is held until the next write or Flush.
type Writer struct {
	mu      sync.Mutex
	w       io.Writer
	set     *Set
	pending []byte
	// While held, writes go to held, up to limit bytes; dropped counts
	// the bytes beyond.
	holding bool
	held    []byte
	limit   int
	dropped int
}

// NewWriter returns a Writer to w that hides the texts of set.
func NewWriter(w io.Writer, set *Set) *Writer {
	return &Writer{w: w, set: set}
}

// Write writes p, redacted. It reports all of p written unless the
// underlying writer fails.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.holding {
		keep := min(len(p), w.limit-len(w.held))
		w.held = append(w.held, p[:keep]...)
		w.dropped += len(p) - keep
		return len(p), nil
	}
	if err := w.write(p, false); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes what a write left pending.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.write(nil, true)
}

// write redacts pending and p; unless final, it keeps as pending the end
// that may start a text.
func (w *Writer) write(p []byte, final bool) error {
	buf := p
	if len(w.pending) > 0 {
		buf = append(w.pending, p...)
		w.pending = nil
	}
	out, rest := w.set.redact(buf, final)
	if len(rest) > 0 {
		w.pending = slices.Clone(rest)
	}
	if len(out) == 0 {
		return nil
	}
	_, err := w.w.Write(out)
	return err
}

// redact returns buf with every text of the set replaced by Mask, the
// longest where several start at one place, and, unless final, the end
// of buf that is a beginning of a text, held back.
func (s *Set) redact(buf []byte, final bool) (out, rest []byte) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if len(s.seen) == 0 {
		return buf, nil
	}
	last := 0
	for i := 0; i < len(buf); i++ {
		for _, t := range s.byFirst[buf[i]] {
			end := min(len(buf), i+len(t))
			if string(buf[i:end]) == t {
				out = append(append(out, buf[last:i]...), Mask...)
				i += len(t) - 1
				last = i + 1
				break
			}
			if !final && end == len(buf) && strings.HasPrefix(t, string(buf[i:])) {
				// Perhaps this text, continued by the next write.
				return append(out, buf[last:i]...), buf[i:]
			}
		}
	}
	if last == 0 {
		return buf, nil
	}
	return append(out, buf[last:]...), nil
}

// Log is a pair of Writers that share one Set, such as a container's
// standard output and error.
type Log struct {
	Set
	Stdout, Stderr *Writer
}

// NewLog returns a Log to stdout and stderr.
func NewLog(stdout, stderr io.Writer) *Log {
	l := &Log{}
	l.Stdout, l.Stderr = NewWriter(stdout, &l.Set), NewWriter(stderr, &l.Set)
	return l
}

// HoldLimit is how much a Log holds, per writer; what is written beyond is
// dropped, and Release says how much.
const HoldLimit = 32 << 20

// Hold holds what is written to the Log until Release.
func (l *Log) Hold() {
	for _, w := range []*Writer{l.Stdout, l.Stderr} {
		w.mu.Lock()
		w.holding, w.limit = true, HoldLimit
		w.mu.Unlock()
	}
}

// Release writes what the Log held, redacted with the texts its Set holds
// now, and stops holding. With discard, it writes instead why nothing was
// (the values to hide could not be known).
func (l *Log) Release(discard string) error {
	var errs []error
	for _, w := range []*Writer{l.Stdout, l.Stderr} {
		errs = append(errs, w.release(discard))
	}
	return errors.Join(errs...)
}

func (w *Writer) release(discard string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.holding {
		return nil
	}
	held, dropped := w.held, w.dropped
	w.holding, w.held, w.dropped = false, nil, 0
	if discard != "" {
		if len(held) == 0 {
			return nil
		}
		return w.write(fmt.Appendf(nil, "\ncaptf-runner: %d bytes of terraform's output left out: %s\n", len(held)+dropped, discard), false)
	}
	if err := w.write(held, false); err != nil {
		return err
	}
	if dropped > 0 {
		return w.write(fmt.Appendf(nil, "\ncaptf-runner: %d more bytes of terraform's output left out: it wrote more than %d MiB before the values to hide were known\n", dropped, HoldLimit>>20), false)
	}
	return nil
}

// Flush writes what both Writers left pending.
func (l *Log) Flush() error {
	return errors.Join(l.Stdout.Flush(), l.Stderr.Flush())
}
