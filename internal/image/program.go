package image

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/captf/captf/internal/version"
)

// Program is one of captf's binaries and the image that carries it: the
// static binary on scratch with Base, run as NonRoot.
type Program struct {
	// Package is the binary's Go package, relative to the module root.
	Package string
	// Path is where the image holds the binary; it is the entrypoint.
	Path string
}

// captf's images. The runner image's path is the one runner Jobs' init
// container runs (terraformcluster.RunnerImagePath).
var (
	Manager = Program{Package: "./cmd/manager", Path: "/manager"}
	Runner  = Program{Package: "./cmd/captf-runner", Path: "/captf-runner/captf-runner"}
)

// VersionLabel is the image config label holding the version a Program's
// image was built for.
const VersionLabel = "org.opencontainers.image.version"

// Options says how to build a Program's image.
type Options struct {
	// Module is the folder of captf's go.mod, where go build runs.
	Module string
	// Version is stamped into the binary (version.Stamp) and labels the
	// image.
	Version string
	// Platforms are the index's images, one binary each.
	Platforms []v1.Platform
	// Created is every file's modification time and the images' creation
	// time; a fixed time (SOURCE_DATE_EPOCH) keeps digests reproducible.
	Created time.Time
	// Work is a folder for the compiled binaries.
	Work string
}

// Index compiles p for every platform of opts and returns the index of
// their images.
func (p Program) Index(ctx context.Context, opts Options) (v1.ImageIndex, error) {
	if opts.Version == "" {
		return nil, fmt.Errorf("image of %s: no version", p.Package)
	}
	base, err := Layer(Base(), opts.Created)
	if err != nil {
		return nil, err
	}
	images := make([]v1.Image, 0, len(opts.Platforms))
	for _, platform := range opts.Platforms {
		bin := filepath.Join(opts.Work, strings.ReplaceAll(platform.String(), "/", "-"), filepath.Base(p.Path))
		if err := Compile(ctx, opts.Module, p.Package, platform, opts.Version, bin); err != nil {
			return nil, err
		}
		layer, err := Layer([]File{{Path: p.Path, Mode: 0o755, Source: bin}}, opts.Created)
		if err != nil {
			return nil, err
		}
		img, err := Build(Spec{
			Platform:   platform,
			Created:    opts.Created,
			Layers:     []v1.Layer{base, layer},
			CreatedBy:  []string{"captf: base (passwd, group, CA certificates)", "captf: go build " + p.Package},
			Entrypoint: []string{p.Path},
			User:       User,
			WorkingDir: "/",
			Labels: map[string]string{
				"org.opencontainers.image.source": "https://github.com/captf/captf",
				VersionLabel:                      opts.Version,
			},
		})
		if err != nil {
			return nil, fmt.Errorf("image of %s for %s: %w", p.Package, platform, err)
		}
		images = append(images, img)
	}
	return Index(images...)
}

// Compile builds the static binary of pkg (relative to the module folder)
// for platform into out, with version stamped: CGO_ENABLED=0, -trimpath,
// no symbol table and an empty build ID, so the same source and toolchain
// give the same bytes.
func Compile(ctx context.Context, module, pkg string, platform v1.Platform, ver, out string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return fmt.Errorf("compile %s: %w", pkg, err)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath",
		"-ldflags", "-s -w -buildid= -X "+version.StampVariable+"="+ver,
		"-o", out, pkg)
	cmd.Dir = module
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+platform.OS, "GOARCH="+platform.Architecture)
	if platform.Architecture == "arm" && platform.Variant != "" {
		cmd.Env = append(cmd.Env, "GOARM="+strings.TrimPrefix(platform.Variant, "v"))
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("compile %s for %s: %w\n%s", pkg, platform, err, b)
	}
	return nil
}
