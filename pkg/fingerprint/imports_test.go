package fingerprint

import (
	"os/exec"
	"strings"
	"testing"
)

// TestStandardLibraryOnly keeps the fingerprint pure: no Kubernetes, no
// exec, nothing outside the standard library (ARCHITECTURE.md, layer 1).
func TestStandardLibraryOnly(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p != "github.com/captf/captf/pkg/fingerprint" {
			t.Errorf("pkg/fingerprint depends on %s", p)
		}
	}
	out, err = exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p == "os/exec" || strings.HasPrefix(p, "k8s.io/") {
			t.Errorf("pkg/fingerprint depends on %s", p)
		}
	}
}
