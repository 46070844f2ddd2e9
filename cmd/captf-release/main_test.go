package main

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdxlib"

	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/image"
	"github.com/captf/captf/internal/version"
)

func runOut(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), args, &out)
	return out.String(), err
}

func TestManifestsWritesTheRelease(t *testing.T) {
	out := t.TempDir()
	if _, err := runOut(t, "manifests", "--version", "v0.1.0", "--registry", "ghcr.io/captf", "--out", out, "--config", "../../config"); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"infrastructure-components.yaml":     "image: ghcr.io/captf/captf-manager:v0.1.0",
		"metadata.yaml":                      "contract: v1beta2",
		"cluster-template.yaml":              "kind: KubeadmControlPlane",
		"cluster-template-machinepool.yaml":  "kind: TerraformMachinePool",
		"cluster-template-clusterclass.yaml": "classRef:",
		"clusterclass-captf.yaml":            "kind: TerraformClusterTemplate",
		"release-notes.md":                   "cosign attest --yes --key cosign.key --type spdxjson",
	} {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %q", name, want)
		}
	}
}

func TestRefusesWithoutSubcommand(t *testing.T) {
	for _, args := range [][]string{nil, {"--version", "v0.1.0"}, {"manifests", "--registry", "ghcr.io/captf", "extra"},
		{"images"}, {"images", "--version", "v0.1.0", "--platforms", "linux"}, {"push", "--version", "v0.1.0"}} {
		if _, err := runOut(t, args...); err == nil {
			t.Errorf("run(%q) succeeded", args)
		}
	}
}

func TestVersion(t *testing.T) {
	defer func(s string) { version.Stamp = s }(version.Stamp)
	version.Stamp = "v0.7.1"
	out, err := runOut(t, "--version")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("captf-release version v0.7.1\n", out); diff != "" {
		t.Errorf("--version (-want +got):\n%s", diff)
	}
}

// host is the platform of this machine; the tests build only it.
var host = v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}

// TestImagesPushedAndRun builds the release's images for this machine's
// platform twice, checks the two builds have the same digests, pushes
// them to a registry served in the test with the push make release runs,
// and checks what a kubelet would run: pulled by tag for this platform,
// the entrypoint, a non-root user, the runner at the path runner Jobs
// run it from, a static binary, and that binary, taken from the layers,
// printing the stamped version.
func TestImagesPushedAndRun(t *testing.T) {
	const ver = "v0.3.0-rc.1"
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	build := func() string {
		out := t.TempDir()
		if _, err := runOut(t, "images", "--version", ver, "--platforms", host.String(), "--out", out, "--module", "../.."); err != nil {
			t.Fatal(err)
		}
		return out
	}
	first, second := build(), build()
	digests, sboms := map[string]v1.Hash{}, map[string]v1.Hash{}
	for _, n := range []string{"captf-manager", "captf-runner"} {
		a, b := layoutDigest(t, filepath.Join(first, n)), layoutDigest(t, filepath.Join(second, n))
		if a != b {
			t.Errorf("%s: two builds of one source gave %s and %s", n, a, b)
		}
		digests[n] = a
		a, b = sbomDigest(t, filepath.Join(first, n)), sbomDigest(t, filepath.Join(second, n))
		if a != b {
			t.Errorf("%s: two builds of one source gave SBOM referrers %s and %s", n, a, b)
		}
		sboms[n] = a
	}

	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	reg := strings.TrimPrefix(srv.URL, "http://") + "/captf"
	if _, err := runOut(t, "push", "--version", "v9.9.9", "--registry", reg, "--in", first); err == nil ||
		!strings.Contains(err.Error(), `built for version "v0.3.0-rc.1", not "v9.9.9"`) {
		t.Errorf("pushing images built for another version: %v", err)
	}
	out, err := runOut(t, "push", "--version", ver, "--registry", reg, "--in", first)
	if err != nil {
		t.Fatal(err)
	}
	want := reg + "/captf-manager:" + ver + "@" + digests["captf-manager"].String() + "\n" +
		reg + "/captf-manager@" + sboms["captf-manager"].String() + "\n" +
		reg + "/captf-runner:" + ver + "@" + digests["captf-runner"].String() + "\n" +
		reg + "/captf-runner@" + sboms["captf-runner"].String() + "\n"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("push output (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		name, entry, line, pkg string
		// modules go.mod requires that the binary links, which its SBOM
		// must name at go.mod's version.
		modules []string
	}{
		{"captf-manager", "/manager", "manager version " + ver + "\n", "github.com/captf/captf/cmd/manager",
			[]string{"sigs.k8s.io/controller-runtime", "k8s.io/client-go"}},
		{"captf-runner", engine.RunnerImagePath, "captf-runner version " + ver + "\n", "github.com/captf/captf/cmd/captf-runner",
			[]string{"github.com/hashicorp/terraform-json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref, err := name.ParseReference(reg + "/" + tc.name + ":" + ver)
			if err != nil {
				t.Fatal(err)
			}
			idx, err := remote.Index(ref)
			if err != nil {
				t.Fatal(err)
			}
			if d, err := idx.Digest(); err != nil || d != digests[tc.name] {
				t.Errorf("the registry serves index %s, %v; pushed %s", d, err, digests[tc.name])
			}
			img, err := remote.Image(ref, remote.WithPlatform(host))
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			got := []any{cf.Config.Entrypoint, cf.Config.User, cf.OS + "/" + cf.Architecture, cf.Created.UTC().Unix(), cf.Config.Labels[image.VersionLabel]}
			if diff := cmp.Diff([]any{[]string{tc.entry}, "65532:65532", host.String(), int64(1700000000), ver}, got); diff != "" {
				t.Errorf("config: entrypoint, user, platform, created, version (-want +got):\n%s", diff)
			}
			dir := t.TempDir()
			if err := image.Unpack(img, dir); err != nil {
				t.Fatal(err)
			}
			bin := filepath.Join(dir, tc.entry)
			f, err := elf.Open(bin)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP {
					t.Errorf("%s asks for a dynamic loader: not static, it would not run on scratch", tc.entry)
				}
			}
			passwd, err := os.ReadFile(filepath.Join(dir, "etc/passwd"))
			if err != nil || !strings.Contains(string(passwd), "nonroot:x:65532:65532:") {
				t.Errorf("/etc/passwd %q, %v", passwd, err)
			}
			if info, err := os.Stat(filepath.Join(dir, image.CACertificatesPath)); err != nil || info.Size() < 10000 {
				t.Errorf("CA certificates: %v, %v", info, err)
			}
			cmd := exec.Command(bin, "--version")
			cmd.Env = []string{} // nothing of this machine's environment, as in a pod
			b, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s --version: %v\n%s", tc.entry, err, b)
			}
			if diff := cmp.Diff(tc.line, string(b)); diff != "" {
				t.Errorf("%s --version (-want +got):\n%s", tc.entry, diff)
			}

			// The SBOM: listed among the index's referrers, with the
			// index as its subject, the bytes written beside the layout.
			sbom := pulledSBOM(t, ref.Context(), digests[tc.name], sboms[tc.name])
			written, err := os.ReadFile(filepath.Join(first, tc.name+".spdx.json"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(sbom, written) {
				t.Errorf("the pushed SBOM differs from %s.spdx.json", tc.name)
			}
			pkgs := sbomPackages(t, sbom)
			for _, p := range []string{tc.name, tc.name + " " + host.String(), tc.pkg, "stdlib"} {
				if pkgs[p] == nil {
					t.Errorf("the SBOM has no package %s", p)
				}
			}
			if diff := cmp.Diff([]string{ver}, pkgs[tc.pkg]); diff != "" {
				t.Errorf("the SBOM's %s versions (-want +got):\n%s", tc.pkg, diff)
			}
			for _, mod := range tc.modules {
				if diff := cmp.Diff([]string{goList(t, "list", "-m", "-f", "{{.Version}}", mod)}, pkgs[mod]); diff != "" {
					t.Errorf("the SBOM's %s versions, want go.mod's (-want +got):\n%s", mod, diff)
				}
			}
			// Every module the go command finds in the binary, and none
			// else, is a package of the SBOM, with the standard library
			// and the module the CA certificates come from.
			const caModule = "golang.org/x/crypto/x509roots/fallback"
			deps := map[string][]string{
				"stdlib": {strings.TrimPrefix(goList(t, "env", "GOVERSION"), "go")},
				caModule: {goList(t, "list", "-m", "-f", "{{.Version}}", caModule)},
			}
			last := ""
			for _, line := range strings.Split(goList(t, "version", "-m", bin), "\n") {
				switch f := strings.Fields(line); {
				case len(f) >= 3 && f[0] == "dep":
					last, deps[f[1]] = f[1], []string{f[2]}
				case len(f) >= 3 && f[0] == "=>": // the module that replaced the last dep is the one linked
					delete(deps, last)
					deps[f[1]] = []string{f[2]}
				}
			}
			libraries := map[string][]string{}
			for p, versions := range pkgs {
				if p != tc.name && !strings.HasPrefix(p, tc.name+" ") && p != tc.pkg {
					libraries[p] = versions
				}
			}
			if diff := cmp.Diff(deps, libraries); diff != "" {
				t.Errorf("the SBOM's libraries, want the modules go version -m finds in %s (-want +got):\n%s", tc.entry, diff)
			}
		})
	}
}

// sbomDigest is the digest of the SBOM referrer of the layout at dir, its
// one referrer.
func sbomDigest(t *testing.T, dir string) v1.Hash {
	t.Helper()
	_, referrers, err := image.ReadLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(referrers) != 1 {
		t.Fatalf("%s: %d referrers, want its SBOM", dir, len(referrers))
	}
	d, err := referrers[0].Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// pulledSBOM checks that the registry lists the artifact sbom among the
// referrers of the index at subject in repo, as an SPDX JSON artifact whose
// subject is that index, and returns its one layer: the SBOM.
func pulledSBOM(t *testing.T, repo name.Repository, subject, sbom v1.Hash) []byte {
	t.Helper()
	referrers, err := remote.Referrers(repo.Digest(subject.String()))
	if err != nil {
		t.Fatal(err)
	}
	m, err := referrers.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var listed []v1.Hash
	for _, d := range m.Manifests {
		listed = append(listed, d.Digest)
	}
	if diff := cmp.Diff([]v1.Hash{sbom}, listed); diff != "" {
		t.Errorf("the index's referrers (-want +got):\n%s", diff)
	}
	img, err := remote.Image(repo.Digest(sbom.String()))
	if err != nil {
		t.Fatal(err)
	}
	mf, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if mf.ArtifactType != image.SBOMMediaType || mf.Subject == nil || mf.Subject.Digest != subject || len(mf.Layers) != 1 || mf.Layers[0].MediaType != image.SBOMMediaType {
		t.Fatalf("the SBOM's manifest: artifactType %q, subject %+v, layers %+v; want %s, the index %s, one SBOM", mf.ArtifactType, mf.Subject, mf.Layers, image.SBOMMediaType, subject)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[0].Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sbomPackages checks that b is an SPDX 2.3 document in JSON with the
// fields the format requires, which the SPDX library reads and finds
// whole, and returns the versions of each package name.
func sbomPackages(t *testing.T, b []byte) map[string][]string {
	t.Helper()
	var doc struct {
		SPDXVersion       string `json:"spdxVersion"`
		DataLicense       string `json:"dataLicense"`
		SPDXID            string `json:"SPDXID"`
		Name              string `json:"name"`
		DocumentNamespace string `json:"documentNamespace"`
		CreationInfo      *struct {
			Creators []string `json:"creators"`
			Created  string   `json:"created"`
		} `json:"creationInfo"`
		Packages []struct {
			Name        string `json:"name"`
			SPDXID      string `json:"SPDXID"`
			VersionInfo string `json:"versionInfo"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("the SBOM is not JSON: %v", err)
	}
	got := []any{doc.SPDXVersion, doc.DataLicense, doc.SPDXID, doc.Name != "", strings.HasPrefix(doc.DocumentNamespace, "https://"),
		doc.CreationInfo != nil && len(doc.CreationInfo.Creators) > 0 && doc.CreationInfo.Created == "2023-11-14T22:13:20Z"}
	if diff := cmp.Diff([]any{"SPDX-2.3", "CC0-1.0", "SPDXRef-DOCUMENT", true, true, true}, got); diff != "" {
		t.Errorf("spdxVersion, dataLicense, SPDXID, a name, a namespace, creators and the build's time (-want +got):\n%s", diff)
	}
	parsed, err := spdxjson.Read(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("the SPDX library does not read the SBOM: %v", err)
	}
	if err := spdxlib.ValidateDocument(parsed); err != nil {
		t.Errorf("the SPDX library finds the SBOM invalid: %v", err)
	}
	pkgs := map[string][]string{}
	for _, p := range doc.Packages {
		if p.Name == "" || p.VersionInfo == "" || p.SPDXID == "" {
			t.Errorf("package %+v lacks a name, version or SPDXID", p)
		}
		pkgs[p.Name] = append(pkgs[p.Name], p.VersionInfo)
	}
	return pkgs
}

// goList runs the go command in the module and returns what it prints,
// trimmed.
func goList(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

func layoutDigest(t *testing.T, dir string) v1.Hash {
	t.Helper()
	idx, _, err := image.ReadLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}
