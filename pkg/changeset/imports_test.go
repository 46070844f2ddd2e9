package changeset

import (
	"testing"

	"github.com/captf/captf/internal/puretest"
)

// TestStandardLibraryOnly keeps the change set pure: no Kubernetes, no
// exec, no network, nothing outside the standard library (ARCHITECTURE.md,
// layer 2).
func TestStandardLibraryOnly(t *testing.T) {
	puretest.StandardLibraryOnly(t, "github.com/captf/captf/pkg/changeset", "os/exec", "net")
}
