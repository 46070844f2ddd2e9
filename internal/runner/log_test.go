package runner

import (
	"os"
	"strings"
	"testing"

	"github.com/captf/captf/internal/redact"
	"github.com/captf/captf/internal/tftest"
)

// TestJobHidesWhatThePlanMarks: terraform prints in clear the old value of
// an attribute computed from a sensitive one (terraform_data's output,
// from an input that holds a sensitive variable). The Job's log hides it
// all the same: the plan marks the input sensitive, with that value; in a
// destroy, which makes no saved plan, the state does.
func TestJobHidesWhatThePlanMarks(t *testing.T) {
	// The old token is only in the state and the plan, no longer in the
	// inputs; its quotes are escaped where terraform prints it.
	const (
		canaryOld = `CANARY-OLD-"TOKEN"-7c2d`
		canaryNew = "CANARY-NEW-TOKEN-41fa"
	)
	for _, bin := range tftest.Binaries(t) {
		t.Run(bin.Name, func(t *testing.T) {
			f := newJobFixture(t, bin)
			clean := func(what, log string) {
				t.Helper()
				for _, c := range []string{"CANARY-OLD", canaryNew, "CANARY-THIRD", canarySecret} {
					if i := strings.Index(log, c); i >= 0 {
						t.Errorf("the %s log shows %q: %s", what, c, log[max(0, i-200):min(len(log), i+60)])
					}
				}
			}
			f.write("terraform.tfvars.json", `{"size":"one","token":"CANARY-OLD-\"TOKEN\"-7c2d"}`)
			os.Remove(f.key)
			code, m, log := f.run("apply", "")
			if code != 0 || m.Outcome != OutcomeApplied {
				t.Fatalf("first apply: exit %d, %+v\n%s", code, m, log)
			}
			clean("first apply's", log)
			if err := os.WriteFile(f.key, []byte(strings.Repeat("k", 32)), 0o440); err != nil {
				t.Fatal(err)
			}

			f.write("terraform.tfvars.json", `{"size":"two","token":"`+canaryNew+`"}`)
			code, plan, log := f.run("plan", "")
			if code != 0 || plan.Outcome != OutcomePlanned || plan.Plan.Change != 1 {
				t.Fatalf("plan: exit %d, %+v\n%s", code, plan, log)
			}
			clean("plan's", log)
			if !strings.Contains(log, redact.Mask) || !strings.Contains(log, `"two"`) {
				t.Errorf("the plan's log lacks terraform's rendering of the change:\n%s", log)
			}
			code, m, log = f.run("apply", plan.Plan.PlanHash)
			if code != 0 || m.Outcome != OutcomeApplied {
				t.Fatalf("approved apply: exit %d, %+v\n%s", code, m, log)
			}
			clean("approved apply's", log)
			// A destroy with other inputs than the state's: the state's
			// token is known from the state alone.
			f.write("terraform.tfvars.json", `{"size":"two","token":"CANARY-THIRD-TOKEN-0b9e"}`)
			code, m, log = f.run("destroy", "")
			if code != 0 || m.Outcome != OutcomeDestroyed {
				t.Fatalf("destroy: exit %d, %+v\n%s", code, m, log)
			}
			clean("destroy's", log)
		})
	}
}
