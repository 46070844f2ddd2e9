package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/captf/captf/internal/modulecontract"
	"github.com/captf/captf/internal/modulelint"
	"github.com/captf/captf/internal/runner"
	"github.com/captf/captf/internal/terminal"
)

// errLintFindings: lint found errors in the module. It exits with
// runner.ExitFailure.
var errLintFindings = errors.New("lint found errors")

const lintExitCodes = `Exit codes:
  0  no errors (warnings alone do not fail, unless --strict)
  1  errors (with --strict, warnings too); a file that does not parse, or
     nests deeper than 200, is one; interrupted
  2  bad usage: no --role or an unknown one, a DIR that is not a directory or
     holds no configuration file, a configuration file that is not a regular
     file or holds more than 2 MiB, a module of more than 4 MiB, an extra
     argument, an unknown flag`

// lintReport is what lint --json prints.
type lintReport struct {
	Role     modulecontract.Role  `json:"role"`
	Findings []modulelint.Finding `json:"findings"`
	Errors   int                  `json:"errors"`
	Warnings int                  `json:"warnings"`
}

func newLint(stdout io.Writer) *cobra.Command {
	var role string
	var asJSON, strict bool
	var roles []string
	for _, r := range modulecontract.Roles() {
		roles = append(roles, string(r))
	}
	cmd := &cobra.Command{
		Use:   "lint [DIR] --role " + strings.Join(roles, "|"),
		Short: "Check a module against what the manager reads from and sets on it, without terraform",
		Long: `Reads the module's files in DIR (default: the current directory) with hcl,
without running terraform or downloading a provider, and reports, with file
and line, what breaks the contract of the role the module plays for the
manager (outputs the manager reads, variables it sets), what the runner Job
owns (a backend or cloud block), and what may surprise its author
(provisioners, prevent_destroy, unpinned providers, credentials that are not
sensitive). docs/modules.md lists every rule.

` + lintExitCodes,
		Args: dirArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			r := modulecontract.Role(role)
			if _, ok := modulecontract.For(r); !ok {
				return fmt.Errorf("%w: --role must be one of %s, got %q", runner.ErrBadInput, strings.Join(roles, ", "), role)
			}
			if err := checkDir(dir, ""); err != nil {
				return err
			}
			findings, err := modulelint.Check(cmd.Context(), dir, r)
			if errors.Is(err, modulelint.ErrNoConfig) {
				return fmt.Errorf("%w: %w", runner.ErrBadInput, err)
			}
			if err != nil {
				return err
			}
			if strict {
				findings = modulelint.Strict(findings)
			}
			report := lintReport{Role: r, Findings: findings}
			if report.Findings == nil {
				report.Findings = []modulelint.Finding{}
			}
			for _, f := range findings {
				if f.Severity == modulelint.Error {
					report.Errors++
				} else {
					report.Warnings++
				}
			}
			if asJSON {
				err = printJSON(stdout, report)
			} else {
				err = printLint(stdout, dir, &report)
			}
			if err != nil {
				return err
			}
			if report.Errors > 0 {
				return fmt.Errorf("%w: %s in %s (role %s)", errLintFindings, plural(report.Errors, "error", "errors"), dir, r)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&role, "role", "", "the role the module plays: "+strings.Join(roles, ", ")+" (required)")
	f.BoolVar(&asJSON, "json", false, "print the findings as JSON")
	f.BoolVar(&strict, "strict", false, "report warnings as errors")
	_ = cmd.RegisterFlagCompletionFunc("role", cobra.FixedCompletions(roles, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// printLint prints one line per finding and a summary. A file or
// directory name that holds a control character is printed quoted, and a
// message's control characters escaped, so that neither acts on the
// terminal nor forges a line.
func printLint(w io.Writer, dir string, r *lintReport) error {
	var b strings.Builder
	dir = terminal.Quote(dir)
	for _, f := range r.Findings {
		if f.File != "" {
			f.File = terminal.Quote(f.File)
		}
		f.Message = strings.ReplaceAll(terminal.Escape(f.Message), "\n", `\n`)
		b.WriteString(f.Format(dir) + "\n")
	}
	summary := "no findings"
	if len(r.Findings) > 0 {
		summary = plural(r.Errors, "error", "errors") + ", " + plural(r.Warnings, "warning", "warnings")
	}
	fmt.Fprintf(&b, "%s (role %s): %s\n", dir, r.Role, summary)
	_, err := io.WriteString(w, b.String())
	return err
}
