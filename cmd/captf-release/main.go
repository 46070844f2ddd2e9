// Command captf-release builds a captf release: the files clusterctl reads
// from a provider's release (see internal/release), and the manager and
// runner images, each index with its SBOM attached as a referrer, built
// and pushed with no container engine (see internal/image):
//
//	captf-release manifests --version v0.1.0 --registry ghcr.io/captf --out dist
//	captf-release images --version v0.1.0 --platforms linux/amd64,linux/arm64 --out dist/images
//	captf-release push --version v0.1.0 --registry ghcr.io/captf --in dist/images
//	captf-release plugin --version v0.1.0 --url-base https://github.com/captf/captf/releases/download/v0.1.0 --out dist/plugin
//	captf-release --version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/captf/captf/internal/image"
	"github.com/captf/captf/internal/release"
	"github.com/captf/captf/internal/version"
)

const usage = `usage:
  captf-release manifests --version VERSION --registry REGISTRY [--out DIR] [--config DIR]
  captf-release images --version VERSION [--platforms LIST] [--out DIR] [--module DIR]
  captf-release push --version VERSION --registry REGISTRY [--in DIR]
  captf-release plugin --version VERSION --url-base URL [--platforms LIST] [--out DIR] [--module DIR]
  captf-release --version`

// programs are the release's images by name.
var programs = map[string]image.Program{
	release.ManagerImageName: image.Manager,
	release.RunnerImageName:  image.Runner,
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "captf-release: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	switch args[0] {
	case "manifests":
		return manifests(args[1:], stdout)
	case "images":
		return images(ctx, args[1:], stdout)
	case "push":
		return push(ctx, args[1:], stdout)
	case "plugin":
		return plugin(ctx, args[1:], stdout)
	case "--version", "-version":
		if len(args) == 1 {
			_, err := io.WriteString(stdout, version.Line("captf-release"))
			return err
		}
	}
	return errors.New(usage)
}

// parse parses args into fs and refuses arguments left over.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v", fs.Args())
	}
	return nil
}

func manifests(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("manifests", flag.ContinueOnError)
	var opts release.Options
	fs.StringVar(&opts.Version, "version", "", "the release's version, e.g. v0.1.0; it tags the images (required)")
	fs.StringVar(&opts.Registry, "registry", "", "where the release's images are, e.g. ghcr.io/captf (required)")
	fs.StringVar(&opts.Config, "config", "config", "the repository's config folder")
	out := fs.String("out", "dist", "the folder the files are written to")
	if err := parse(fs, args); err != nil {
		return err
	}
	files, err := release.Manifests(opts)
	if err != nil {
		return err
	}
	if err := release.Write(*out, files); err != nil {
		return err
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		fmt.Fprintln(stdout, *out+"/"+name)
	}
	return nil
}

// images builds each image of the release as an OCI layout in its own
// folder under --out, named as the image, with the image's SBOM attached
// to its index as a referrer; the SBOM is also written beside the layout,
// as <name>.spdx.json.
func images(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("images", flag.ContinueOnError)
	ver := fs.String("version", "", "the release's version, e.g. v0.1.0; stamped into the binaries (required)")
	platforms := fs.String("platforms", "linux/amd64,linux/arm64", "the platforms of each image's index, comma-separated")
	out := fs.String("out", "dist/images", "the folder the OCI layouts are written to, one per image")
	module := fs.String("module", ".", "the folder of captf's go.mod")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *ver == "" {
		return errors.New("--version is required")
	}
	ps, created, err := build(*platforms)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "captf-release-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	for _, name := range slices.Sorted(maps.Keys(programs)) {
		idx, err := programs[name].Index(ctx, image.Options{
			Module: *module, Version: *ver, Platforms: ps, Created: created, Work: filepath.Join(work, name),
		})
		if err != nil {
			return err
		}
		sbom, err := image.SBOM(name, idx, created)
		if err != nil {
			return err
		}
		referrer, err := image.SBOMReferrer(name, idx, sbom, created)
		if err != nil {
			return err
		}
		dir := filepath.Join(*out, name)
		if err := image.WriteLayout(dir, *ver, idx, referrer); err != nil {
			return err
		}
		sbomFile := dir + ".spdx.json"
		if err := os.WriteFile(sbomFile, sbom, 0o644); err != nil {
			return err
		}
		d, err := idx.Digest()
		if err != nil {
			return err
		}
		rd, err := referrer.Digest()
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s %s\n%s %s\n", dir, d, sbomFile, rd)
	}
	return nil
}

// plugin builds kubectl-captf's krew plugin: an archive per platform and
// the manifest naming them under --url-base.
func plugin(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("plugin", flag.ContinueOnError)
	ver := fs.String("version", "", "the release's version, e.g. v0.1.0; stamped into the binaries (required)")
	base := fs.String("url-base", "", "where the archives are published; each one's URL is this, a slash and its name (required)")
	platforms := fs.String("platforms", "linux/amd64,linux/arm64,darwin/amd64,darwin/arm64,windows/amd64", "the platforms to build for, comma-separated")
	out := fs.String("out", "dist/plugin", "the folder the archives and "+release.PluginManifestFile+" are written to")
	module := fs.String("module", ".", "the folder of captf's go.mod")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *ver == "" || *base == "" {
		return errors.New("--version and --url-base are required")
	}
	ps, created, err := build(*platforms)
	if err != nil {
		return err
	}
	p, err := release.Plugin(ctx, release.PluginOptions{Module: *module, Version: *ver, Platforms: ps, URLBase: *base, Out: *out, Created: created})
	if err != nil {
		return err
	}
	for _, pl := range p.Spec.Platforms {
		fmt.Fprintf(stdout, "%s %s\n", pl.URI, pl.Sha256)
	}
	fmt.Fprintln(stdout, filepath.Join(*out, release.PluginManifestFile))
	return nil
}

// build is what every build of the release takes: the platforms of
// --platforms and the time its files carry (sourceDate).
func build(platforms string) ([]v1.Platform, time.Time, error) {
	ps, err := image.ParsePlatforms(platforms)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("--platforms: %w", err)
	}
	created, err := sourceDate()
	return ps, created, err
}

// sourceDate is the time every file and image of the build carries:
// SOURCE_DATE_EPOCH (seconds since 1970, as reproducible-builds.org
// defines it), else the epoch itself.
func sourceDate() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q is not a count of seconds", s)
	}
	return time.Unix(n, 0).UTC(), nil
}

// push pushes each image's layout under --in to <registry>/<name>:<version>,
// and the artifacts that refer to its index (its SBOM) to the same
// repository by digest, refusing an image that was built for another
// version.
func push(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	var opts release.Options
	fs.StringVar(&opts.Version, "version", "", "the release's version; it tags the images and must be the one they were built with (required)")
	fs.StringVar(&opts.Registry, "registry", "", "where the images go, e.g. ghcr.io/captf (required)")
	in := fs.String("in", "dist/images", "the folder captf-release images wrote")
	if err := parse(fs, args); err != nil {
		return err
	}
	if opts.Version == "" || opts.Registry == "" {
		return errors.New("--version and --registry are required")
	}
	for _, name := range slices.Sorted(maps.Keys(programs)) {
		idx, referrers, err := image.ReadLayout(filepath.Join(*in, name))
		if err != nil {
			return err
		}
		if err := builtFor(idx, opts.Version); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		ref := opts.Image(name)
		d, err := image.Push(ctx, ref, idx)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s@%s\n", ref, d)
		for _, r := range referrers {
			rd, err := image.PushReferrer(ctx, ref, r)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%s/%s@%s\n", opts.Registry, name, rd)
		}
	}
	return nil
}

// builtFor checks that every image of idx is labelled with version.
func builtFor(idx v1.ImageIndex, version string) error {
	m, err := idx.IndexManifest()
	if err != nil {
		return fmt.Errorf("read the index: %w", err)
	}
	for _, desc := range m.Manifests {
		img, err := idx.Image(desc.Digest)
		if err != nil {
			return fmt.Errorf("read image %s: %w", desc.Digest, err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return fmt.Errorf("read the config of %s: %w", desc.Digest, err)
		}
		if got := cf.Config.Labels[image.VersionLabel]; got != version {
			return fmt.Errorf("built for version %q, not %q: run captf-release images --version %s first", got, version, version)
		}
	}
	return nil
}
