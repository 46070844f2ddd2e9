package changeset

import (
	"os/exec"
	"strings"
	"testing"
)

// TestStandardLibraryOnly keeps the change set pure: no Kubernetes, no
// exec, no network, nothing outside the standard library (ARCHITECTURE.md,
// layer 2).
func TestStandardLibraryOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p != "github.com/captf/captf/pkg/changeset" {
			t.Errorf("pkg/changeset depends on %s", p)
		}
	}
	out, err = exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p == "os/exec" || p == "net" {
			t.Errorf("pkg/changeset depends on %s", p)
		}
	}
}
