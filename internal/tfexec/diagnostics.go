package tfexec

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// ErrInvalidInput marks a run that terraform refused because the inputs do
// not fit the module: a variable it does not declare, a value of the wrong
// type, a required one missing, a validation rule that failed.
var ErrInvalidInput = errors.New("the inputs do not fit the module")

// inputSummaries are the summaries of terraform's (and tofu's) diagnostics
// about inputs. A summary is a fixed phrase; the detail below it may quote
// a value (a validation rule's message can), so only the summary and the
// names the detail mentions are kept.
var inputSummaries = []string{
	"Invalid value for input variable",
	"Invalid value for variable",
	"Unsupported argument",
	"Extraneous JSON object property",
	"Missing required argument",
	"No value for required variable",
}

// namePatterns find the variable or argument a diagnostic is about.
var namePatterns = []*regexp.Regexp{
	regexp.MustCompile(`\bvar\.([A-Za-z_][A-Za-z0-9_-]*)`),
	regexp.MustCompile(`(?:argument|block type is) named "([A-Za-z_][A-Za-z0-9_-]*)"`),
	regexp.MustCompile(`argument "([A-Za-z_][A-Za-z0-9_-]*)" is required`),
	regexp.MustCompile(`variable "([A-Za-z_][A-Za-z0-9_-]*)" is not set`),
}

// inputProblems reads terraform's -no-color diagnostics and returns one
// line per diagnostic about inputs: the summary and the names it concerns.
func inputProblems(stderr []byte) []string {
	var problems []string
	for _, block := range bytes.Split(stderr, []byte("Error: "))[1:] {
		summary, detail, _ := strings.Cut(string(block), "\n")
		summary = strings.TrimSpace(summary)
		if !slices.Contains(inputSummaries, summary) {
			continue
		}
		// The detail is the unindented text; indented lines are the source
		// snippet and the values of its expressions, not what is wrong.
		var prose []string
		for _, l := range strings.Split(detail, "\n") {
			if !strings.HasPrefix(l, " ") {
				prose = append(prose, l)
			}
		}
		var names []string
		for _, p := range namePatterns {
			for _, m := range p.FindAllStringSubmatch(strings.Join(prose, "\n"), -1) {
				if !slices.Contains(names, m[1]) {
					names = append(names, m[1])
				}
			}
		}
		line := summary
		if len(names) > 0 {
			line += " (" + strings.Join(names, ", ") + ")"
		}
		if !slices.Contains(problems, line) {
			problems = append(problems, line)
		}
	}
	return problems
}

// tail keeps the last max bytes written to it.
type tail struct {
	buf []byte
	max int
}

func (t *tail) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// inputError wraps a failed run as ErrInvalidInput when its diagnostics
// are about inputs.
func inputError(op string, stderr []byte, err error) error {
	problems := inputProblems(stderr)
	if len(problems) == 0 {
		return err
	}
	return fmt.Errorf("%s: %w: %s", op, ErrInvalidInput, strings.Join(problems, "; "))
}
