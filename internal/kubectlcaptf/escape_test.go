package kubectlcaptf

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// TestTextEscapesControlCharacters: a string from the API server that
// holds an escape sequence, a carriage return or a line break (approvedBy
// is free text) is printed quoted by the text output: it neither acts on
// the terminal nor forges a row or a line.
func TestTextEscapesControlCharacters(t *testing.T) {
	p := newPlan(examplePlans()[1])
	p.ApprovedBy = "mallory\x1b[2J\r\nApproved by: alice"
	p.Summary.Resources = append(p.Summary.Resources, "aws_s3_bucket.x\x1b]0;pwned\x07 (create)")
	p.Target.Name = "pool\u009b31m"
	var table, detail bytes.Buffer
	if err := writeTable(&table, []Plan{p}, true, now); err != nil {
		t.Fatal(err)
	}
	if err := writeDetail(&detail, p, now); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"table": table.String(), "detail": detail.String()} {
		if strings.ContainsAny(out, "\x1b\r\x07\u009b") {
			t.Errorf("%s: a control character reached the terminal:\n%q", name, out)
		}
		if strings.Count("\n"+out, "\nApproved by:") > 1 {
			t.Errorf("%s: approvedBy forged a line:\n%s", name, out)
		}
	}
	if n := strings.Count(table.String(), "\n"); n != 2 {
		t.Errorf("table of one plan has %d lines, want 2:\n%s", n, table.String())
	}
	if !strings.Contains(detail.String(), `"mallory\x1b[2J\r\nApproved by: alice"`) {
		t.Errorf("detail does not show approvedBy quoted:\n%s", detail.String())
	}
}

// TestCompletionBadUsage: a shell with no script, an empty one, or an
// argument after the shell is bad usage (ExitUsage) that names the
// problem, not help and exit 0; so is an unknown command or flag.
func TestCompletionBadUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"completion", "tcsh"}, `unknown command "tcsh" for "kubectl captf completion"`},
		{[]string{"completion", ""}, `unknown command "" for "kubectl captf completion"`},
		{[]string{"completion", "bash", "extra"}, `kubectl captf completion bash takes no arguments, got "extra"`},
		{[]string{"bogus"}, `unknown command "bogus" for "kubectl captf"`},
		{[]string{"plans", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"show"}, "accepts 1 arg(s), received 0"},
	} {
		out, err := run(t, c.args...)
		if code := ExitCode(err); code != ExitUsage || !strings.Contains(fmt.Sprint(err), c.want) {
			t.Errorf("kubectl captf %q: exit %d, error %v; want exit %d saying %q\n%s", c.args, code, err, ExitUsage, c.want, out)
		}
	}
}
