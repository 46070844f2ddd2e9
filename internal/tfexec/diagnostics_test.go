package tfexec

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestInputProblems(t *testing.T) {
	// Diagnostics as terraform 1.11 writes them with -no-color. The details
	// may quote a value (VALUE); only summaries and names are kept.
	stderr := "\nError: Invalid value for input variable\n\n  on main.tf.json line 1, in module.main:\n   1: {\"module\":{\"main\":{\"size\":\"${var.size}\"}}}\n\n" +
		"The given value is not suitable for module.main.var.size declared at\nmodule/main.tf:1,1-16: a number is required.\n" +
		"\nError: Invalid value for variable\n\nsize must be small, got VALUE; see var.size\n" +
		"\nError: Unsupported argument\n\nAn argument named \"extra\" is not expected here.\n" +
		"\nError: Missing required argument\n\nThe argument \"zone\" is required, but no definition was found.\n" +
		"\nError: Error acquiring the state lock\n\nLock Info: VALUE\n"
	want := []string{
		"Invalid value for input variable (size)",
		"Invalid value for variable (size)",
		"Unsupported argument (extra)",
		"Missing required argument (zone)",
	}
	got := inputProblems([]byte(stderr))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	if strings.Contains(strings.Join(got, " "), "VALUE") {
		t.Error("a detail's value reached the problems")
	}
	if got := inputProblems([]byte("\nError: Error acquiring the state lock\n")); got != nil {
		t.Errorf("a failure that is not about inputs: %q", got)
	}
}

func TestTail(t *testing.T) {
	w := &tail{max: 4}
	_, _ = w.Write([]byte("abc"))
	_, _ = w.Write([]byte("defg"))
	if string(w.buf) != "defg" {
		t.Errorf("tail kept %q", w.buf)
	}
}
