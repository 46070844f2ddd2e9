package release

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// TestKrewInstallsPlugin installs kubectl-captf the way docs/kubectl-captf.md
// tells a user to: krew (the real one, hack/install-krew.sh) reads the
// release's manifest from its URL, downloads the archive, checks its sha256
// and puts the plugin on krew's PATH. The release is served from a loopback
// HTTP server. krew updates its plugin index before it installs from a URL;
// with no network here, that index is a local git repository with one empty
// commit, a stand-in for github.com/kubernetes-sigs/krew-index (which captf's
// install does not read: the manifest comes from the URL).
func TestKrewInstallsPlugin(t *testing.T) {
	krew := os.Getenv("CAPTF_KREW")
	if krew == "" {
		t.Fatal("CAPTF_KREW is not set: the path of krew, from hack/install-krew.sh (make test sets it)")
	}
	out := t.TempDir()
	srv := httptest.NewServer(http.FileServer(http.Dir(out)))
	defer srv.Close()
	host := v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}
	p, err := Plugin(context.Background(), PluginOptions{Module: "../..", Version: "v0.1.0", Platforms: []v1.Platform{host}, URLBase: srv.URL, Out: out, Created: time.Unix(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	manifestURL := srv.URL + "/" + PluginManifestFile

	root := krewRoot(t)
	if outp, err := runKrew(krew, root, "install", "--manifest-url="+manifestURL); err != nil {
		t.Fatalf("krew install --manifest-url: %v\n%s", err, outp)
	}
	v, err := exec.Command(filepath.Join(root, "bin", "kubectl-captf"), "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(v), "v0.1.0") {
		t.Fatalf("the plugin krew installed: --version %q, %v", v, err)
	}

	// An archive that is not the one the manifest names is refused.
	archive := filepath.Join(out, filepath.Base(p.Spec.Platforms[0].URI))
	if err := os.WriteFile(archive, []byte("not the release's archive"), 0o644); err != nil {
		t.Fatal(err)
	}
	other := krewRoot(t)
	outp, err := runKrew(krew, other, "install", "--manifest-url="+manifestURL)
	if err == nil {
		t.Fatalf("krew installed an archive whose sha256 the manifest does not name:\n%s", outp)
	}
	if _, err := os.Lstat(filepath.Join(other, "bin", "kubectl-captf")); err == nil {
		t.Fatal("krew refused the archive but left kubectl-captf on its PATH")
	}
}

// krewRoot makes a KREW_ROOT whose default index is a local git
// repository with one empty commit (see TestKrewInstallsPlugin).
func krewRoot(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	index := filepath.Join(dir, "index-origin")
	root := filepath.Join(dir, "krew")
	for _, args := range [][]string{
		{"init", "-q", index},
		{"-C", index, "-c", "user.name=captf", "-c", "user.email=captf@example.invalid", "commit", "-q", "--allow-empty", "-m", "index"},
		{"clone", "-q", index, filepath.Join(root, "index", "default")},
	} {
		if outp, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, outp)
		}
	}
	return root
}

func runKrew(krew, root string, args ...string) (string, error) {
	cmd := exec.Command(krew, args...)
	cmd.Env = append(os.Environ(), "KREW_ROOT="+root)
	outp, err := cmd.CombinedOutput()
	return string(outp), err
}
