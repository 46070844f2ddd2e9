// Package terminal makes text from files and API servers safe to print on a
// terminal: a file name or a free-text field may hold an escape sequence
// that recolours or rewrites the screen, or a line break that forges a
// line of output.
package terminal

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Quote returns s as it is when it holds only printable characters, and
// otherwise quoted as a Go string ("z\nq.tf", "\x1b[31m"): a line break,
// a tab or an escape in a name is shown, never acted on.
func Quote(s string) string {
	if printable(s) {
		return s
	}
	return strconv.Quote(s)
}

// Escape returns s with each control character other than a line break
// or a tab, and each byte that is not UTF-8, written as a Go escape
// (\x1b, \r, \u0085): for messages whose lines are meant, with names
// inside them that are not.
func Escape(s string) string {
	if printable(strings.NewReplacer("\n", "", "\t", "").Replace(s)) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\x` + strconv.FormatUint(uint64(s[i]), 16))
		case r == '\n' || r == '\t' || unicode.IsPrint(r):
			b.WriteString(s[i : i+size])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}

// printable reports whether s is UTF-8 of printable characters only.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	return !strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) })
}
