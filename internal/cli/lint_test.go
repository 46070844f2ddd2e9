package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// module writes files into a new directory and returns it.
func module(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.TrimLeft(src, "\n")), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const (
	lintClean = `
output "control_plane_endpoint_host" {
  value = "api.example.com"
}

output "control_plane_endpoint_port" {
  value = 6443
}
`
	lintWarning = `
resource "terraform_data" "a" {
  provisioner "local-exec" {
    command = "echo created"
  }
}
`
	lintError = `
terraform {
  backend "s3" {}
}
`
)

// TestLint: captf lint prints one line per finding and a summary (or, with
// --json, one document), and exits 1 only on errors; --strict makes the
// warnings errors.
func TestLint(t *testing.T) {
	clean := module(t, map[string]string{"main.tf": lintClean})
	warned := module(t, map[string]string{"main.tf": lintWarning})
	broken := module(t, map[string]string{"main.tf": lintError, "b.tf": lintWarning})
	unparsable := module(t, map[string]string{"main.tf": "output \"x\" {\n  value = \n}\n"})
	const (
		provisioner = `provisioner "local-exec" of terraform_data.a runs at apply, outside the plan: the p2: hash does not bind what it does (see docs/fingerprint.md)`
		backend     = `backend "s3": the runner owns the backend; remove the block`
	)
	cases := []struct {
		reason string
		args   []string
		want   outcome
	}{
		{"clean", []string{"lint", clean, "--role", "cluster"}, outcome{0, clean + " (role cluster): no findings\n", ""}},
		{"what the module lacks names DIR", []string{"lint", warned, "--role", "machine"}, outcome{1,
			warned + ": error: output \"provider_id\" is missing: the manager reads it for the Machine's spec.providerID, and a machine module must declare it\n" +
				warned + ": error: variable \"captf_bootstrap_data\" is missing: the manager sets it to the bootstrap data the machine joins the cluster with, and a machine module must declare it\n" +
				warned + ": error: variable \"captf_machine_name\" is missing: the manager sets it to the Machine's name, and a machine module must declare it\n" +
				"main.tf:2: warning: " + provisioner + "\n" +
				warned + " (role machine): 3 errors, 1 warning\n",
			"captf: lint found errors: 3 errors in " + warned + " (role machine)\n"}},
		{"warnings alone pass", []string{"lint", warned, "--role", "cluster"}, outcome{0,
			"main.tf:2: warning: " + provisioner + "\n" + warned + " (role cluster): 0 errors, 1 warning\n", ""}},
		{"a warning, strict", []string{"lint", "--strict", warned, "--role", "cluster"}, outcome{1,
			"main.tf:2: error: " + provisioner + "\n" + warned + " (role cluster): 1 error, 0 warnings\n",
			"captf: lint found errors: 1 error in " + warned + " (role cluster)\n"}},
		{"sorted by file", []string{"lint", broken, "--role", "cluster"}, outcome{1,
			"b.tf:2: warning: " + provisioner + "\nmain.tf:2: error: " + backend + "\n" + broken + " (role cluster): 1 error, 1 warning\n",
			"captf: lint found errors: 1 error in " + broken + " (role cluster)\n"}},
		{"does not parse", []string{"lint", unparsable, "--role", "cluster"}, outcome{1,
			"main.tf:2: error: Invalid expression: Expected the start of an expression, but found an invalid expression token.\n" + unparsable + " (role cluster): 1 error, 0 warnings\n",
			"captf: lint found errors: 1 error in " + unparsable + " (role cluster)\n"}},
		{"json, clean", []string{"lint", clean, "--role", "cluster", "--json"}, outcome{0, `{
  "role": "cluster",
  "findings": [],
  "errors": 0,
  "warnings": 0
}
`, ""}},
		{"json", []string{"lint", broken, "--role", "cluster", "--json"}, outcome{1, `{
  "role": "cluster",
  "findings": [
    {
      "file": "b.tf",
      "line": 2,
      "severity": "warning",
      "rule": "provisioner",
      "message": "provisioner \"local-exec\" of terraform_data.a runs at apply, outside the plan: the p2: hash does not bind what it does (see docs/fingerprint.md)"
    },
    {
      "file": "main.tf",
      "line": 2,
      "severity": "error",
      "rule": "backend",
      "message": "backend \"s3\": the runner owns the backend; remove the block"
    }
  ],
  "errors": 1,
  "warnings": 1
}
`, "captf: lint found errors: 1 error in " + broken + " (role cluster)\n"}},
		{"json, strict", []string{"lint", warned, "--role", "cluster", "--json", "--strict"}, outcome{1, `{
  "role": "cluster",
  "findings": [
    {
      "file": "main.tf",
      "line": 2,
      "severity": "error",
      "rule": "provisioner",
      "message": "provisioner \"local-exec\" of terraform_data.a runs at apply, outside the plan: the p2: hash does not bind what it does (see docs/fingerprint.md)"
    }
  ],
  "errors": 1,
  "warnings": 0
}
`, "captf: lint found errors: 1 error in " + warned + " (role cluster)\n"}},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, captf(t, tc.args...), cmp.AllowUnexported(outcome{})); diff != "" {
				t.Errorf("captf %q (-want +got):\n%s", tc.args, diff)
			}
		})
	}
}

// TestLintDefaultDir: without DIR, lint reads the current directory.
func TestLintDefaultDir(t *testing.T) {
	t.Chdir(module(t, map[string]string{"main.tf": lintClean}))
	want := outcome{0, ". (role cluster): no findings\n", ""}
	if diff := cmp.Diff(want, captf(t, "lint", "--role", "cluster"), cmp.AllowUnexported(outcome{})); diff != "" {
		t.Errorf("captf lint --role cluster (-want +got):\n%s", diff)
	}
}

// TestLintBadUsage: a missing or unknown role, a DIR that is not a
// module's directory, and extra arguments are bad usage, exit 2, with
// nothing on stdout.
func TestLintBadUsage(t *testing.T) {
	mod := module(t, map[string]string{"main.tf": lintClean})
	empty := t.TempDir()
	missing := filepath.Join(empty, "missing")
	file := filepath.Join(mod, "main.tf")
	cases := []struct {
		reason string
		args   []string
		stderr string
	}{
		{"no role", []string{"lint", mod}, `captf: bad input: --role must be one of cluster, machine, pool, got ""` + "\n"},
		{"unknown role", []string{"lint", mod, "--role", "node"}, `captf: bad input: --role must be one of cluster, machine, pool, got "node"` + "\n"},
		{"missing DIR", []string{"lint", missing, "--role", "cluster"}, "captf: bad input: " + missing + " is not a directory\n"},
		{"a file", []string{"lint", file, "--role", "cluster"}, "captf: bad input: " + file + " is not a directory\n"},
		{"no configuration", []string{"lint", empty, "--role", "cluster"}, "captf: bad input: " + empty + ": no terraform configuration files\n"},
		{"two DIRs", []string{"lint", mod, mod, "--role", "cluster"}, "captf: bad input: expected at most one DIR, got 2 arguments\n"},
		{"unknown flag", []string{"lint", mod, "--role", "cluster", "--fix"}, "captf: bad input: unknown flag: --fix\n"},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			want := outcome{2, "", tc.stderr}
			if diff := cmp.Diff(want, captf(t, tc.args...), cmp.AllowUnexported(outcome{})); diff != "" {
				t.Errorf("captf %q (-want +got):\n%s", tc.args, diff)
			}
		})
	}
}

// TestLintEscapesNames: a file or directory name holding a line break or
// an escape sequence is printed quoted: it cannot forge a "no findings"
// line or recolour the terminal. --json holds it as valid JSON.
func TestLintEscapesNames(t *testing.T) {
	name := "z\nall good (role machine): no findings\n\x1b[31mq.tf"
	parent := t.TempDir()
	dir := filepath.Join(parent, "m\x1b[2J")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, name), []byte("x = \n"), 0o644)
	o := captf(t, "lint", dir, "--role", "machine").want(t, 1)
	if strings.ContainsAny(o.stdout+o.stderr, "\x1b\r") {
		t.Errorf("an escape sequence reached the terminal:\n%q\n%q", o.stdout, o.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(o.stdout, "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], strconv.Quote(name)+":1: error: ") || strings.Contains(o.stdout, "no findings") && !strings.Contains(lines[0], `\nall good`) {
		t.Errorf("the finding is not one line naming the file quoted:\n%s", o.stdout)
	}
	j := captf(t, "lint", dir, "--role", "machine", "--json").want(t, 1)
	var r lintReport
	if err := json.Unmarshal([]byte(j.stdout), &r); err != nil || len(r.Findings) != 1 || r.Findings[0].File != name {
		t.Errorf("--json: %v, %+v", err, r.Findings)
	}
}
