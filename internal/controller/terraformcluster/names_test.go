package terraformcluster

import (
	"strings"
	"testing"
)

func TestSecretNames(t *testing.T) {
	if got := planKeyName("demo"); got != "captf-plankey-tfc-demo" {
		t.Errorf("plan key %q", got)
	}
	if got := inputsName("demo"); got != "captf-inputs-tfc-demo" {
		t.Errorf("durable inputs %q", got)
	}
	if got := runName("demo-apply-1a2b3"); got != "captf-run-demo-apply-1a2b3" {
		t.Errorf("per-run %q", got)
	}
	// A name past 253 characters becomes a prefix and 16 hex characters of
	// a hash: still unique, still within the limit.
	a, b := strings.Repeat("a", 250), strings.Repeat("a", 249)+"b"
	na, nb := inputsName(a), inputsName(b)
	if len(na) != maxName || len(nb) != maxName || na == nb {
		t.Errorf("shortened names: %d %d, equal %v", len(na), len(nb), na == nb)
	}
	if !strings.HasPrefix(na, "captf-inputs-tfc-aaaa") || strings.Count(na[len(na)-17:], "-") != 1 {
		t.Errorf("shortened name %q is not a prefix and a 16-hex hash", na)
	}
	if inputsName(a) != na {
		t.Error("shortening is not deterministic")
	}
}
