package fingerprint

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"testing/iotest"
)

// FuzzCompute feeds arbitrary bytes to the fingerprint, seeded with real
// plans from terraform and tofu. Whatever the input, Compute must not
// panic, must fail only with ErrMalformedPlan, must give the same answer
// read whole or a byte at a time, and a success must be a p2: hash.
//
//	go test -fuzz FuzzCompute ./pkg/fingerprint
func FuzzCompute(f *testing.F) {
	seeds, err := filepath.Glob("testdata/plans/*.json")
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no seed plans in testdata/plans: %v", err)
	}
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(doc(rc("a.x", "update", `"before":{"s":"\\\"","l":[1,{"k":null}]},"after":{"s":"\u00e9","l":[1.5e3,{"k":true}]},"after_unknown":{"l":[false,{"k":true}]}`))))
	h, err := New(testKey)
	if err != nil {
		f.Fatal(err)
	}
	h.Detail = true
	f.Fuzz(func(t *testing.T, plan []byte) {
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
