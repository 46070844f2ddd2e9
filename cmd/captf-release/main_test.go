package main

import (
	"bytes"
	"context"
	"debug/elf"
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
	digests := map[string]v1.Hash{}
	for _, n := range []string{"captf-manager", "captf-runner"} {
		a, b := layoutDigest(t, filepath.Join(first, n)), layoutDigest(t, filepath.Join(second, n))
		if a != b {
			t.Errorf("%s: two builds of one source gave %s and %s", n, a, b)
		}
		digests[n] = a
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
		reg + "/captf-runner:" + ver + "@" + digests["captf-runner"].String() + "\n"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("push output (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		name, entry, line string
	}{
		{"captf-manager", "/manager", "manager version " + ver + "\n"},
		{"captf-runner", engine.RunnerImagePath, "captf-runner version " + ver + "\n"},
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
		})
	}
}

func layoutDigest(t *testing.T, dir string) v1.Hash {
	t.Helper()
	idx, err := image.ReadLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}
