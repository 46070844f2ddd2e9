package release

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/yaml"
)

// validKrewPlugin holds a manifest to the rules krew (v0.4.3,
// internal/index/validation) checks a plugin manifest with; krew's own
// module cannot be imported here (it pins client-go v11).
func validKrewPlugin(t *testing.T, p KrewPlugin) {
	t.Helper()
	if p.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || p.Kind != "Plugin" {
		t.Errorf("apiVersion %q, kind %q", p.APIVersion, p.Kind)
	}
	if !regexp.MustCompile(`^[\w-]+$`).MatchString(p.Metadata.Name) || p.Metadata.Name != "captf" {
		t.Errorf("name %q: krew installs it as kubectl-captf only if it is captf", p.Metadata.Name)
	}
	if p.Spec.ShortDescription == "" || strings.ContainsAny(p.Spec.ShortDescription, "\r\n") {
		t.Errorf("shortDescription %q", p.Spec.ShortDescription)
	}
	if _, err := version.ParseSemantic(strings.TrimPrefix(p.Spec.Version, "v")); err != nil || !strings.HasPrefix(p.Spec.Version, "v") {
		t.Errorf("version %q is not v and a semantic version: %v", p.Spec.Version, err)
	}
	if len(p.Spec.Platforms) == 0 {
		t.Fatal("no platform")
	}
	for _, pl := range p.Spec.Platforms {
		if pl.URI == "" || pl.Bin == "" || !regexp.MustCompile(`^[a-f0-9]{64}$`).MatchString(pl.Sha256) {
			t.Errorf("platform %+v: uri, bin and a sha256 of 64 hex digits are needed", pl)
		}
		if len(pl.Files) == 0 {
			t.Errorf("platform %+v: files, when given, are not empty", pl)
		}
		for _, f := range pl.Files {
			if f.From == "" || f.To == "" {
				t.Errorf("platform %+v: a file without from or to", pl)
			}
		}
		if len(pl.Selector.MatchLabels) == 0 {
			t.Errorf("platform %+v: an empty selector", pl)
		}
		for k := range pl.Selector.MatchLabels {
			if k != "os" && k != "arch" {
				t.Errorf("platform %+v: selector key %q (krew knows os and arch)", pl, k)
			}
		}
	}
}

// TestPlugin builds the krew plugin for this machine's platform (one
// more platform is one more cold cross-compile of kubectl-captf, minutes
// on two cores): the manifest keeps krew's rules, names the archive by its
// URL and sha256, the archive holds the binary and the LICENSE, and the
// binary says the release's version.
func TestPlugin(t *testing.T) {
	out := t.TempDir()
	host := v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}
	const base = "https://github.com/captf/captf/releases/download/v0.1.0/"
	p, err := Plugin(context.Background(), PluginOptions{Module: "../..", Version: "v0.1.0", Platforms: []v1.Platform{host}, URLBase: base, Out: out, Created: time.Unix(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, PluginManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	var written KrewPlugin
	if err := yaml.UnmarshalStrict(b, &written); err != nil {
		t.Fatalf("the manifest does not read back: %v\n%s", err, b)
	}
	validKrewPlugin(t, written)
	if len(written.Spec.Platforms) != 1 || written.Spec.Version != p.Spec.Version {
		t.Fatalf("platforms %+v", written.Spec.Platforms)
	}
	for _, pl := range written.Spec.Platforms {
		if !strings.HasPrefix(pl.URI, base) {
			t.Errorf("uri %q is not under %s", pl.URI, base)
		}
		archive := filepath.Join(out, path.Base(pl.URI))
		data, err := os.ReadFile(archive)
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != pl.Sha256 {
			t.Errorf("%s: sha256 %x, the manifest says %s", archive, sum, pl.Sha256)
		}
		names, bin := untar(t, archive, pl.Bin)
		if !slices.Equal(names, []string{pl.Bin, "LICENSE"}) {
			t.Errorf("%s holds %v", archive, names)
		}
		wantBin := "kubectl-captf"
		if pl.Selector.MatchLabels["os"] == "windows" {
			wantBin += ".exe"
		}
		if pl.Bin != wantBin {
			t.Errorf("bin %q on %v, want %q", pl.Bin, pl.Selector.MatchLabels, wantBin)
		}
		if pl.Selector.MatchLabels["os"] != host.OS || pl.Selector.MatchLabels["arch"] != host.Architecture {
			continue
		}
		exe := filepath.Join(t.TempDir(), pl.Bin)
		if err := os.WriteFile(exe, bin, 0o755); err != nil {
			t.Fatal(err)
		}
		v, err := exec.Command(exe, "--version").CombinedOutput()
		if err != nil || !strings.Contains(string(v), "v0.1.0") {
			t.Errorf("%s --version: %q, %v", pl.Bin, v, err)
		}
	}
}

// untar lists the entries of a tar.gz and returns the content of want.
func untar(t *testing.T, archive, want string) ([]string, []byte) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var names []string
	var content []byte
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names, content
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Name == want {
			if content, err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
}
