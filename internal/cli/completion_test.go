package cli

import (
	"strings"
	"testing"
)

// TestCompletion: captf completion SHELL prints cobra's completion script
// for the shell, and the script completes captf's commands.
func TestCompletion(t *testing.T) {
	for shell, prefix := range map[string]string{
		"bash":       "# bash completion V2 for captf",
		"zsh":        "#compdef captf\n",
		"fish":       "# fish completion for captf",
		"powershell": "# powershell completion for captf",
	} {
		got := captf(t, "completion", shell)
		if got.code != 0 || got.stderr != "" {
			t.Errorf("completion %s: exit %d, stderr %q", shell, got.code, got.stderr)
		}
		if !strings.HasPrefix(got.stdout, prefix) || len(got.stdout) < 1000 {
			t.Errorf("completion %s printed %d bytes, want a script starting %q:\n%.200s", shell, len(got.stdout), prefix, got.stdout)
		}
	}
	// What the scripts call: the commands that start with "p".
	got := captf(t, "__complete", "p")
	want := []string{"plan", "preview"}
	var names []string
	for _, line := range strings.Split(got.stdout, "\n") {
		name, _, _ := strings.Cut(line, "\t")
		if name != "" && !strings.HasPrefix(name, ":") {
			names = append(names, name)
		}
	}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("completing captf p: %q, want %q\n%s", names, want, got.stdout)
	}
}

// TestCompletionBadUsage: a shell captf has no script for, an empty one,
// or an argument after the shell is bad usage (exit 2) that names the
// problem, not help and exit 0.
func TestCompletionBadUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"completion", "tcsh"}, `unknown command "tcsh" for "captf completion"`},
		{[]string{"completion", ""}, `unknown command "" for "captf completion"`},
		{[]string{"completion"}, "captf completion needs a command"},
		{[]string{"completion", "bash", "extra"}, `captf completion bash takes no arguments, got "extra"`},
	} {
		got := captf(t, c.args...)
		if got.code != 2 || !strings.Contains(got.stderr, c.want) {
			t.Errorf("captf %q: exit %d, stderr %q; want exit 2 saying %q", c.args, got.code, got.stderr, c.want)
		}
	}
}

// TestCompleteLintRole: the values of lint --role complete, and no file
// names are offered for it.
func TestCompleteLintRole(t *testing.T) {
	got := captf(t, "__complete", "lint", "--role", "")
	lines := strings.Split(strings.TrimSpace(got.stdout), "\n")
	if strings.Join(lines, " ") != "cluster machine pool :4" {
		t.Errorf("completing lint --role: %q, want the roles and :4 (no file completion)", lines)
	}
}
