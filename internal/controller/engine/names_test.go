package engine

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestSecretNames(t *testing.T) {
	if got := PlanKeyName("tfc", "demo"); got != "captf-plankey-tfc-demo" {
		t.Errorf("plan key %q", got)
	}
	if got := InputsName("tfc", "demo"); got != "captf-inputs-tfc-demo" {
		t.Errorf("durable inputs %q", got)
	}
	if got := RunName("demo-apply-1a2b3"); got != "captf-run-demo-apply-1a2b3" {
		t.Errorf("per-run %q", got)
	}
	// A name past 253 characters becomes a prefix and 16 hex characters of
	// a hash: still unique, still within the limit.
	a, b := strings.Repeat("a", 250), strings.Repeat("a", 249)+"b"
	na, nb := InputsName("tfc", a), InputsName("tfc", b)
	if len(na) != MaxName || len(nb) != MaxName || na == nb {
		t.Errorf("shortened names: %d %d, equal %v", len(na), len(nb), na == nb)
	}
	if !strings.HasPrefix(na, "captf-inputs-tfc-aaaa") || strings.Count(na[len(na)-17:], "-") != 1 {
		t.Errorf("shortened name %q is not a prefix and a 16-hex hash", na)
	}
	if InputsName("tfc", a) != na {
		t.Error("shortening is not deterministic")
	}
}

// names are object names of every shape a TerraformCluster can have.
var names = []struct {
	reason, name string
}{
	{"one character", "a"},
	{"one digit", "7"},
	{"a common name", "demo"},
	{"ends in -<digits>", "prod-1"},
	{"ends in -<many digits>", "prod-20240601"},
	{"ends in -0", "prod-0"},
	{"digits only", "12345"},
	{"ends in digits without a dash", "prod1"},
	{"dotted", "prod.eu-west-1.example.com"},
	{"dotted, ending in -<digits> after the last dot", "a.b-2"},
	{"dotted, digits after the last dot", "prod-1.2"},
	{"53 characters, the longest that keeps its name", strings.Repeat("n", 53)},
	{"53 characters ending in -<digits>", strings.Repeat("n", 50) + "-12"},
	{"54 characters", strings.Repeat("n", 54)},
	{"63 characters", strings.Repeat("m", 63)},
	{"64 characters", strings.Repeat("m", 64)},
	{"64 characters ending in -<digits>", strings.Repeat("m", 62) + "-9"},
	{"200 characters", strings.Repeat("x", 200)},
	{"200 characters, dotted", strings.Repeat("abcdefghi.", 19) + "0123456789"},
	{"253 characters", strings.Repeat("z", 253)},
	{"253 characters ending in -<digits>", strings.Repeat("z", 249) + "-123"},
	{"253 characters, dotted", strings.Repeat("a.", 126) + "b"},
	{"a dot where the prefix is cut", strings.Repeat("p", 35) + ".q" + strings.Repeat("r", 30)},
	{"a dash where the prefix is cut", strings.Repeat("p", 35) + "-q" + strings.Repeat("r", 30)},
}

// backendRefuses is why terraform's or OpenTofu's kubernetes backend, or the
// API server, would refuse suffix, or "".
func backendRefuses(suffix string) string {
	// terraform (backend.go, hasNumericSuffix): the text after the last
	// "-" must not parse as an integer (it would be a chunk index).
	if i := strings.LastIndex(suffix, "-"); i >= 0 {
		if _, err := strconv.Atoi(suffix[i+1:]); err == nil {
			return "secret_suffix must not end with '-<number>'"
		}
	}
	// Both: the label tfstateSecretSuffix on the Secrets and the Lease.
	if errs := validation.IsValidLabelValue(suffix); len(errs) > 0 {
		return "label value: " + strings.Join(errs, "; ")
	}
	// Both: the Secret names (terraform checks them itself) and the Lease.
	for _, n := range []string{"tfstate-default-" + suffix, "tfstate-default-" + suffix + "-part-1000", "lock-tfstate-default-" + suffix} {
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
			return n + ": " + strings.Join(errs, "; ")
		}
	}
	return ""
}

func TestStateSuffix(t *testing.T) {
	seen := map[string]string{}
	for _, tc := range names {
		t.Run(tc.reason, func(t *testing.T) {
			if errs := validation.IsDNS1123Subdomain(tc.name); len(errs) > 0 {
				t.Fatalf("not an object name: %v", errs)
			}
			got := StateSuffix("tfc", tc.name)
			if why := backendRefuses(got); why != "" {
				t.Errorf("StateSuffix(%q) = %q, refused: %s", tc.name, got, why)
			}
			// The suffix the name always had is kept wherever the backend
			// took it, so that state is found again.
			old := "captf-tfc-" + tc.name
			if backendRefuses(old) == "" && got != old {
				t.Errorf("StateSuffix(%q) = %q, want the suffix it always had, %q", tc.name, got, old)
			}
			if got != old && !strings.HasPrefix(got, "captf-tfc.") {
				t.Errorf("StateSuffix(%q) = %q: a new suffix must start with captf-tfc.", tc.name, got)
			}
			if StateSuffix("tfc", tc.name) != got {
				t.Error("not deterministic")
			}
			if other, ok := seen[got]; ok {
				t.Errorf("%q and %q share the suffix %q", tc.name, other, got)
			}
			seen[got] = tc.name
		})
	}
}

// TestStateSuffixPinned: a suffix is where an object's state lives; it
// never changes once released.
func TestStateSuffixPinned(t *testing.T) {
	for name, want := range map[string]string{
		"demo":                   "captf-tfc-demo",
		"prod-1":                 "captf-tfc.prod-1.6d7d57e99198f824",
		strings.Repeat("a", 253): "captf-tfc." + strings.Repeat("a", 36) + ".32859a3ab65ac529",
	} {
		if got := StateSuffix("tfc", name); got != want {
			t.Errorf("StateSuffix(%.20q…) = %q, want %q", name, got, want)
		}
	}
	if got := StateSecretName("tfc", "prod-1"); got != "tfstate-default-captf-tfc.prod-1.6d7d57e99198f824" {
		t.Errorf("StateSecretName(prod-1) = %q", got)
	}
}

// TestStateSuffixRandomNames: valid and distinct over many random object
// names, the kept and the hashed form alike.
func TestStateSuffixRandomNames(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const alnum = "abcdefghijklmnopqrstuvwxyz0123456789"
	const inner = alnum + alnum + "--."
	randomName := func() string {
		n := 1 + rng.IntN(253)
		if rng.IntN(2) == 0 {
			n = 1 + rng.IntN(60) // around the limits that matter
		}
		b := make([]byte, n)
		for i := range b {
			b[i] = inner[rng.IntN(len(inner))]
			if i == 0 || i == n-1 || (i > 0 && (b[i-1] == '.' || b[i-1] == '-') && b[i] == '.') || (i > 0 && b[i-1] == '.' && b[i] == '-') {
				b[i] = alnum[rng.IntN(len(alnum))]
			}
		}
		if rng.IntN(3) == 0 && n < 250 {
			return string(b) + "-" + fmt.Sprint(rng.IntN(100))
		}
		return string(b)
	}
	seen := map[string]string{}
	for range 20000 {
		name := randomName()
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Fatalf("generated %q, not an object name: %v", name, errs)
		}
		s := StateSuffix("tfc", name)
		if why := backendRefuses(s); why != "" {
			t.Fatalf("StateSuffix(%q) = %q, refused: %s", name, s, why)
		}
		if other, ok := seen[s]; ok && other != name {
			t.Fatalf("%q and %q share the suffix %q", name, other, s)
		}
		seen[s] = name
	}
}

func TestNameLabel(t *testing.T) {
	seen := map[string]string{}
	for _, tc := range names {
		t.Run(tc.reason, func(t *testing.T) {
			got := NameLabel(tc.name)
			if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
				t.Errorf("NameLabel(%q) = %q: %v", tc.name, got, errs)
			}
			switch {
			case len(tc.name) <= MaxLabel && got != tc.name:
				t.Errorf("NameLabel(%q) = %q, want the name itself", tc.name, got)
			case len(tc.name) > MaxLabel:
				// A prefix and 16 hex characters of a hash.
				prefix, hash := got[:len(got)-17], got[len(got)-16:]
				if !strings.HasPrefix(tc.name, prefix) || got[len(got)-17] != '-' || hash != nameHash(tc.name) {
					t.Errorf("NameLabel(%q) = %q, not a prefix and the name's hash", tc.name, got)
				}
			}
			if other, ok := seen[got]; ok {
				t.Errorf("%q and %q share the label %q", tc.name, other, got)
			}
			seen[got] = tc.name
		})
	}
}

// TestNamesWithinLimits: every name made from an object name is a valid
// name of its kind, whatever the object's name.
func TestNamesWithinLimits(t *testing.T) {
	for _, tc := range names {
		t.Run(tc.reason, func(t *testing.T) {
			for what, n := range map[string]string{
				"plan key":         PlanKeyName("tfc", tc.name),
				"durable inputs":   InputsName("tfc", tc.name),
				"state":            StateSecretName("tfc", tc.name),
				"TerraformPlan":    PlanName(tc.name, "job", "p2:x"),
				"per-run":          RunName(shorten(tc.name, 40) + "-apply-1a2b3"),
				"Job (as in jobs)": shorten(tc.name, 40) + "-apply-1a2b3",
			} {
				if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
					t.Errorf("%s %q: %v", what, n, errs)
				}
			}
			if job := shorten(tc.name, 40) + "-apply-1a2b3"; len(job) > MaxLabel {
				t.Errorf("Job name %q is longer than %d (its pods' job-name label)", job, MaxLabel)
			}
		})
	}
}

// TestClusterStartsSerialized: a Job start of an object holds the
// starts of the other objects of its cluster, whatever their kind, and
// no other cluster's.
func TestClusterStartsSerialized(t *testing.T) {
	var k keyedMutex
	unlock := k.lock("default/fleet")
	other := make(chan struct{})
	go func() {
		defer close(other)
		k.lock("default/other")()
	}()
	<-other
	same := make(chan struct{})
	go func() {
		defer close(same)
		k.lock("default/fleet")()
	}()
	select {
	case <-same:
		t.Fatal("a second start of the same cluster went on while the first held it")
	case <-time.After(100 * time.Millisecond):
	}
	unlock()
	<-same
	if len(k.locks) != 0 {
		t.Errorf("%d keys kept after every holder left", len(k.locks))
	}
}
