package tfstate

import (
	"testing"

	"github.com/captf/captf/internal/puretest"
)

// TestImports: tfstate is pure, so the manager, the runner and tests can
// all use it; it reaches no API server and runs nothing.
func TestImports(t *testing.T) {
	puretest.StandardLibraryOnly(t, "github.com/captf/captf/internal/tfstate", "os/exec", "net", "k8s.io/")
}
