package quickstart

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The output that docs/kubectl-captf.md shows for each command is held to
// what the command prints (pluginPageShows): the example's names, ages and
// counts are the page's own, the shape of each line is the plugin's.

// consoleOutput returns the lines printed after the "$ command" line of
// the console block of docs/kubectl-captf.md that runs command.
func consoleOutput(t *testing.T, command string) []string {
	t.Helper()
	b, err := os.ReadFile("../../docs/kubectl-captf.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(b), "```console\n")
	for _, block := range blocks[1:] {
		body, _, _ := strings.Cut(block, "```")
		lines := strings.Split(strings.TrimRight(body, "\n"), "\n")
		if strings.HasPrefix(lines[0], "$ "+command) {
			return lines[1:]
		}
	}
	t.Fatalf("docs/kubectl-captf.md shows no output of %q", command)
	return nil
}

var (
	// showLabel is the label of a line of show's output ("Plan hash:").
	showLabel = regexp.MustCompile(`^([A-Z][a-z]+( [a-z]+)?):`)
	// resourceLine is a resource row of show's output.
	resourceLine = regexp.MustCompile(`^  [A-Za-z0-9_.\[\]"-]+ \((create|update|replace|delete|read)\)$`)
	// approvedLine is what approve prints.
	approvedLine = regexp.MustCompile(`^TerraformPlan [a-z0-9-]+/[a-z0-9-]+ approved by \S+ \(Terraform[A-Za-z]+/[a-z0-9-]+: \+\d+ ~\d+ -/\+\d+ -\d+, plan hash p2:[0-9a-f]+…?\)\.$`)
)

// samePlansShape fails unless the page's output of plans has the real
// header, and each of its rows the real rows' columns.
func samePlansShape(t *testing.T, page, real []string) {
	t.Helper()
	if len(page) < 2 || len(real) < 2 {
		t.Fatalf("plans: the page shows %d lines, the plugin printed %d", len(page), len(real))
	}
	if strings.Join(strings.Fields(page[0]), " ") != strings.Join(strings.Fields(real[0]), " ") {
		t.Errorf("plans: the page's header\n%s\nis not the plugin's\n%s", page[0], real[0])
	}
	columns := len(strings.Fields(real[0]))
	// CHANGES is four fields (+1 ~0 -/+0 -0): three more than the header's one.
	for _, row := range append(page[1:], real[1:]...) {
		if n := len(strings.Fields(row)); n != columns+3 {
			t.Errorf("plans: the row %q has %d fields, the header %d columns (and CHANGES four)", row, n, columns)
		}
	}
}

// sameShowShape fails unless the page's output of show has the real
// labels in the real order, and resource rows like the real ones.
func sameShowShape(t *testing.T, page, real []string) {
	t.Helper()
	labels := func(lines []string) (out []string) {
		for _, l := range lines {
			if m := showLabel.FindStringSubmatch(l); m != nil {
				out = append(out, m[1])
			} else if !resourceLine.MatchString(l) {
				t.Errorf("show: the line %q is neither a label's nor a resource's", l)
			}
		}
		return out
	}
	if p, r := strings.Join(labels(page), ", "), strings.Join(labels(real), ", "); p != r {
		t.Errorf("show: the page's labels\n%s\nare not the plugin's\n%s", p, r)
	}
}

// pluginPageShows runs plans and show against a waiting plan and holds the
// page's output of each to theirs.
func pluginPageShows(t *testing.T, kubeconfig, plan string) {
	t.Helper()
	samePlansShape(t, consoleOutput(t, "kubectl captf plans"), strings.Split(strings.TrimRight(plugin(t, kubeconfig, "plans", "-A"), "\n"), "\n"))
	sameShowShape(t, consoleOutput(t, "kubectl captf show"), strings.Split(strings.TrimRight(plugin(t, kubeconfig, "show", plan), "\n"), "\n"))
}
