package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/captf/captf/pkg/fingerprint"
)

// movedReport says what differs from the approved plan, or why that is
// unknown.
type movedReport struct {
	Unknown     string                   `json:"unknown,omitempty"`
	Differences []fingerprint.Difference `json:"differences"`
}

// refusal is apply's JSON output.
type refusal struct {
	Applied  bool               `json:"applied"`
	Approved string             `json:"approved,omitempty"`
	Moved    *movedReport       `json:"moved,omitempty"`
	Plan     fingerprint.Report `json:"plan"`
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// printReport prints the value-free summary after terraform's own plan.
func printReport(w io.Writer, r *fingerprint.Report, applyCmd string) {
	fmt.Fprintln(w)
	if r.Empty() {
		fmt.Fprintf(w, "captf: no changes. The empty plan hashes to %s; applying it needs no approval.\n", r.PlanHash)
		return
	}
	fmt.Fprintf(w, "captf: %d to add, %d to change, %d to destroy, %s.\n",
		r.Add, r.Change, r.Destroy, plural(r.OutputChanges, "output change", "output changes"))
	for _, e := range r.Resources {
		fmt.Fprintf(w, "  %s\n", e)
	}
	if r.Truncated {
		fmt.Fprintf(w, "  … more changes than the %d shown\n", fingerprint.MaxResources)
	}
	fmt.Fprintf(w, "\nPlan hash: %s\n\nTo apply exactly this plan:\n  %s\n", r.PlanHash, applyCmd)
}

// printRefusal explains a refused apply: what moved, then the new plan.
func printRefusal(w io.Writer, approved string, moved *movedReport, r *fingerprint.Report, applyCmd string) {
	fmt.Fprintln(w)
	switch {
	case approved == "":
		fmt.Fprintln(w, "captf: nothing was applied: this plan needs an approval (--expect-plan).")
	case !strings.HasPrefix(approved, fingerprint.Prefix):
		fmt.Fprintf(w, "captf: nothing was applied: %s is a hash from an older captf release and matches no plan; approve the new hash.\n", approved)
	default:
		fmt.Fprintf(w, "captf: the plan moved since %s was approved; nothing was applied.\n", approved)
	}
	if moved != nil {
		if moved.Unknown != "" {
			fmt.Fprintf(w, "What moved is unknown: %s.\n", moved.Unknown)
		} else if len(moved.Differences) > 0 {
			fmt.Fprintln(w, "What moved (addresses and attribute paths; values are never shown):")
			for _, d := range moved.Differences {
				line := fmt.Sprintf("  %-8s %s (%s)", d.Kind, d.Address, d.Labels)
				if d.Was != "" {
					line += ", was (" + d.Was + ")"
				}
				if len(d.Paths) > 0 {
					line += ": " + strings.Join(d.Paths, ", ")
				}
				fmt.Fprintln(w, line)
			}
		}
	}
	if r.Empty() {
		fmt.Fprintf(w, "\nThe fresh plan is empty (%s): there is nothing to apply.\n", r.PlanHash)
		return
	}
	fmt.Fprintln(w, "\nThe fresh plan:")
	printReport(w, r, applyCmd)
}

// shellJoin quotes arguments that a POSIX shell would split or expand.
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = shellQuote(a)
	}
	return strings.Join(out, " ")
}

func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	if !strings.ContainsFunc(s, needsQuote) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// needsQuote reports whether a shell would treat c specially.
func needsQuote(c rune) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return false
	}
	return !strings.ContainsRune("_./:=@%+-,", c)
}
