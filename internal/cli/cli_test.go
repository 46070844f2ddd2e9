package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/captf/captf/internal/preview/capabilities"
	"github.com/captf/captf/internal/runner"
	"github.com/captf/captf/internal/tfexec"
	"github.com/captf/captf/internal/tftest"
	"github.com/captf/captf/pkg/fingerprint"
)

var update = flag.Bool("update", false, "rewrite golden files")

// These tests run the captf command line in-process against the real
// terraform and the real tofu (see internal/tftest): nothing is mocked.

type outcome struct {
	code           int
	stdout, stderr string
}

func captf(t *testing.T, args ...string) outcome {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr, capabilities.All(&stderr))
	return outcome{code, stdout.String(), stderr.String()}
}

func (o outcome) report(t *testing.T) fingerprint.Report {
	t.Helper()
	var r fingerprint.Report
	if err := json.Unmarshal([]byte(o.stdout), &r); err != nil {
		t.Fatalf("report JSON: %v\nstdout: %s\nstderr: %s", err, o.stdout, o.stderr)
	}
	return r
}

func (o outcome) refusal(t *testing.T) refusal {
	t.Helper()
	var r refusal
	if err := json.Unmarshal([]byte(o.stdout), &r); err != nil {
		t.Fatalf("apply JSON: %v\nstdout: %s\nstderr: %s", err, o.stdout, o.stderr)
	}
	return r
}

func (o outcome) want(t *testing.T, code int) outcome {
	t.Helper()
	if o.code != code {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", o.code, code, o.stdout, o.stderr)
	}
	return o
}

// setup gives each test an isolated temporary directory (so leftover plan
// files would be seen) and terraform a CLI config of the test's own.
func setup(t *testing.T) string {
	t.Helper()
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	for _, kv := range tftest.Env(t) {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	return tmp
}

func writeVars(t *testing.T, dir string, replicas, plain string) {
	t.Helper()
	vars := "secret = \"CANARY-SENSITIVE-7f3a9c\"\nplain = \"" + plain + "\"\nreplicas = " + replicas + "\n"
	if err := os.WriteFile(filepath.Join(dir, "terraform.tfvars"), []byte(vars), 0o644); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, path string, data []byte, perm os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, data, perm); err != nil {
		t.Fatal(err)
	}
}

func readState(t *testing.T, dir string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "terraform.tfstate"))
	if err != nil {
		t.Fatalf("state: %v", err)
	}
	return b
}

func TestCycle(t *testing.T) {
	for _, bin := range tftest.Binaries(t) {
		t.Run(bin.Name, func(t *testing.T) {
			setup(t)
			dir := tftest.CopyRoot(t, "testdata/roots/canary")
			b := "--binary=" + bin.Path

			// The first apply: plan, approve, apply.
			first := captf(t, "plan", dir, b, "--json").want(t, 0).report(t)
			if first.Add != 2 || first.OutputChanges != 2 {
				t.Fatalf("first plan report: %+v", first)
			}
			captf(t, "apply", dir, b, "--expect-plan", first.PlanHash).want(t, 0)

			// Plan a change and approve it, then change a variable again:
			// the approved apply is refused and the state is untouched.
			writeVars(t, dir, "2", "CANARY-PLAIN-41d2e8")
			approved := captf(t, "plan", dir, b, "--json").want(t, 0).report(t)
			writeVars(t, dir, "2", "CANARY-PLAIN-changed")
			before := readState(t, dir)
			ref := captf(t, "apply", dir, b, "--json", "--expect-plan", approved.PlanHash).want(t, runner.ExitPlanChanged).refusal(t)
			if ref.Applied || ref.Reason != ReasonPlanChanged || ref.Plan.PlanHash == approved.PlanHash || ref.Plan.Empty() {
				t.Fatalf("refusal: %+v", ref)
			}
			if !bytes.Equal(before, readState(t, dir)) {
				t.Fatal("a refused apply changed the state file")
			}
			// It says what moved: addresses and paths, no values.
			moved := map[string]fingerprint.Difference{}
			for _, d := range ref.Moved.Differences {
				moved[d.Address] = d
			}
			// The approved plan created app[1]; the fresh one creates it with
			// another name and also renames app[0].
			if d := moved["terraform_data.app[1]"]; d.Kind != fingerprint.Changed || !cmp.Equal(d.Paths, []string{"input"}) {
				t.Errorf("moved app[1] = %+v, want changed at input", d)
			}
			if d := moved["terraform_data.app[0]"]; d.Kind != fingerprint.Added || d.Labels != "update" {
				t.Errorf("moved app[0] = %+v, want added (update)", d)
			}
			if d := moved["output.names"]; d.Kind != fingerprint.Changed {
				t.Errorf("moved output.names = %+v, want changed", d)
			}

			// Approving the new hash applies it.
			captf(t, "apply", dir, b, "--expect-plan", ref.Plan.PlanHash).want(t, 0)
			if bytes.Equal(before, readState(t, dir)) {
				t.Fatal("the approved apply did not change the state")
			}

			// A leftover approval of a plan that did not change applies:
			// plans of the same state and inputs hash alike.
			writeVars(t, dir, "3", "CANARY-PLAIN-changed")
			leftover := captf(t, "plan", dir, b, "--json").want(t, 0).report(t)
			again := captf(t, "plan", dir, b, "--json").want(t, 0).report(t)
			if leftover.PlanHash != again.PlanHash {
				t.Fatalf("two plans of the same state hash differently: %s, %s", leftover.PlanHash, again.PlanHash)
			}
			captf(t, "apply", dir, b, "--expect-plan", leftover.PlanHash).want(t, 0)

			// Drift between approval and apply is refused: the state is
			// changed behind captf's back (terraform run directly).
			writeVars(t, dir, "1", "CANARY-PLAIN-changed")
			drift := captf(t, "plan", dir, b, "--json").want(t, 0).report(t)
			var tfErr bytes.Buffer
			tf := &tfexec.Terraform{Bin: bin.Path, Dir: dir, Stderr: &tfErr}
			other := filepath.Join(t.TempDir(), "other.tfplan")
			writeVars(t, dir, "2", "CANARY-PLAIN-changed")
			if err := tf.Plan(context.Background(), other); err != nil {
				t.Fatal(err)
			}
			if err := tf.Apply(context.Background(), other); err != nil {
				t.Fatalf("%v\n%s", err, tfErr.String())
			}
			writeVars(t, dir, "1", "CANARY-PLAIN-changed")
			drifted := readState(t, dir)
			ref = captf(t, "apply", dir, b, "--json", "--expect-plan", drift.PlanHash).want(t, runner.ExitPlanChanged).refusal(t)
			if !bytes.Equal(drifted, readState(t, dir)) {
				t.Fatal("an apply refused for drift changed the state")
			}

			// Apply what is there now, then the plan is empty: it needs no
			// approval, and an approval of a non-empty plan is refused.
			captf(t, "apply", dir, b, "--expect-plan", ref.Plan.PlanHash).want(t, 0)
			captf(t, "apply", dir, b).want(t, 0)
			captf(t, "apply", dir, b, "--expect-plan", fingerprint.EmptyPlanHash).want(t, 0)
			if none := captf(t, "apply", dir, b, "--json").want(t, 0).refusal(t); none.Applied || none.Reason != ReasonNoChanges {
				t.Errorf("an empty plan's apply as JSON: %+v", none)
			}
			empty := captf(t, "apply", dir, b, "--json", "--expect-plan", drift.PlanHash).want(t, runner.ExitPlanChanged).refusal(t)
			if !empty.Plan.Empty() || empty.Applied {
				t.Errorf("empty plan after a non-empty approval: %+v", empty)
			}

			// A non-empty plan without an approval, or with a p1: hash, is
			// not applied.
			writeVars(t, dir, "2", "CANARY-PLAIN-changed")
			stateNow := readState(t, dir)
			captf(t, "apply", dir, b).want(t, runner.ExitPlanChanged)
			if na := captf(t, "apply", dir, b, "--json").want(t, runner.ExitPlanChanged).refusal(t); na.Reason != ReasonNotApproved || na.Moved != nil {
				t.Errorf("an unapproved apply as JSON: %+v", na)
			}
			p1 := "p1:" + strings.TrimPrefix(ref.Plan.PlanHash, "p2:")
			out := captf(t, "apply", dir, b, "--expect-plan", p1).want(t, runner.ExitPlanChanged)
			fresh := captf(t, "plan", dir, b, "--json").want(t, 0).report(t).PlanHash
			for _, say := range []string{p1 + " is a hash of an older scheme (p1:), which can no longer be verified", "Approve the plan again by its p2: hash", "--expect-plan " + fresh} {
				if !strings.Contains(out.stdout, say) {
					t.Errorf("p1 refusal does not say %q:\n%s", say, out.stdout)
				}
			}
			if !strings.Contains(out.stderr, "approve the plan again by its p2: hash "+fresh) {
				t.Errorf("p1 refusal's error does not name the p2: hash to approve:\n%s", out.stderr)
			}
			p1JSON := captf(t, "apply", dir, b, "--json", "--expect-plan", p1).want(t, runner.ExitPlanChanged).refusal(t)
			if p1JSON.Applied || p1JSON.Reason != ReasonOldScheme || p1JSON.Moved != nil || p1JSON.Plan.PlanHash != fresh {
				t.Errorf("p1 refusal as JSON: %+v", p1JSON)
			}
			if !bytes.Equal(stateNow, readState(t, dir)) {
				t.Fatal("an unapproved apply changed the state")
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	tmp := setup(t)
	bin := tftest.Terraform(t)
	dir := tftest.CopyRoot(t, "testdata/roots/canary")
	short := filepath.Join(tmp, "short-key")
	write(t, short, bytes.Repeat([]byte{1}, 31), 0o600)
	plan := filepath.Join(tmp, "plan.json")
	write(t, plan, []byte(`{"format_version":"1.2","planned_values":{},"resource_changes":[{"address":"a.b","change":{"actions":["create"],"after":{`), 0o600)

	cases := []struct {
		name string
		args []string
		want string
	}{
		{"short key on plan", []string{"plan", dir, "--binary", bin.Path, "--plan-key-file", short}, "holds 31 bytes; at least 32"},
		{"short key on apply", []string{"apply", dir, "--binary", bin.Path, "--plan-key-file", short, "--expect-plan", fingerprint.EmptyPlanHash}, "holds 31 bytes"},
		{"missing key file", []string{"plan", dir, "--binary", bin.Path, "--plan-key-file", filepath.Join(tmp, "nope")}, "does not exist"},
		{"fingerprint without key", []string{"fingerprint", plan}, "--plan-key-file is required"},
		{"fingerprint with short key", []string{"fingerprint", "--plan-key-file", short, plan}, "holds 31 bytes"},
		{"malformed expect-plan", []string{"apply", dir, "--binary", bin.Path, "--expect-plan", "p2:zz"}, "is not a plan hash"},
		{"unknown flag", []string{"plan", dir, "--frobnicate"}, "unknown flag"},
		{"two dirs", []string{"plan", dir, dir}, "at most one DIR"},
		{"not a dir", []string{"plan", filepath.Join(tmp, "nope")}, "is not a directory"},
		{"a key file without end", []string{"plan", dir, "--binary", bin.Path, "--plan-key-file", "/dev/zero"}, "holds more than 4096 bytes"},
		{"a key file without end on fingerprint", []string{"fingerprint", "--plan-key-file", "/dev/zero", plan}, "holds more than 4096 bytes"},
		{"a var file that is a directory", []string{"plan", dir, "--binary", bin.Path, "--var-file", tmp}, "var file " + tmp + " is a directory"},
		{"no command", nil, "captf needs a command"},
		{"unknown command", []string{"pln", dir}, `unknown command "pln" for "captf"; did you mean plan?`},
		{"extra argument to apply", []string{"apply", dir, "extra", "--expect-plan", fingerprint.EmptyPlanHash}, "at most one DIR"},
		{"no preview command", []string{"preview"}, "captf preview needs a command"},
		{"unknown preview command", []string{"preview", "frob"}, `unknown command "frob" for "captf preview"`},
		{"extra argument to preview plan", []string{"preview", "plan", "extra"}, `captf preview plan takes no arguments, got "extra"`},
		{"extra argument to preview apply", []string{"preview", "apply", "extra", "--expect-digest", "cs1:" + strings.Repeat("0", 64)}, "takes no arguments"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := captf(t, c.args...).want(t, runner.ExitBadInput)
			if !strings.Contains(out.stderr, c.want) {
				t.Errorf("stderr %q does not say %q", out.stderr, c.want)
			}
		})
	}
	// A refused key stops everything before terraform runs: no init.
	if _, err := os.Stat(filepath.Join(dir, ".terraform")); err == nil {
		t.Error("terraform ran although the key was refused")
	}

	// A malformed plan document exits 2 and names what is wrong.
	key := filepath.Join(tmp, "key")
	write(t, key, bytes.Repeat([]byte{2}, 32), 0o600)
	out := captf(t, "fingerprint", "--plan-key-file", key, plan).want(t, runner.ExitBadInput)
	if !strings.Contains(out.stderr, "resource_changes[0]: ") || !strings.Contains(out.stderr, "unexpected end of input") {
		t.Errorf("stderr %q does not name what is wrong", out.stderr)
	}
}

func TestFingerprintCommand(t *testing.T) {
	tmp := setup(t)
	key := filepath.Join(tmp, "key")
	write(t, key, bytes.Repeat([]byte{3}, 32), 0o600)
	plan := filepath.Join(tmp, "plan.json")
	write(t, plan, []byte(`{"format_version":"1.2","planned_values":{},"resource_changes":[{"address":"a.b","change":{"actions":["delete"]}}]}`), 0o600)
	out := captf(t, "fingerprint", "--plan-key-file", key, plan).want(t, 0)
	first, _, _ := strings.Cut(out.stdout, "\n")
	if !strings.HasPrefix(first, "p2:") || len(first) != 67 {
		t.Fatalf("first line %q is not the hash", first)
	}
	rep := captf(t, "fingerprint", "--plan-key-file", key, "--json", plan).want(t, 0).report(t)
	if rep.PlanHash != first || rep.Destroy != 1 || !cmp.Equal(rep.Resources, []string{"a.b (delete)"}) {
		t.Errorf("--json report %+v, hash line %s", rep, first)
	}
}

// TestGoldenReport plans a real change of every kind (create, update,
// replace, delete, import, move, forget, output change) with terraform and
// with tofu, and compares the report with a golden file.
func TestGoldenReport(t *testing.T) {
	golden := filepath.Join("testdata", "golden-report.json")
	for _, bin := range tftest.Binaries(t) {
		t.Run(bin.Name, func(t *testing.T) {
			setup(t)
			dir := tftest.CopyRoot(t, "testdata/roots/golden/v1")
			b := "--binary=" + bin.Path
			first := captf(t, "plan", dir, b, "--json").want(t, 0).report(t)
			captf(t, "apply", dir, b, "--expect-plan", first.PlanHash).want(t, 0)
			v2, err := os.ReadFile("testdata/roots/golden/v2/main.tf")
			if err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(dir, "main.tf"), v2, 0o644)
			got := captf(t, "plan", dir, b, "--json").want(t, 0).report(t)
			if !strings.HasPrefix(got.PlanHash, "p2:") || got.Empty() {
				t.Fatalf("plan hash %q", got.PlanHash)
			}
			got.PlanHash = "(keyed; differs per root)"
			b2, _ := json.MarshalIndent(got, "", "  ")
			if *update && bin.Name == "terraform" {
				write(t, golden, append(b2, '\n'), 0o644)
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(string(want), string(b2)+"\n"); d != "" {
				t.Errorf("report differs from %s (-want +got):\n%s", golden, d)
			}
			// The approved golden plan applies, and then nothing is left.
			h := captf(t, "plan", dir, b, "--json").want(t, 0).report(t).PlanHash
			captf(t, "apply", dir, b, "--expect-plan", h).want(t, 0)
			if r := captf(t, "plan", dir, b, "--json").want(t, 0).report(t); !r.Empty() {
				t.Errorf("after the apply the plan is not empty: %+v", r)
			}
		})
	}
}

// captfOwn is what captf itself printed: all of stdout in JSON mode, else
// stdout from captf's first line on (terraform's plan comes before), and
// captf's lines on stderr (terraform's diagnostics and, in JSON mode, its
// plan rendering go there too).
func captfOwn(t *testing.T, o outcome) string {
	t.Helper()
	own := o.stdout
	if !strings.HasPrefix(strings.TrimSpace(own), "{") {
		i := strings.Index(own, "\ncaptf: ")
		if i < 0 {
			t.Fatalf("no captf summary in stdout:\n%s", own)
		}
		own = own[i:]
	}
	for _, l := range strings.Split(o.stderr, "\n") {
		if strings.HasPrefix(l, "captf: ") {
			own += l + "\n"
		}
	}
	return own
}

// TestNoValueLeaks runs plan and apply (approved and refused) on a root
// full of canaries and checks captf's own output, its report and every file
// it leaves.
func TestNoValueLeaks(t *testing.T) {
	const secret, plain = "CANARY-SENSITIVE-7f3a9c", "CANARY-PLAIN-41d2e8"
	for _, bin := range tftest.Binaries(t) {
		t.Run(bin.Name, func(t *testing.T) {
			tmp := setup(t)
			dir := tftest.CopyRoot(t, "testdata/roots/canary")
			b := "--binary=" + bin.Path
			var outs []outcome
			human := captf(t, "plan", dir, b).want(t, 0)
			outs = append(outs, human)
			rep := captf(t, "plan", dir, b, "--json").want(t, 0)
			outs = append(outs, rep)
			outs = append(outs, captf(t, "apply", dir, b, "--expect-plan", rep.report(t).PlanHash).want(t, 0))
			writeVars(t, dir, "2", plain+"-2")
			approved := captf(t, "plan", dir, b, "--json").want(t, 0)
			outs = append(outs, approved)
			writeVars(t, dir, "3", plain+"-3")
			outs = append(outs, captf(t, "apply", dir, b, "--expect-plan", approved.report(t).PlanHash).want(t, runner.ExitPlanChanged))
			outs = append(outs, captf(t, "apply", dir, b, "--json", "--expect-plan", approved.report(t).PlanHash).want(t, runner.ExitPlanChanged))

			for _, o := range outs {
				own := captfOwn(t, o)
				for _, canary := range []string{secret, plain} {
					if strings.Contains(own, canary) {
						t.Errorf("canary %s in captf's own output:\n%s", canary, own)
					}
				}
			}
			if !strings.Contains(human.stdout, plain) || !strings.Contains(human.stdout, "(sensitive value)") {
				t.Error("terraform's own plan rendering is missing: the canary check above proves nothing")
			}

			// No file captf leaves holds a value or the plan JSON; only
			// terraform's own state file holds values.
			for _, root := range []string{dir, tmp} {
				walkErr := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
					if err != nil || d.IsDir() {
						return err
					}
					name := d.Name()
					if name == "terraform.tfstate" || name == "terraform.tfstate.backup" || name == "terraform.tfvars" {
						return nil
					}
					data, err := os.ReadFile(path)
					if err != nil {
						return err
					}
					for _, bad := range []string{secret, plain, `"resource_changes"`, `"planned_values"`} {
						if bytes.Contains(data, []byte(bad)) {
							t.Errorf("%s contains %s", path, bad)
						}
					}
					if strings.HasSuffix(name, ".tfplan") {
						t.Errorf("a plan file was left at %s", path)
					}
					return nil
				})
				if walkErr != nil {
					t.Fatal(walkErr)
				}
			}
			// The per-root key exists, mode 0600, and is git-ignored.
			info, err := os.Stat(filepath.Join(dir, ".captf", "plan-key"))
			if err != nil || info.Mode().Perm() != 0o600 || info.Size() != 32 {
				t.Errorf("plan key: %v %v", info, err)
			}
			if ig, _ := os.ReadFile(filepath.Join(dir, ".captf", ".gitignore")); !bytes.Contains(ig, []byte("\n*\n")) {
				t.Errorf(".captf/.gitignore = %q", ig)
			}
		})
	}
}

// TestDamagedRecord: when the record of the approved plan cannot be read,
// a refused apply still applies nothing and says why what moved is
// unknown: the file and the place in it, no value.
func TestDamagedRecord(t *testing.T) {
	setup(t)
	bin := tftest.Binaries(t)[0]
	dir := tftest.CopyRoot(t, "testdata/roots/canary")
	b := "--binary=" + bin.Path
	captf(t, "apply", dir, b, "--expect-plan", captf(t, "plan", dir, b, "--json").want(t, 0).report(t).PlanHash).want(t, 0)

	writeVars(t, dir, "2", "CANARY-PLAIN-41d2e8")
	approved := captf(t, "plan", dir, b, "--json").want(t, 0).report(t)
	record := filepath.Join(dir, runner.StateDir, "plans", strings.ReplaceAll(approved.PlanHash, ":", "-")+".json")
	data, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	write(t, record, data[:len(data)-2], 0o600)

	writeVars(t, dir, "2", "CANARY-PLAIN-changed")
	before := readState(t, dir)
	out := captf(t, "apply", dir, b, "--json", "--expect-plan", approved.PlanHash).want(t, runner.ExitPlanChanged)
	ref := out.refusal(t)
	want := "plan record " + record + ": changes: unexpected EOF"
	if ref.Applied || ref.Moved == nil || ref.Moved.Unknown != want || ref.Moved.Differences != nil {
		t.Errorf("moved = %+v, want unknown: %s", ref.Moved, want)
	}
	if !bytes.Equal(before, readState(t, dir)) {
		t.Error("a refused apply changed the state file")
	}
	// stderr is terraform's own output, which shows the plan.
	if strings.Contains(out.stdout, "CANARY") {
		t.Errorf("the refusal shows a value:\n%s", out.stdout)
	}
}

// TestStalePlanJSON: when terraform refuses the saved plan as stale (the
// state changed between captf's plan and its apply), apply --json still
// prints its document, saying why nothing was applied. The state is
// changed by a second, ungated terraform apply that the wrapper runs just
// before captf's: the real terraform, with a concurrent run played.
func TestStalePlanJSON(t *testing.T) {
	setup(t)
	bin := tftest.Terraform(t)
	dir := tftest.CopyRoot(t, "testdata/roots/canary")
	racing := wrapTerraform(t, bin.Path, `if [ "$1" = apply ]; then "$REAL" apply -input=false -no-color -auto-approve >/dev/null || exit 1; fi`)
	approved := captf(t, "plan", dir, "--binary", bin.Path, "--json").want(t, 0).report(t)
	out := captf(t, "apply", dir, "--binary", racing, "--json", "--expect-plan", approved.PlanHash).want(t, runner.ExitPlanChanged)
	ref := out.refusal(t)
	if ref.Applied || ref.Reason != ReasonStalePlan || ref.Approved != approved.PlanHash || ref.Plan.PlanHash != approved.PlanHash {
		t.Errorf("stale plan refusal: %+v", ref)
	}
	if !strings.Contains(out.stderr, "saved plan is stale") {
		t.Errorf("stderr does not say the plan was stale:\n%s", out.stderr)
	}
	if strings.Contains(out.stdout, "CANARY") {
		t.Errorf("the refusal shows a value:\n%s", out.stdout)
	}
}
