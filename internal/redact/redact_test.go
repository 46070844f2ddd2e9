package redact

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWriter(t *testing.T) {
	for _, tc := range []struct {
		reason string
		json   []string // values added with AddJSON
		writes []string
		want   string
	}{
		{reason: "nothing to hide", writes: []string{"a plan"}, want: "a plan"},
		{reason: "a value", json: []string{`"s3cret"`}, writes: []string{`token = "s3cret"` + "\n"}, want: `token = "(sensitive value)"` + "\n"},
		{reason: "a value split across writes", json: []string{`"s3cret"`}, writes: []string{"a s3", "c", "ret b"}, want: "a (sensitive value) b"},
		{reason: "a beginning of a value that ends otherwise", json: []string{`"s3cret"`}, writes: []string{"a s3c", "ure"}, want: "a s3cure"},
		{reason: "a beginning at the very end", json: []string{`"s3cret"`}, writes: []string{"a s3cr"}, want: "a s3cr"},
		{reason: "the longest of two at one place", json: []string{`"abcd"`, `"abcdef"`}, writes: []string{"abcdefg abcdx"}, want: Mask + "g " + Mask + "x"},
		{reason: "escaped as in a quoted string", json: []string{`"a\"b\\c"`}, writes: []string{`v = "a\"b\\c"`}, want: `v = "` + Mask + `"`},
		{reason: "each line of a heredoc", json: []string{`"first line\nsecond line"`}, writes: []string{"<<-EOT\n  first line\n  second line\nEOT"}, want: "<<-EOT\n  " + Mask + "\n  " + Mask + "\nEOT"},
		{reason: "the parts of an object and a number", json: []string{`{"k":["deep-value",123456]}`}, writes: []string{`k = ["deep-value", 123456]`}, want: `k = ["` + Mask + `", ` + Mask + `]`},
		{reason: "the parts of a string that is JSON", json: []string{`"{\"pw\":\"inner-secret\"}"`}, writes: []string{`pw = "inner-secret"`}, want: `pw = "` + Mask + `"`},
		{reason: "short values and literals stay", json: []string{`"abc"`, `true`, `null`, `"true"`, `12`}, writes: []string{"abc true null 12"}, want: "abc true null 12"},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			var out bytes.Buffer
			l := NewLog(&out, &out)
			for _, j := range tc.json {
				if err := l.AddJSON([]byte(j)); err != nil {
					t.Fatal(err)
				}
			}
			for _, w := range tc.writes {
				if n, err := l.Stdout.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
			}
			if err := l.Flush(); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, out.String()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestHold: what is written while held comes out on Release, redacted
// with the values added meanwhile; beyond HoldLimit it is dropped and
// counted, and Release with a reason writes only that.
func TestHold(t *testing.T) {
	var out, errOut bytes.Buffer
	l := NewLog(&out, &errOut)
	l.Stdout.Write([]byte("before "))
	l.Hold()
	l.Stdout.Write([]byte("plan shows s3cret"))
	l.Stderr.Write([]byte("warning s3cret"))
	if out.String() != "before " || errOut.Len() != 0 {
		t.Fatalf("written while held: %q, %q", out.String(), errOut.String())
	}
	l.Add("s3cret")
	if err := l.Release(""); err != nil {
		t.Fatal(err)
	}
	l.Flush()
	if want := "before plan shows " + Mask; out.String() != want {
		t.Errorf("stdout %q, want %q", out.String(), want)
	}
	if want := "warning " + Mask; errOut.String() != want {
		t.Errorf("stderr %q, want %q", errOut.String(), want)
	}

	out.Reset()
	l.Hold()
	l.Stdout.Write(bytes.Repeat([]byte("x"), HoldLimit))
	l.Stdout.Write([]byte("more"))
	l.Release("")
	if got := out.String(); len(got) < HoldLimit || !strings.HasSuffix(got, "captf-runner: 4 more bytes of terraform's output left out: it wrote more than 32 MiB before the values to hide were known\n") {
		t.Errorf("past the limit: …%q", got[max(0, len(got)-200):])
	}

	out.Reset()
	l.Hold()
	l.Stdout.Write([]byte("an unknown value"))
	l.Release("no values")
	if want := "\ncaptf-runner: 16 bytes of terraform's output left out: no values\n"; out.String() != want {
		t.Errorf("discarded: %q, want %q", out.String(), want)
	}
}

// FuzzWriter writes arbitrary text, cut at arbitrary places, through a
// Writer hiding arbitrary values. Whatever they are, the output is the
// same as that of one write, and no value of MinLen bytes or more is left
// in it outside a Mask.
//
//	make fuzz   (FUZZTIME=10m make fuzz for longer)
func FuzzWriter(f *testing.F) {
	f.Add("token = \"s3cret\"\n", "s3cret", "s3c", uint8(9), uint8(3))
	f.Add("abcdefg abcd", "abcdef", "abcd", uint8(2), uint8(5))
	f.Add("(sensitive value)", "sens", "value)", uint8(1), uint8(1))
	f.Fuzz(func(t *testing.T, text, v1, v2 string, cut1, cut2 uint8) {
		if strings.ContainsRune(v1+v2, 0) {
			return
		}
		var whole, parts bytes.Buffer
		w1, w2 := NewWriter(&whole, &Set{}), NewWriter(&parts, &Set{})
		for _, w := range []*Writer{w1, w2} {
			w.set.Add(v1, v2)
		}
		w1.Write([]byte(text))
		w1.Flush()
		a := min(int(cut1), len(text))
		b := min(a+int(cut2), len(text))
		for _, p := range []string{text[:a], text[a:b], text[b:]} {
			w2.Write([]byte(p))
		}
		w2.Flush()
		if whole.String() != parts.String() {
			t.Fatalf("one write: %q; cut at %d and %d: %q", whole.String(), a, b, parts.String())
		}
		left := strings.ReplaceAll(whole.String(), Mask, "\x00")
		for _, texts := range w1.set.byFirst {
			for _, v := range texts {
				if strings.Contains(left, v) {
					t.Fatalf("%q is left in %q", v, whole.String())
				}
			}
		}
		if w1.set.Len() == 0 && whole.String() != text {
			t.Fatalf("nothing to hide, and %q became %q", text, whole.String())
		}
	})
}

// BenchmarkWriter writes a 1 MiB log of terraform's kind through a Writer
// hiding 200 values.
func BenchmarkWriter(b *testing.B) {
	var set Set
	for i := range 200 {
		set.Add(fmt.Sprintf("secret-value-%03d-%x", i, i*7919))
	}
	line := []byte(`      ~ input  = { name = "demo-worker-0" -> "demo2-worker-0", token = "secret-value-042-147de" }` + "\n")
	log := bytes.Repeat(line, (1<<20)/len(line))
	b.SetBytes(int64(len(log)))
	for b.Loop() {
		w := NewWriter(io.Discard, &set)
		for p := log; len(p) > 0; p = p[min(len(p), 4096):] {
			w.Write(p[:min(len(p), 4096)])
		}
		w.Flush()
	}
}
