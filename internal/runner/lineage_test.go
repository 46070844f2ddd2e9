package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/captf/captf/internal/tfstate"
	"github.com/captf/captf/internal/tftest"
)

// TestJobStateLineage: a Job started for a state (--state-lineage) runs on
// that state, and applies nothing when the state it finds is another: one
// deleted after the manager read it (terraform then plans from no state,
// to create everything again) or replaced by one of another lineage.
// Every operation is tried, those that run without a saved plan too.
func TestJobStateLineage(t *testing.T) {
	for _, bin := range tftest.Binaries(t) {
		t.Run(bin.Name, func(t *testing.T) {
			f := newJobFixture(t, bin)
			if code, m, log := f.run("apply", ""); code != 0 || m.Outcome != OutcomeApplied {
				t.Fatalf("first apply: exit %d, %+v\n%s", code, m, log)
			}
			statePath := filepath.Join(f.work, "terraform.tfstate")
			lineage := f.lineage(statePath)
			on := func(l string) func(*Job) { return func(j *Job) { j.StateLineage = l } }
			guarded := func(l string) func(*Job) { return func(j *Job) { j.StateLineage, j.Guard = l, true } }

			// On the state it was started for, every operation runs.
			f.vars(canaryPlain + "-2")
			code, plan, log := f.runWith("plan", "", on(lineage))
			if code != 0 || plan.Outcome != OutcomePlanned || plan.Plan.Change != 1 {
				t.Fatalf("plan on its state: exit %d, %+v\n%s", code, plan, log)
			}
			if code, m, log := f.runWith("apply", plan.Plan.PlanHash, on(lineage)); code != 0 || m.Outcome != OutcomeApplied {
				t.Fatalf("approved apply on its state: exit %d, %+v\n%s", code, m, log)
			}
			for _, c := range []struct {
				op   string
				edit func(*Job)
				want string
			}{
				{"refresh", on(lineage), OutcomeRefreshed},
				{"drift", on(lineage), OutcomeChecked},
				{"apply", guarded(lineage), OutcomeApplied},
				{"apply", on(lineage), OutcomeApplied},
			} {
				f.vars(canaryPlain + "-" + c.op + c.want)
				if code, m, log := f.runWith(c.op, "", c.edit); code != 0 || m.Outcome != c.want {
					t.Fatalf("%s on its state: exit %d, %+v\n%s", c.op, code, m, log)
				}
			}
			if got := f.lineage(statePath); got != lineage {
				t.Fatalf("the runs changed the lineage to %q", got)
			}

			// The state goes (deleted after the manager read it): nothing
			// runs. Nor on a state of another lineage.
			kept, err := os.ReadFile(statePath)
			if err != nil {
				t.Fatal(err)
			}
			for _, other := range []string{"deleted", "replaced"} {
				os.Remove(statePath)
				os.Remove(statePath + ".backup")
				if other == "replaced" {
					// Another state: a fresh one of the module, applied
					// under another lineage.
					if code, m, log := f.run("apply", ""); code != 0 || m.Outcome != OutcomeApplied {
						t.Fatalf("apply of another state: exit %d, %+v\n%s", code, m, log)
					}
				}
				before, _ := os.ReadFile(statePath)
				for _, c := range []struct {
					op, expect string
					edit       func(*Job)
				}{
					{"plan", "", on(lineage)},
					{"apply", plan.Plan.PlanHash, on(lineage)},
					{"apply", "", guarded(lineage)},
					{"apply", "", on(lineage)},
					{"refresh", "", on(lineage)},
					{"drift", "", on(lineage)},
					{"destroy", "", on(lineage)},
				} {
					code, m, log := f.runWith(c.op, c.expect, c.edit)
					if code == 0 || m.Outcome != OutcomeFailed || !strings.Contains(m.Error, ErrStateReplaced.Error()) || !strings.Contains(m.Error, "nothing was applied") {
						t.Errorf("%s %q on a %s state: exit %d, %+v, want a failure that says the state is not the run's\n%s", c.op, c.expect, other, code, m, log)
					}
					if after, _ := os.ReadFile(statePath); !bytes.Equal(before, after) {
						t.Fatalf("%s on a %s state wrote the state", c.op, other)
					}
				}
			}
			if err := os.WriteFile(statePath, kept, 0o644); err != nil {
				t.Fatal(err)
			}
			if code, m, log := f.runWith("destroy", "", on(lineage)); code != 0 || m.Outcome != OutcomeDestroyed {
				t.Fatalf("destroy on its state: exit %d, %+v\n%s", code, m, log)
			}
			if n := f.resources(statePath); n != 0 {
				t.Errorf("%d resources left after the destroy", n)
			}
		})
	}
}

func (f *jobFixture) lineage(path string) string {
	f.t.Helper()
	file, err := os.Open(path)
	if err != nil {
		f.t.Fatal(err)
	}
	defer file.Close()
	m, err := tfstate.ReadMeta(file)
	if err != nil || m.Lineage == "" {
		f.t.Fatalf("lineage of %s: %q, %v", path, m.Lineage, err)
	}
	return m.Lineage
}

func (f *jobFixture) resources(path string) int {
	f.t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		f.t.Fatal(err)
	}
	var st struct{ Resources []json.RawMessage }
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &st); err != nil {
			f.t.Fatal(err)
		}
	}
	return len(st.Resources)
}
