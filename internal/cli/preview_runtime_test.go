package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/captf/captf/internal/preview/terraform"
	"github.com/captf/captf/internal/runner"
	"github.com/captf/captf/internal/tftest"
)

// TestPreviewRuntimeBinding: a preview apply of an approved digest refuses
// (exit 3, nothing run, nothing applied) when a provisioner or provider
// configuration that the terraform-apply member's plan runs moved since
// the plan, and names the member, address and block, never a value; it
// applies when nothing that runs moved, even where a provisioner of an
// untouched resource did. The root is the one of TestRuntimeBinding.
func TestPreviewRuntimeBinding(t *testing.T) {
	for _, bin := range tftest.Binaries(t) {
		t.Run(bin.Name, func(t *testing.T) {
			setup(t)
			root := t.TempDir()
			infra := filepath.Join(root, "infra")
			if err := os.MkdirAll(filepath.Join(infra, "mod"), 0o755); err != nil {
				t.Fatal(err)
			}
			project := fmt.Sprintf("environments:\n  prod: {}\ncomponents:\n  app:\n    steps:\n      - kind: terraform-apply\n        inputs:\n          root: infra\n          binary: %s\n          varFiles: [infra/prod.tfvars]\n", bin.Path)
			write(t, filepath.Join(root, "captf.yaml"), []byte(project), 0o644)
			main := filepath.Join(infra, "main.tf")
			mod := filepath.Join(infra, "mod", "main.tf")
			write(t, main, []byte(runtimeRoot), 0o644)
			write(t, mod, []byte(runtimeModule), 0o644)
			vars := func(a, d, n int) {
				t.Helper()
				write(t, filepath.Join(infra, "prod.tfvars"), fmt.Appendf(nil, "a = %d\nd = %d\nn = %d\nword = \"CANARY-WORD-1\"\n", a, d, n), 0o644)
			}
			vars(0, 1, 0)
			gitRun(t, root, "init", "-q", "-b", "main")
			gitCommit(t, root)
			t.Chdir(root)

			ran := func(name string) bool {
				_, err := os.Stat(filepath.Join(infra, name))
				return err == nil
			}
			docPath := filepath.Join(root, runner.StateDir, "preview", DocumentFile)
			plan := func() string {
				t.Helper()
				o := captf(t, "preview", "plan", "--env", "prod").want(t, runner.ExitOK)
				if strings.Contains(o.stdout+o.stderr, "CANARY") {
					t.Errorf("the plan printed a value:\n%s\n%s", o.stdout, o.stderr)
				}
				return readDocument(t, docPath).Digest
			}
			state := func() []byte {
				b, _ := os.ReadFile(filepath.Join(infra, "terraform.tfstate"))
				return b
			}
			// refused applies the digest, which the document in --out
			// records, and checks it is refused naming these blocks, with
			// nothing run or changed and no canary printed. It plans
			// again after undo, which must give the approved digest.
			refused := func(digest string, undo func(), want ...string) {
				t.Helper()
				before := state()
				o := captf(t, "preview", "apply", "--env", "prod", "--json", "--expect-digest", digest).want(t, runner.ExitPlanChanged)
				if strings.Contains(o.stdout+o.stderr, "CANARY") {
					t.Errorf("a refused apply printed a value:\n%s\n%s", o.stdout, o.stderr)
				}
				var rep applyReport
				if err := json.Unmarshal([]byte(o.stdout), &rep); err != nil {
					t.Fatalf("apply JSON: %v\n%s", err, o.stdout)
				}
				if strings.Join(rep.RuntimeMoved, "\n") != strings.Join(want, "\n") {
					t.Errorf("runtimeMoved:\n%s\nwant:\n%s", strings.Join(rep.RuntimeMoved, "\n"), strings.Join(want, "\n"))
				}
				if !bytes.Equal(before, state()) {
					t.Error("a refused apply changed the state")
				}
				undo()
				if again := plan(); again != digest {
					t.Fatalf("planned again after the undo: %s, want %s", again, digest)
				}
			}

			captf(t, "preview", "apply", "--env", "prod", "--expect-digest", plan()).want(t, runner.ExitOK)
			if !ran("ran-keep") {
				t.Fatal("the first apply did not run keep's provisioner")
			}

			vars(1, 0, 2)
			d := plan()
			doc := readDocument(t, docPath)
			var effects []string
			for _, s := range doc.SideEffects {
				if s.Kind == terraform.SideEffectRunsAtApply {
					effects = append(effects, s.Address+" "+s.Detail[:strings.Index(s.Detail, ";")])
				}
			}
			wantEffects := []string{
				`module.m.terraform_data.b[0] provisioner "local-exec" #0`,
				`module.m.terraform_data.b[1] provisioner "local-exec" #0`,
				`provider["terraform.io/builtin/terraform"] provider "terraform"`,
				`terraform_data.a[0] provisioner "local-exec" #0`,
				`terraform_data.d[0] provisioner "local-exec" #0`,
			}
			if strings.Join(effects, "\n") != strings.Join(wantEffects, "\n") {
				t.Errorf("runs-at-apply side effects:\n%s\nwant:\n%s", strings.Join(effects, "\n"), strings.Join(wantEffects, "\n"))
			}

			replaceIn(t, main, "CANARY-A-1", "CANARY-A-2")
			refused(d, func() { replaceIn(t, main, "CANARY-A-2", "CANARY-A-1") }, `changed infra: terraform_data.a[0] provisioner "local-exec" #0`)
			replaceIn(t, mod, "CANARY-B-1", "CANARY-B-2")
			refused(d, func() { replaceIn(t, mod, "CANARY-B-2", "CANARY-B-1") },
				`changed infra: module.m.terraform_data.b[0] provisioner "local-exec" #0`,
				`changed infra: module.m.terraform_data.b[1] provisioner "local-exec" #0`)
			replaceIn(t, main, "CANARY-D-1", "CANARY-D-2")
			refused(d, func() { replaceIn(t, main, "CANARY-D-2", "CANARY-D-1") }, `changed infra: terraform_data.d[0] provisioner "local-exec" #0`)
			replaceIn(t, main, "# provider v1", "# provider v2")
			refused(d, func() { replaceIn(t, main, "# provider v2", "# provider v1") }, `changed infra: provider["terraform.io/builtin/terraform"] provider "terraform"`)
			// The text output names the blocks too.
			replaceIn(t, main, "CANARY-A-1", "CANARY-A-2")
			text := captf(t, "preview", "apply", "--env", "prod", "--expect-digest", d).want(t, runner.ExitPlanChanged)
			if !strings.Contains(text.stdout, `  changed infra: terraform_data.a[0] provisioner "local-exec" #0`) || strings.Contains(text.stdout+text.stderr, "CANARY") {
				t.Errorf("the text refusal:\n%s\n%s", text.stdout, text.stderr)
			}
			replaceIn(t, main, "CANARY-A-2", "CANARY-A-1")
			if again := plan(); again != d {
				t.Fatalf("planned again after the undo: %s, want %s", again, d)
			}
			for _, f := range []string{"ran-a", "ran-b-0", "ran-b-1", "ran-d"} {
				if ran(f) {
					t.Fatalf("a refused apply ran %s", f)
				}
			}

			// keep is untouched: its provisioner does not run and may change.
			replaceIn(t, main, "CANARY-KEEP-1", "CANARY-KEEP-2")
			captf(t, "preview", "apply", "--env", "prod", "--expect-digest", d).want(t, runner.ExitOK)
			for _, f := range []string{"ran-a", "ran-b-0", "ran-b-1", "ran-d"} {
				if !ran(f) {
					t.Errorf("the approved apply did not run %s", f)
				}
			}
		})
	}
}
