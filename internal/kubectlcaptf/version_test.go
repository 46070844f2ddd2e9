package kubectlcaptf

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/captf/captf/internal/version"
)

// TestVersion: kubectl captf --version prints the stamped version and
// reaches no API server.
func TestVersion(t *testing.T) {
	defer func(s string) { version.Stamp = s }(version.Stamp)
	version.Stamp = "v0.7.1"
	t.Setenv("KUBECONFIG", "/nonexistent/kubeconfig")
	out, err := run(t, "--version")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("kubectl-captf version v0.7.1\n", out); diff != "" {
		t.Errorf("--version (-want +got):\n%s", diff)
	}
}
