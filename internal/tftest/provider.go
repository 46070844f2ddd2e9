package tftest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
)

// The captftest provider (internal/testprovider), as terraform and tofu
// find it. The test of that package checks these against its own.
const (
	// ProviderSource is captftest's source address: with a hostname, so
	// that terraform and tofu look it up at the same path of the mirror.
	ProviderSource = "example.com/captf/captftest"
	// ProviderVersion is its only version.
	ProviderVersion = "0.1.0"
	// ProviderRootEnv names the variable that gives its root directory
	// when the provider block does not.
	ProviderRootEnv = "CAPTF_TEST_PROVIDER_ROOT"

	providerPackage = "github.com/captf/captf/cmd/terraform-provider-captftest"
)

// TestProvider is the captftest provider installed in a filesystem mirror.
type TestProvider struct {
	// Mirror is the filesystem mirror directory.
	Mirror string
	// Binary is the provider binary inside Mirror.
	Binary string
	// CLIConfig is a CLI config file (TF_CLI_CONFIG_FILE) that installs
	// captftest from Mirror and nothing from anywhere else.
	CLIConfig string
	// Env is the environment of Env with TF_CLI_CONFIG_FILE set to
	// CLIConfig.
	Env []string
}

var providerBuild struct {
	once sync.Once
	bin  string
	err  error
}

// Provider builds captftest into the mirror under CacheDir (the first call
// of a test process builds; go build's cache makes a rebuild take seconds
// and an unchanged binary is not written again) and returns it with a CLI
// config of the test's own. A failed build fails the test.
// hack/build-test-provider.sh builds the same mirror from the shell.
func Provider(t testing.TB) TestProvider {
	t.Helper()
	providerBuild.once.Do(func() {
		providerBuild.bin, providerBuild.err = buildProvider(ProviderMirror())
	})
	if providerBuild.err != nil {
		t.Fatalf("build the captftest provider: %v", providerBuild.err)
	}
	mirror := ProviderMirror()
	cfg := filepath.Join(t.TempDir(), "terraform.rc")
	if err := os.WriteFile(cfg, []byte(ProviderCLIConfig(mirror)), 0o600); err != nil {
		t.Fatal(err)
	}
	return TestProvider{
		Mirror:    mirror,
		Binary:    providerBuild.bin,
		CLIConfig: cfg,
		Env:       []string{"TF_CLI_CONFIG_FILE=" + cfg, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1", "TF_INPUT=0"},
	}
}

// ProviderMirror is the filesystem mirror hack/build-test-provider.sh and
// Provider build into.
func ProviderMirror() string {
	return filepath.Join(CacheDir(), "provider-mirror")
}

// ProviderCLIConfig is a CLI config that installs captftest from mirror
// only. It has no direct block: no other provider can be installed, and
// nothing is looked up on the network.
func ProviderCLIConfig(mirror string) string {
	return fmt.Sprintf(`disable_checkpoint = true
provider_installation {
  filesystem_mirror {
    path    = %s
    include = [%q]
  }
}
`, strconv.Quote(mirror), ProviderSource)
}

// providerBinary is the binary's path in mirror's unpacked layout.
func providerBinary(mirror string) string {
	return filepath.Join(mirror, ProviderSource, ProviderVersion, runtime.GOOS+"_"+runtime.GOARCH,
		"terraform-provider-captftest_v"+ProviderVersion)
}

// buildProvider runs go build into the mirror under a lock on the mirror,
// so that test processes of several packages do not write the binary at
// once.
func buildProvider(mirror string) (string, error) {
	bin := providerBinary(mirror)
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(filepath.Join(mirror, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing the file unlocks too
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, providerPackage)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", providerPackage, err, out)
	}
	return bin, nil
}
