package fingerprint

import (
	"testing"

	"github.com/captf/captf/internal/puretest"
)

// TestStandardLibraryOnly keeps the fingerprint pure: no Kubernetes, no
// exec, nothing outside the standard library (ARCHITECTURE.md, layer 1).
func TestStandardLibraryOnly(t *testing.T) {
	puretest.StandardLibraryOnly(t, "github.com/captf/captf/pkg/fingerprint", "os/exec", "k8s.io/")
}
