package modulelint

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/captf/captf/internal/modulecontract"
)

// TestVerdicts: what terraform reads the text as decides the verdict:
// sensitive = "true" is true (terraform converts the string), and a
// variable or output declared twice is refused, as terraform refuses it.
func TestVerdicts(t *testing.T) {
	cases := []struct {
		name      string
		src       string
		want      []string // rules that must be found
		wantNot   []string // rules that must not be
		inMessage string
	}{
		{"a sensitive output given as a string", `
output "provider_id" {
  value     = "aws:///i-1"
  sensitive = "true"
}
`, []string{RuleOutputSensitive}, nil, ""},
		{"a sensitive variable given as a string", `
variable "captf_bootstrap_data" {
  type      = string
  sensitive = "true"
}
output "provider_id" {
  value = "aws:///i-1"
}
`, nil, []string{RuleVariableSensitive}, ""},
		{"a variable declared twice", `
variable "a" {}
variable "a" {}
output "provider_id" {
  value = "aws:///i-1"
}
`, []string{RuleParse}, nil, `a variable named "a" was already declared at main.tf:1`},
		{"an output declared twice", `
output "provider_id" {
  value = "aws:///i-1"
}
output "provider_id" {
  value = "aws:///i-2"
}
`, []string{RuleParse}, nil, `an output named "provider_id" was already declared at main.tf:1`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(strings.TrimLeft(tc.src, "\n")), 0o600); err != nil {
				t.Fatal(err)
			}
			findings, err := Check(context.Background(), dir, modulecontract.RoleMachine)
			if err != nil {
				t.Fatal(err)
			}
			var rules []string
			var messages strings.Builder
			for _, f := range findings {
				rules = append(rules, f.Rule)
				messages.WriteString(f.Format(dir) + "\n")
			}
			for _, r := range tc.want {
				if !slices.Contains(rules, r) {
					t.Errorf("no finding of rule %s:\n%s", r, messages.String())
				}
			}
			for _, r := range tc.wantNot {
				if slices.Contains(rules, r) {
					t.Errorf("a finding of rule %s:\n%s", r, messages.String())
				}
			}
			if !strings.Contains(messages.String(), tc.inMessage) {
				t.Errorf("no finding says %q:\n%s", tc.inMessage, messages.String())
			}
		})
	}
}
