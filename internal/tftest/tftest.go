// Package tftest finds the real terraform and tofu binaries for tests and
// copies root modules into a test's temporary directory. A missing binary
// fails the test: CI installs both through hack/ (make test), and a test
// never skips for want of one.
package tftest

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// Binary is one terraform-compatible binary under test.
type Binary struct {
	Name string // terraform or tofu
	Path string
}

// TofuVersion is the OpenTofu release hack/install-tofu.sh builds.
const TofuVersion = "v1.12.6"

// Binaries returns terraform and tofu. terraform comes from $CAPTF_TERRAFORM
// or PATH; tofu from $CAPTF_TOFU, PATH, or the cache of hack/install-tofu.sh.
func Binaries(t testing.TB) []Binary {
	t.Helper()
	return []Binary{Terraform(t), Tofu(t)}
}

// Terraform returns the terraform binary or fails the test.
func Terraform(t testing.TB) Binary {
	t.Helper()
	p := find("CAPTF_TERRAFORM", "terraform", "")
	if p == "" {
		t.Fatal("terraform not found: set CAPTF_TERRAFORM or put terraform on PATH (make test checks for it)")
	}
	return Binary{Name: "terraform", Path: p}
}

// Tofu returns the tofu binary or fails the test.
func Tofu(t testing.TB) Binary {
	t.Helper()
	built := filepath.Join(CacheDir(), "tofu", TofuVersion, runtime.GOOS+"-"+runtime.GOARCH, "tofu")
	p := find("CAPTF_TOFU", "tofu", built)
	if p == "" {
		t.Fatalf("tofu not found at $CAPTF_TOFU, on PATH or at %s: run hack/install-tofu.sh (make test does)", built)
	}
	return Binary{Name: "tofu", Path: p}
}

// CacheDir is where the hack/ scripts cache what they build:
// $CAPTF_CACHE, else $XDG_CACHE_HOME/captf, else ~/.cache/captf.
func CacheDir() string {
	if c := os.Getenv("CAPTF_CACHE"); c != "" {
		return c
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "captf")
}

func find(env, name, built string) string {
	if p := os.Getenv(env); p != "" {
		return p
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if built != "" {
		if _, err := os.Stat(built); err == nil {
			return built
		}
	}
	return ""
}

// CopyRoot copies the directory src into a new temporary directory and
// returns its path.
func CopyRoot(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatalf("copy %s: %v", src, err)
	}
	return dst
}

// Env is the environment tests give terraform: offline, no checkpoint, a
// CLI config of the test's own.
func Env(t testing.TB) []string {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "terraform.rc")
	if err := os.WriteFile(cfg, []byte("disable_checkpoint = true\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"TF_CLI_CONFIG_FILE=" + cfg, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1", "TF_INPUT=0"}
}
