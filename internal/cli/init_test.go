package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/captf/captf/internal/runner"
	"github.com/captf/captf/internal/tftest"
)

// TestInitSkipped: plan skips init only while nothing init reads changed.
// A changed module source, a new module call, a module's own new call or a
// new provider requirement each make the next command init again; without
// that init terraform would refuse to plan (module not installed, lock file
// inconsistent), so the plans that succeed below prove the init ran.
func TestInitSkipped(t *testing.T) {
	for _, bin := range tftest.Binaries(t) {
		t.Run(bin.Name, func(t *testing.T) {
			setup(t)
			dir := t.TempDir()
			log := filepath.Join(t.TempDir(), "commands")
			wrapped := wrapTerraform(t, bin.Path, `echo "$1" >> '`+log+`'`)
			mod := func(name, input, extra string) {
				t.Helper()
				os.MkdirAll(filepath.Join(dir, name), 0o755)
				write(t, filepath.Join(dir, name, "main.tf"), []byte(`resource "terraform_data" "x" { input = "`+input+`" }`+"\n"+extra), 0o644)
			}
			root := func(body string) { t.Helper(); write(t, filepath.Join(dir, "main.tf"), []byte(body), 0o644) }
			// plan runs captf plan and returns the terraform commands it ran.
			plan := func(t *testing.T, code int) ([]string, string) {
				t.Helper()
				os.Remove(log)
				o := captf(t, "plan", dir, "--binary", wrapped, "--json").want(t, code)
				b, _ := os.ReadFile(log)
				hash := ""
				if code == 0 {
					hash = o.report(t).PlanHash
				}
				return strings.Fields(string(b)), hash
			}
			wantInit := func(t *testing.T, ran []string, want bool) {
				t.Helper()
				if got := slices.Contains(ran, "init"); got != want {
					t.Fatalf("terraform commands %v: init ran %v, want %v", ran, got, want)
				}
				if slices.Contains(ran, "validate") {
					t.Errorf("terraform commands %v: validate is plan's own work", ran)
				}
			}

			mod("a", "a", "")
			mod("b", "b", "")
			root(`module "m" { source = "./a" }` + "\n")
			ran, first := plan(t, 0)
			wantInit(t, ran, true)

			ran, again := plan(t, 0)
			wantInit(t, ran, false)
			if again != first {
				t.Fatalf("the same root planned to %s, then %s", first, again)
			}

			t.Run("changed module source", func(t *testing.T) {
				root(`module "m" { source = "./b" }` + "\n")
				ran, h := plan(t, 0)
				wantInit(t, ran, true)
				if h == first {
					t.Errorf("module ./b planned to the hash of module ./a")
				}
				ran, _ = plan(t, 0)
				wantInit(t, ran, false)
			})
			t.Run("new module call", func(t *testing.T) {
				root(`module "m" { source = "./b" }` + "\n" + `module "n" { source = "./a" }` + "\n")
				ran, _ := plan(t, 0)
				wantInit(t, ran, true)
			})
			t.Run("module's own new call", func(t *testing.T) {
				mod("a", "a", `module "inner" { source = "../b" }`+"\n")
				ran, _ := plan(t, 0)
				wantInit(t, ran, true)
				ran, _ = plan(t, 0)
				wantInit(t, ran, false)
			})
			t.Run("new provider requirement", func(t *testing.T) {
				// No provider can be installed offline: init runs and
				// fails, and the failure leaves no stamp behind.
				write(t, filepath.Join(dir, "versions.tf"), []byte(`terraform {
  required_providers {
    null = { source = "hashicorp/null" }
  }
}
`), 0o644)
				ran, _ := plan(t, 1)
				wantInit(t, ran, true)
				if _, err := os.Stat(filepath.Join(dir, runner.StateDir, runner.InitStampFile)); err == nil {
					t.Errorf("a failed init left its stamp")
				}
				os.Remove(filepath.Join(dir, "versions.tf"))
				ran, _ = plan(t, 0)
				wantInit(t, ran, true)
			})
			t.Run("other binary", func(t *testing.T) {
				// The same root planned by the binary itself, not the
				// wrapper: another binary inits.
				os.Remove(log)
				captf(t, "plan", dir, "--binary", bin.Path, "--json").want(t, 0)
				ran, _ := plan(t, 0)
				wantInit(t, ran, true)
			})
		})
	}
}
