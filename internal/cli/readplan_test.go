package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/captf/captf/internal/runner"
	"github.com/captf/captf/internal/tftest"
)

// TestPlanReadsThePlanFile: captf plan and captf apply read the saved plan
// file themselves, with terraform and with tofu: no show, and the schemas
// asked for once; when they cannot be had, show -json takes over and the
// hash is the same.
func TestPlanReadsThePlanFile(t *testing.T) {
	setup(t)
	for _, bin := range tftest.Binaries(t) {
		t.Run(bin.Name, func(t *testing.T) {
			dir := tftest.CopyRoot(t, "testdata/roots/canary")
			log := filepath.Join(t.TempDir(), "commands")
			// Each command terraform runs goes to the log; FAIL_AT names
			// one that fails.
			wrapped := wrapTerraform(t, bin.Path, `echo "$1" >> "`+log+`"
if [ "$1" = "$FAIL_AT" ]; then exit 1; fi`)
			commands := func() []string {
				t.Helper()
				b, _ := os.ReadFile(log)
				os.Remove(log)
				return strings.Fields(string(b))
			}

			first := captf(t, "plan", dir, "--binary", wrapped, "--json").want(t, 0).report(t)
			if got := commands(); slices.Contains(got, "show") || !slices.Contains(got, "providers") {
				t.Fatalf("first plan ran %v: want providers schema, no show", got)
			}
			again := captf(t, "plan", dir, "--binary", wrapped, "--json").want(t, 0).report(t)
			if got := commands(); !slices.Equal(got, []string{"plan"}) {
				t.Fatalf("second plan ran %v: want plan alone", got)
			}
			if again.PlanHash != first.PlanHash {
				t.Fatalf("hash %s, then %s", first.PlanHash, again.PlanHash)
			}

			// Without schemas (none cached, providers failing), show -json
			// reads the plan, to the same hash.
			os.Remove(filepath.Join(dir, runner.StateDir, runner.SchemaCacheFile))
			t.Setenv("FAIL_AT", "providers")
			viaShow := captf(t, "plan", dir, "--binary", wrapped, "--json").want(t, 0).report(t)
			if got := commands(); !slices.Contains(got, "show") {
				t.Fatalf("with providers failing, plan ran %v: want show", got)
			}
			if viaShow.PlanHash != first.PlanHash {
				t.Fatalf("through show -json hash %s, read here %s", viaShow.PlanHash, first.PlanHash)
			}
			t.Setenv("FAIL_AT", "")

			// A cache whose schemas do not fit (providers upgraded behind
			// its back): show -json reads this plan, the cache goes, and
			// the next plan asks for the schemas again.
			cache := filepath.Join(dir, runner.StateDir, runner.SchemaCacheFile)
			captf(t, "plan", dir, "--binary", wrapped, "--json").want(t, 0)
			commands()
			var c map[string]json.RawMessage
			if b, err := os.ReadFile(cache); err != nil || json.Unmarshal(b, &c) != nil {
				t.Fatalf("schema cache: %v", err)
			}
			c["schemas"] = json.RawMessage(`{"format_version":"1.0","provider_schemas":{}}`)
			b, _ := json.Marshal(c)
			write(t, cache, b, 0o600)
			stale := captf(t, "plan", dir, "--binary", wrapped, "--json").want(t, 0).report(t)
			if got := commands(); !slices.Contains(got, "show") || stale.PlanHash != first.PlanHash {
				t.Fatalf("with stale schemas, plan ran %v and hashed %s: want show and %s", got, stale.PlanHash, first.PlanHash)
			}
			if _, err := os.Stat(cache); err == nil {
				t.Fatal("the stale schema cache is still there")
			}
			captf(t, "plan", dir, "--binary", wrapped, "--json").want(t, 0)
			if got := commands(); slices.Contains(got, "show") || !slices.Contains(got, "providers") {
				t.Fatalf("after a stale cache, plan ran %v: want the schemas asked again, no show", got)
			}

			captf(t, "apply", dir, "--binary", wrapped, "--expect-plan", first.PlanHash).want(t, 0)
			if got := commands(); slices.Contains(got, "show") || !slices.Contains(got, "apply") {
				t.Fatalf("apply ran %v: want no show", got)
			}
		})
	}
}
