// Package puretest checks that a pure package of captf (pkg/fingerprint,
// pkg/changeset) depends on nothing but the standard library, and on none
// of the standard packages it must not use.
package puretest

import (
	"os/exec"
	"strings"
	"testing"
)

// StandardLibraryOnly fails the test when the package in the current
// folder, whose import path is self, depends on a package outside the
// standard library or on one of forbidden (an entry ending in "/" forbids
// every path under it).
func StandardLibraryOnly(t *testing.T, self string, forbidden ...string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p != self {
			t.Errorf("%s depends on %s", self, p)
		}
	}
	out, err = exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if p == f || (strings.HasSuffix(f, "/") && strings.HasPrefix(p, f)) {
				t.Errorf("%s depends on %s", self, p)
			}
		}
	}
}
