package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/captf/captf/internal/planconfig"
	"github.com/captf/captf/pkg/fingerprint"
)

// movedReport says what differs from the approved plan, or why that is
// unknown.
type movedReport struct {
	Unknown     string                   `json:"unknown,omitempty"`
	Differences []fingerprint.Difference `json:"differences"`
}

// Reasons an apply applied nothing, in its JSON output (docs/cli.md).
const (
	ReasonNoChanges   = "no-changes"   // the fresh plan is empty; exit 0
	ReasonNotApproved = "not-approved" // no --expect-plan for a plan with changes
	ReasonOldScheme   = "old-scheme"   // --expect-plan is a p1: hash, which no plan matches
	ReasonPlanChanged = "plan-changed" // the fresh plan hashes to another value
	ReasonStalePlan   = "stale-plan"   // terraform refused the saved plan: the state changed after it was made
	// ReasonRuntimeChanged: the plan hashes to the approved value, but a
	// provisioner or provider configuration it runs at apply moved.
	ReasonRuntimeChanged = "runtime-changed"
)

// runtimeReport says which blocks that run at apply outside the plan moved
// since the approved plan, or why that cannot be checked. It names
// addresses and blocks, never a value.
type runtimeReport struct {
	Unknown string             `json:"unknown,omitempty"`
	Moved   []planconfig.Moved `json:"moved,omitempty"`
	// Record is the file that records what the approved plan runs.
	Record string `json:"record"`
}

// refusal is apply's JSON output: whether the plan was applied, and when
// not, why, what moved and the fresh plan to approve. It never holds a
// value.
type refusal struct {
	Applied  bool               `json:"applied"`
	Reason   string             `json:"reason,omitempty"`
	Approved string             `json:"approved,omitempty"`
	Moved    *movedReport       `json:"moved,omitempty"`
	Runtime  *runtimeReport     `json:"runtime,omitempty"`
	Plan     fingerprint.Report `json:"plan"`
}

// refusedFor is the reason a fresh plan did not match approved.
func refusedFor(approved string) string {
	switch {
	case approved == "":
		return ReasonNotApproved
	case !strings.HasPrefix(approved, fingerprint.Prefix):
		return ReasonOldScheme
	}
	return ReasonPlanChanged
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
func printRefusal(w io.Writer, doc *refusal, applyCmd string) {
	fmt.Fprintln(w)
	r, moved := &doc.Plan, doc.Moved
	switch doc.Reason {
	case ReasonNotApproved:
		fmt.Fprintln(w, "captf: nothing was applied: this plan needs an approval (--expect-plan).")
	case ReasonOldScheme:
		fmt.Fprintf(w, "captf: nothing was applied: %s is a hash of an older scheme (%s), which can no longer be verified. Approve the plan again by its %s hash, below.\n",
			doc.Approved, doc.Approved[:strings.IndexByte(doc.Approved, ':')+1], fingerprint.Prefix)
	default:
		fmt.Fprintf(w, "captf: the plan moved since %s was approved; nothing was applied.\n", doc.Approved)
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

// printMovedBlocks lists blocks that moved, one a line.
func printMovedBlocks(w io.Writer, moved []planconfig.Moved) {
	for _, m := range moved {
		fmt.Fprintf(w, "  %-8s %s: %s\n", m.Kind, m.Address, m.Block)
	}
}

// printRuntimeRefusal explains an apply refused because what the plan runs
// at apply outside it moved: the plan itself hashes to the approved value.
func printRuntimeRefusal(w io.Writer, doc *refusal) {
	rt := doc.Runtime
	fmt.Fprintf(w, "\ncaptf: the plan hashes to the approved %s, but what it runs at apply outside the plan (provisioners, provider configurations) moved; nothing was applied.\n", doc.Approved)
	if rt.Unknown != "" {
		fmt.Fprintf(w, "What runs at apply cannot be checked: %s.\nRun captf plan in this directory and have that plan approved.\n", rt.Unknown)
		return
	}
	fmt.Fprintln(w, "What moved (blocks; values are never shown):")
	printMovedBlocks(w, rt.Moved)
	fmt.Fprintf(w, "An approval of %s covers what was first planned here (%s). To have this configuration approved, remove that file, plan again and have the plan approved again.\n", doc.Approved, rt.Record)
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
