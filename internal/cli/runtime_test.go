package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/captf/captf/internal/planconfig"
	"github.com/captf/captf/internal/runner"
	"github.com/captf/captf/internal/tftest"
)

// runtimeRoot runs provisioners at create (a, keep, module m's b with
// count) and at destroy (d), and configures the built-in provider. Every
// command and variable value holds a canary that captf must never print.
const runtimeRoot = `
variable "a" { type = number }
variable "d" { type = number }
variable "n" { type = number }
variable "word" { type = string }

provider "terraform" {
  # provider v1
}

resource "terraform_data" "keep" {
  input = "keep"
  provisioner "local-exec" {
    command = "echo CANARY-KEEP-1 > ran-keep"
  }
}

resource "terraform_data" "a" {
  count = var.a
  input = "a"
  provisioner "local-exec" {
    command = "echo CANARY-A-1 > ran-a"
  }
}

resource "terraform_data" "d" {
  count = var.d
  input = "d"
  provisioner "local-exec" {
    when    = destroy
    command = "echo CANARY-D-1 > ran-d"
  }
}

module "m" {
  source = "./mod"
  n      = var.n
  word   = var.word
}
`

const runtimeModule = `
variable "n" { type = number }
variable "word" { type = string }

resource "terraform_data" "b" {
  count = var.n
  input = count.index
  provisioner "local-exec" {
    command = "echo ${var.word} CANARY-B-1 > ran-b-${count.index}"
  }
}
`

// TestRuntimeBinding: an apply of an approved hash refuses (exit 3,
// nothing run, nothing applied) when a provisioner or provider
// configuration that the plan runs moved since the plan, naming the
// address and the block and no value; it applies when nothing that runs
// moved, even where a provisioner of an untouched resource did.
func TestRuntimeBinding(t *testing.T) {
	for _, bin := range tftest.Binaries(t) {
		t.Run(bin.Name, func(t *testing.T) {
			setup(t)
			dir := t.TempDir()
			b := "--binary=" + bin.Path
			main := filepath.Join(dir, "main.tf")
			mod := filepath.Join(dir, "mod", "main.tf")
			if err := os.Mkdir(filepath.Join(dir, "mod"), 0o755); err != nil {
				t.Fatal(err)
			}
			write(t, main, []byte(runtimeRoot), 0o644)
			write(t, mod, []byte(runtimeModule), 0o644)
			vars := func(a, d, n int, word string) {
				t.Helper()
				s := strings.NewReplacer("A", itoa(a), "D", itoa(d), "N", itoa(n), "W", word).Replace("a = A\nd = D\nn = N\nword = \"W\"\n")
				write(t, filepath.Join(dir, "terraform.tfvars"), []byte(s), 0o644)
			}
			ran := func(name string) bool {
				_, err := os.Stat(filepath.Join(dir, name))
				return err == nil
			}
			plan := func() string {
				t.Helper()
				return captf(t, "plan", dir, b, "--json").want(t, 0).report(t).PlanHash
			}
			// refused applies hash and checks it is refused for what runs
			// at apply, with these blocks moved, and that nothing ran or
			// changed and no canary was printed.
			refused := func(hash string, want ...planconfig.Moved) {
				t.Helper()
				before := readState(t, dir)
				text := captf(t, "apply", dir, b, "--expect-plan", hash).want(t, runner.ExitPlanChanged)
				js := captf(t, "apply", dir, b, "--json", "--expect-plan", hash).want(t, runner.ExitPlanChanged)
				for _, o := range []outcome{text, js} {
					if strings.Contains(o.stdout+o.stderr, "CANARY") {
						t.Errorf("a refused apply printed a value:\nstdout:\n%s\nstderr:\n%s", o.stdout, o.stderr)
					}
				}
				for _, m := range want {
					if !strings.Contains(text.stdout, m.Address+": "+m.Block) {
						t.Errorf("the refusal does not name %s %s:\n%s", m.Address, m.Block, text.stdout)
					}
				}
				ref := js.refusal(t)
				if ref.Applied || ref.Reason != ReasonRuntimeChanged || ref.Plan.PlanHash != hash || ref.Runtime == nil {
					t.Fatalf("refusal: %+v", ref)
				}
				if d := cmp.Diff(want, ref.Runtime.Moved); d != "" {
					t.Errorf("moved (-want +got):\n%s", d)
				}
				if !bytes.Equal(before, readState(t, dir)) {
					t.Error("a refused apply changed the state")
				}
			}
			changed := func(addr, block string) planconfig.Moved {
				return planconfig.Moved{Address: addr, Block: block, Kind: "changed"}
			}

			vars(0, 1, 0, "CANARY-WORD-1")
			captf(t, "apply", dir, b, "--expect-plan", plan()).want(t, 0)
			if !ran("ran-keep") {
				t.Fatal("the first apply did not run keep's provisioner")
			}

			// A create whose provisioner's command changed after the plan.
			vars(1, 1, 0, "CANARY-WORD-1")
			h := plan()
			replaceIn(t, main, "CANARY-A-1", "CANARY-A-2")
			// A provisioner of a resource the plan does not touch does not
			// run, and may change.
			replaceIn(t, main, "CANARY-KEEP-1", "CANARY-KEEP-2")
			refused(h, changed("terraform_data.a[0]", `provisioner "local-exec" #0`))
			// Planning the same hash again does not make the new command
			// the approved one: captf plan warns, apply still refuses.
			again := captf(t, "plan", dir, b, "--json").want(t, 0)
			if again.report(t).PlanHash != h || !strings.Contains(again.stderr, "captf apply refuses it") || !strings.Contains(again.stderr, `terraform_data.a[0]: provisioner "local-exec" #0`) {
				t.Errorf("plan of the same hash with another command:\n%s", again.stderr)
			}
			refused(h, changed("terraform_data.a[0]", `provisioner "local-exec" #0`))
			if ran("ran-a") {
				t.Fatal("a refused apply ran the provisioner")
			}
			replaceIn(t, main, "CANARY-A-2", "CANARY-A-1")
			captf(t, "apply", dir, b, "--expect-plan", h).want(t, 0)
			if !ran("ran-a") {
				t.Fatal("the approved apply did not run a's provisioner")
			}

			// Creates in a child module with count: its provisioner, the
			// value of the variable it reads through the module call, and
			// the provider block.
			vars(1, 1, 2, "CANARY-WORD-1")
			h = plan()
			bs := func(block string) []planconfig.Moved {
				return []planconfig.Moved{changed("module.m.terraform_data.b[0]", block), changed("module.m.terraform_data.b[1]", block)}
			}
			replaceIn(t, mod, "CANARY-B-1", "CANARY-B-2")
			refused(h, bs(`provisioner "local-exec" #0`)...)
			replaceIn(t, mod, "CANARY-B-2", "CANARY-B-1")
			vars(1, 1, 2, "CANARY-WORD-2")
			refused(h, bs(`provisioner "local-exec" #0`)...)
			vars(1, 1, 2, "CANARY-WORD-1")
			replaceIn(t, main, "# provider v1", "# provider v2")
			refused(h, changed(`provider["terraform.io/builtin/terraform"]`, `provider "terraform"`))
			replaceIn(t, main, "# provider v2", "# provider v1")
			if ran("ran-b-0") || ran("ran-b-1") {
				t.Fatal("a refused apply ran the module's provisioner")
			}
			captf(t, "apply", dir, b, "--expect-plan", h).want(t, 0)
			if !ran("ran-b-0") || !ran("ran-b-1") {
				t.Fatal("the approved apply did not run the module's provisioners")
			}

			// A delete whose destroy-time provisioner changed.
			vars(1, 0, 2, "CANARY-WORD-1")
			h = plan()
			replaceIn(t, main, "CANARY-D-1", "CANARY-D-2")
			refused(h, changed("terraform_data.d[0]", `provisioner "local-exec" #0`))
			if ran("ran-d") {
				t.Fatal("a refused apply ran the destroy-time provisioner")
			}
			replaceIn(t, main, "CANARY-D-2", "CANARY-D-1")
			captf(t, "apply", dir, b, "--expect-plan", h).want(t, 0)
			if !ran("ran-d") {
				t.Fatal("the approved apply did not run the destroy-time provisioner")
			}

			// Without the record of what the approved plan runs, an apply
			// that runs something is refused; a plan here records it.
			vars(0, 0, 2, "CANARY-WORD-1")
			h = plan()
			files, _ := filepath.Glob(filepath.Join(dir, runner.StateDir, "plans", "*.runtime.json"))
			for _, f := range files {
				os.Remove(f)
			}
			o := captf(t, "apply", dir, b, "--json", "--expect-plan", h).want(t, runner.ExitPlanChanged).refusal(t)
			if o.Reason != ReasonRuntimeChanged || o.Runtime == nil || o.Runtime.Unknown == "" {
				t.Fatalf("refusal without a record: %+v", o)
			}
			if h2 := plan(); h2 != h {
				t.Fatalf("plan again: %s, want %s", h2, h)
			}
			captf(t, "apply", dir, b, "--expect-plan", h).want(t, 0)
		})
	}
}

// replaceIn replaces the first old in the file at path with new; the file
// must hold old.
func replaceIn(t *testing.T, path, old, new string) {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(src, []byte(old)) {
		t.Fatalf("%s has no %q", path, old)
	}
	write(t, path, bytes.Replace(src, []byte(old), []byte(new), 1), 0o644)
}

func itoa(n int) string { return string(rune('0' + n)) }
