package fingerprint

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"
)

// FuzzCompute feeds arbitrary bytes to the fingerprint. Whatever the input,
// Compute must not panic, must fail only with ErrMalformedPlan, must give
// the same answer read whole or a byte at a time, and a success must be a
// p2: hash. ReadValues must not panic either.
//
// The seeds are small on purpose: one change or the outputs of a real plan
// from terraform and tofu each, in testdata/fuzz/FuzzCompute (where the
// fuzzer's finds are kept too). A seed of kilobytes makes every mutation
// and every minimization slow, and the fuzzer then spends its time
// minimizing instead of exploring.
//
//	make fuzz   (FUZZTIME=10m make fuzz for longer)
func FuzzCompute(f *testing.F) {
	f.Add([]byte(doc(rc("a.x", "update", `"before":{"s":"\\\"","l":[1,{"k":null}]},"after":{"s":"\u00e9","l":[1.5e3,{"k":true}]},"after_unknown":{"l":[false,{"k":true}]}`))))
	h, err := New(testKey)
	if err != nil {
		f.Fatal(err)
	}
	h.Detail = true
	f.Fuzz(func(t *testing.T, plan []byte) {
		// ReadValues, which reads the same document for the log, fails
		// only with ErrMalformedPlan too.
		if _, err := ReadValues(bytes.NewReader(plan)); err != nil && !errors.Is(err, ErrMalformedPlan) {
			t.Fatalf("ReadValues: error %v is not ErrMalformedPlan", err)
		}
		whole, err := h.Compute(bytes.NewReader(plan))
		if err != nil {
			if !errors.Is(err, ErrMalformedPlan) {
				t.Fatalf("error %v is not ErrMalformedPlan", err)
			}
			if _, err2 := h.Compute(iotest.OneByteReader(bytes.NewReader(plan))); err2 == nil {
				t.Fatalf("whole: %v; one byte at a time: no error", err)
			}
			return
		}
		if len(whole.Report.PlanHash) != len(EmptyPlanHash) || whole.Report.PlanHash[:3] != Prefix {
			t.Fatalf("hash %q", whole.Report.PlanHash)
		}
		bytewise, err := h.Compute(iotest.OneByteReader(bytes.NewReader(plan)))
		if err != nil {
			t.Fatalf("whole: ok; one byte at a time: %v", err)
		}
		if bytewise.Report.PlanHash != whole.Report.PlanHash {
			t.Fatalf("whole %s, one byte at a time %s", whole.Report.PlanHash, bytewise.Report.PlanHash)
		}
	})
}

// TestStringsMatchJSON holds the parser's string decoding to
// encoding/json's on strings full of escapes: quotes and backslashes in
// runs, control characters, \u escapes, surrogate pairs and lone
// surrogates.
func TestStringsMatchJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	pieces := []string{`\"`, `\\`, `\/`, `\n`, `\t`, `\b`, `\f`, `\r`, `\u00e9`, `\u00E9`, `\ud83d\ude00`, `\ud83d`, `\ude00x`, `\u0000`, "é", "x", "ab", `\\\"`, `\\\\`}
	var tr tree
	for i := range 20000 {
		var b strings.Builder
		b.WriteByte('"')
		for range rng.IntN(8) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		b.WriteByte('"')
		src := b.String()
		var want string
		if err := json.Unmarshal([]byte(src), &want); err != nil {
			t.Fatalf("%d: %s: %v", i, src, err)
		}
		root, err := tr.parse([]byte(src))
		if err != nil {
			t.Fatalf("%d: %s: %v", i, src, err)
		}
		if got, _ := tr.stringOf(root); got != want {
			t.Fatalf("%d: %s: got %q, want %q", i, src, got, want)
		}
	}
}
