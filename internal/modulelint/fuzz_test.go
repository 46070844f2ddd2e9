package modulelint

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/captf/captf/internal/inputfile"
	"github.com/captf/captf/internal/modulecontract"
)

// FuzzCheck feeds Check any file, as HCL or as JSON: it returns findings
// or refuses the file, never panics or overflows its stack, reports a
// nesting deeper than MaxDepth as a finding, refuses a file larger than
// MaxFileBytes, and returns at most MaxFindings findings and the one that
// says more were left out. go test runs the seeds; go test -fuzz=FuzzCheck
// searches further. The seeds hold no file near MaxFileBytes: the fuzzer
// would spend its time minimising one; TestCheckBounds covers the size.
func FuzzCheck(f *testing.F) {
	nested := func(depth int, open, close string) string {
		return strings.Repeat(open, depth) + strings.Repeat(close, depth)
	}
	seeds := []string{
		"",
		`output "provider_id" { value = "aws:///i-1" }`,
		"variable \"captf_bootstrap_data\" {\n  type = string\n  sensitive = \"true\"\n}\n",
		"variable \"a\" {}\nvariable \"a\" {}\n",
		"terraform {\n  backend \"s3\" {}\n}\n",
		"resource \"x\" \"y\" {\n  provisioner \"local-exec\" { command = \"echo ${self.id}\" }\n}\n",
		"locals { a = <<EOT\n${" + nested(10, "[", "]") + "}\nEOT\n}\n",
		"output \"x\" { value = " + nested(MaxDepth-2, "[", "]") + " }",
		"output \"x\" { value = " + nested(MaxDepth+1, "(", ")") + " }",
		"output \"x\" { value = \"" + nested(MaxDepth+1, "${\"", "\"}") + "\" }",
		`{"output": {"x": {"value": ` + nested(MaxDepth+1, "[", "]") + `}}}`,
		`{"variable": {"a": {"sensitive": "true"}}, "output": {"b": {"value": "\"[[[["}}}`,
		"x = \x00\xff\x1b[31m",
	}
	for _, fixture := range []string{"good-cluster", "good-machine", "bad-cluster"} {
		files, _ := filepath.Glob(filepath.Join("testdata", fixture, "*.tf"))
		for _, file := range files {
			if b, err := os.ReadFile(file); err == nil {
				seeds = append(seeds, string(b))
			}
		}
	}
	for _, s := range seeds {
		f.Add(s, strings.HasPrefix(s, "{"))
	}
	f.Fuzz(func(t *testing.T, src string, asJSON bool) {
		dir := t.TempDir()
		name := "main.tf"
		if asJSON {
			name = "main.tf.json"
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		findings, err := Check(ctx, dir, modulecontract.RoleMachine)
		if len(src) > MaxFileBytes {
			if !errors.Is(err, inputfile.ErrTooLarge) {
				t.Fatalf("a file of %d bytes: %v, want it refused as too large", len(src), err)
			}
			return
		}
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		if len(findings) > MaxFindings+1 {
			t.Fatalf("%d findings, more than %d and the truncation", len(findings), MaxFindings)
		}
		for _, fd := range findings {
			if fd.Rule == "" || fd.Message == "" || (fd.Severity != Error && fd.Severity != Warning) {
				t.Fatalf("a finding without rule, message or severity: %+v", fd)
			}
		}
		if tooDeep([]byte(src), asJSON) > 0 && !containsRule(findings, RuleParse) {
			t.Fatalf("a file nested deeper than %d gave no parse finding: %+v", MaxDepth, findings)
		}
	})
}

func containsRule(findings []Finding, rule string) bool {
	for _, f := range findings {
		if f.Rule == rule {
			return true
		}
	}
	return false
}

// TestCheckBounds: a file larger than MaxFileBytes is refused before it is
// parsed, and so is a module whose files hold more than MaxModuleBytes.
func TestCheckBounds(t *testing.T) {
	line := "# a line\n"
	half := strings.Repeat(line, MaxModuleBytes/2/len(line))
	for name, files := range map[string]map[string]string{
		"file":   {"main.tf": strings.Repeat(line, MaxFileBytes/len(line)+1)},
		"module": {"a.tf": half, "b.tf": half, "c.tf": strings.Repeat(line, 1000)},
	} {
		dir := t.TempDir()
		for n, src := range files {
			if err := os.WriteFile(filepath.Join(dir, n), []byte(src), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := Check(context.Background(), dir, modulecontract.RoleMachine); !errors.Is(err, inputfile.ErrTooLarge) {
			t.Errorf("%s too large: %v, want it refused", name, err)
		}
	}
}
