package terminal

import "testing"

func TestQuoteAndEscape(t *testing.T) {
	for _, c := range []struct{ in, quote, escape string }{
		{"main.tf", "main.tf", "main.tf"},
		{"a b/é.tf", "a b/é.tf", "a b/é.tf"},
		{"z\nall good\n\x1b[31mq.tf", `"z\nall good\n\x1b[31mq.tf"`, "z\nall good\n\\x1b[31mq.tf"},
		{"cr\rtab\t", `"cr\rtab\t"`, "cr\\rtab\t"},
		{"bad\xffutf8", `"bad\xffutf8"`, `bad\xffutf8`},
		{"c1\u009bx", `"c1\u009bx"`, `c1\u009bx`},
	} {
		if got := Quote(c.in); got != c.quote {
			t.Errorf("Quote(%q) = %s, want %s", c.in, got, c.quote)
		}
		if got := Escape(c.in); got != c.escape {
			t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.escape)
		}
	}
}
