// Command captf-release builds the files of a captf release that clusterctl
// reads from a provider's release (see internal/release):
//
//	captf-release manifests --version v0.1.0 --registry ghcr.io/captf --out dist
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"

	"github.com/captf/captf/internal/release"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "captf-release: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 || args[0] != "manifests" {
		return errors.New("usage: captf-release manifests --version VERSION --registry REGISTRY [--out DIR] [--config DIR]")
	}
	fs := flag.NewFlagSet("manifests", flag.ContinueOnError)
	var opts release.Options
	fs.StringVar(&opts.Version, "version", "", "the release's version, e.g. v0.1.0; it tags the images (required)")
	fs.StringVar(&opts.Registry, "registry", "", "where the release's images are, e.g. ghcr.io/captf (required)")
	fs.StringVar(&opts.Config, "config", "config", "the repository's config folder")
	out := fs.String("out", "dist", "the folder the files are written to")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %v", fs.Args())
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
		fmt.Println(*out + "/" + name)
	}
	return nil
}
