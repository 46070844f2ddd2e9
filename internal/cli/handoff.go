package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/captf/captf/internal/version"
)

// PreviewBinary is the program that runs `captf preview`. The preview's
// deploy-tool clients (kubectl's, CloudFormation's, …) live there rather
// than in captf: Go initialises every package a binary links at each
// start, and theirs took ~30 ms of every `captf plan`, well over a third
// of what it added to `terraform plan` on a 300-resource root.
const PreviewBinary = "captf-preview"

// handOffVersion carries captf's version to the preview binary, which
// warns when its own differs: both are installed from one version.
const handOffVersion = "CAPTF_HANDOFF_VERSION"

// newHandOff is captf's preview command: it runs the preview binary with
// the same arguments, which prints its own help and errors.
func newHandOff() *cobra.Command {
	return &cobra.Command{
		Use:                "preview",
		Short:              previewShort,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			path, err := previewBinary()
			if err != nil {
				return err
			}
			return handOff(path, args, append(os.Environ(), handOffVersion+"="+version.Get()))
		},
	}
}

// previewBinary finds the preview binary: beside captf (a release or `go
// install` puts both in one directory), else on PATH.
func previewBinary() (string, error) {
	dir := ""
	if self, err := os.Executable(); err == nil {
		if self, err = filepath.EvalSymlinks(self); err == nil {
			dir = filepath.Dir(self)
			path := filepath.Join(dir, PreviewBinary)
			info, err := os.Stat(path)
			switch {
			case err == nil && !info.IsDir():
				return path, nil
			case err != nil && !errors.Is(err, fs.ErrNotExist):
				// There, but unusable (a link loop, say): say so
				// rather than look elsewhere.
				return "", fmt.Errorf("captf preview runs %s, beside captf: %w", PreviewBinary, err)
			}
		}
	}
	if path, err := exec.LookPath(PreviewBinary); err == nil {
		return path, nil
	}
	v := version.Get()
	install := "go install github.com/captf/captf/cmd/" + PreviewBinary + "@" + v
	if strings.HasPrefix(v, "devel") {
		// Not a released captf: the preview binary of the same source.
		install = "go build -o " + filepath.Join(dir, PreviewBinary) + " ./cmd/" + PreviewBinary + " (in captf's source tree)"
	}
	return "", fmt.Errorf("captf preview runs %s, found neither beside captf nor on PATH; install it beside captf: %s", PreviewBinary, install)
}

// warnVersionSkew warns on stderr when the captf that handed off to this
// preview binary is of another version.
func warnVersionSkew(stderr io.Writer) {
	if v, ok := os.LookupEnv(handOffVersion); ok && v != version.Get() {
		fmt.Fprintf(stderr, "captf: warning: captf %s handed off to %s %s; install both at one version\n", v, PreviewBinary, version.Get())
	}
}
