package realnode

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A missing binary of the node fails with its name and how to install
// it, before anything starts.
func TestPreflightNamesWhatIsMissing(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the real node needs root: run the tests as root (CI does)")
	}
	dir := t.TempDir()
	t.Setenv(EnvAssets, dir)
	for _, b := range nodeBinaries[:3] {
		if err := os.WriteFile(filepath.Join(dir, b), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Preflight()
	if err == nil || !strings.Contains(err.Error(), "no executable containerd in $CAPTF_KUBENODE") || !strings.Contains(err.Error(), "hack/install-kubenode.sh") {
		t.Errorf("Preflight with no containerd: %v", err)
	}
	t.Setenv(EnvAssets, "")
	if _, err := Preflight(); err == nil || !strings.Contains(err.Error(), "$CAPTF_KUBENODE is not set") {
		t.Errorf("Preflight with no $CAPTF_KUBENODE: %v", err)
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/tmp/a`:             `/tmp/a`,
		`/tmp/with\040space`: `/tmp/with space`,
		`/tmp/tab\011x`:      "/tmp/tab\tx",
		`/tmp/trailing\04`:   `/tmp/trailing\04`,
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}
