package release

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"sigs.k8s.io/yaml"

	"github.com/captf/captf/internal/image"
)

// The krew plugin of kubectl-captf: an archive per platform holding the
// binary and the LICENSE, and a manifest that names each archive's URL
// and sha256, as krew's plugin index takes it (apiVersion
// krew.googlecontainertools.github.com/v1alpha2, kind Plugin).
const (
	PluginManifestFile = "captf.yaml"
	pluginName         = "captf"
	pluginProgram      = "kubectl-captf"
	krewAPIVersion     = "krew.googlecontainertools.github.com/v1alpha2"
)

// PluginOptions says which plugin to build.
type PluginOptions struct {
	// Module is the repository's root, where go builds kubectl-captf.
	Module string
	// Version is the release's version (v0.1.0).
	Version string
	// Platforms are the platforms to build for.
	Platforms []v1.Platform
	// URLBase is where the archives are published: each one's URL is
	// URLBase/<archive>.
	URLBase string
	// Out is the folder the archives and the manifest go to.
	Out string
	// Created is the time stamped on the archives' entries (the source
	// date), so that a build is reproducible.
	Created time.Time
}

// KrewPlugin is krew's plugin manifest, the fields captf writes.
type KrewPlugin struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   KrewMetadata   `json:"metadata"`
	Spec       KrewPluginSpec `json:"spec"`
}

// KrewMetadata names the plugin.
type KrewMetadata struct {
	Name string `json:"name"`
}

// KrewPluginSpec is the plugin's version, its words and its platforms.
type KrewPluginSpec struct {
	Version          string         `json:"version"`
	Homepage         string         `json:"homepage"`
	ShortDescription string         `json:"shortDescription"`
	Description      string         `json:"description"`
	Platforms        []KrewPlatform `json:"platforms"`
}

// KrewPlatform is one platform's archive.
type KrewPlatform struct {
	Selector KrewSelector `json:"selector"`
	URI      string       `json:"uri"`
	Sha256   string       `json:"sha256"`
	Bin      string       `json:"bin"`
	Files    []KrewFile   `json:"files"`
}

// KrewSelector selects a platform by os and arch.
type KrewSelector struct {
	MatchLabels map[string]string `json:"matchLabels"`
}

// KrewFile is a file krew copies out of the archive.
type KrewFile struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// Plugin builds the plugin's archives and manifest into opts.Out and
// returns the manifest.
func Plugin(ctx context.Context, opts PluginOptions) (*KrewPlugin, error) {
	if !strings.HasPrefix(opts.Version, "v") || len(opts.Platforms) == 0 || opts.URLBase == "" {
		return nil, fmt.Errorf("plugin: a version with a leading v, at least one platform and the archives' URL base are needed")
	}
	license, err := os.ReadFile(filepath.Join(opts.Module, "LICENSE"))
	if err != nil {
		return nil, fmt.Errorf("plugin: %w", err)
	}
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return nil, err
	}
	p := &KrewPlugin{
		APIVersion: krewAPIVersion, Kind: "Plugin", Metadata: KrewMetadata{Name: pluginName},
		Spec: KrewPluginSpec{
			Version:          opts.Version,
			Homepage:         "https://github.com/captf/captf",
			ShortDescription: "List, show, print and approve captf's TerraformPlans",
			Description: "kubectl captf lists the TerraformPlans that wait for approval, shows the summary a plan's hash binds,\n" +
				"prints the log of the Job that made it, and approves exactly that plan, in your own name.\n",
		},
	}
	for _, platform := range opts.Platforms {
		bin := pluginProgram
		if platform.OS == "windows" {
			bin += ".exe"
		}
		dir, err := os.MkdirTemp("", "captf-plugin-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		if err := image.Compile(ctx, opts.Module, "./cmd/"+pluginProgram, platform, opts.Version, filepath.Join(dir, bin)); err != nil {
			return nil, err
		}
		name := fmt.Sprintf("%s_%s_%s_%s.tar.gz", pluginProgram, opts.Version, platform.OS, platform.Architecture)
		sum, err := writeArchive(filepath.Join(opts.Out, name), opts.Created, filepath.Join(dir, bin), license)
		if err != nil {
			return nil, err
		}
		p.Spec.Platforms = append(p.Spec.Platforms, KrewPlatform{
			Selector: KrewSelector{MatchLabels: map[string]string{"os": platform.OS, "arch": platform.Architecture}},
			URI:      strings.TrimSuffix(opts.URLBase, "/") + "/" + name,
			Sha256:   sum,
			Bin:      bin,
			Files:    []KrewFile{{From: bin, To: "."}, {From: "LICENSE", To: "."}},
		})
	}
	b, err := yaml.Marshal(p)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(opts.Out, PluginManifestFile), b, 0o644); err != nil {
		return nil, err
	}
	return p, nil
}

// writeArchive writes a tar.gz of the binary at bin and the LICENSE, both
// at its top, stamped created, and returns its sha256 in hex.
func writeArchive(path string, created time.Time, bin string, license []byte) (string, error) {
	exe, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sum := sha256.New()
	gz := gzip.NewWriter(io.MultiWriter(f, sum))
	tw := tar.NewWriter(gz)
	for _, e := range []struct {
		name string
		mode int64
		data []byte
	}{{filepath.Base(bin), 0o755, exe}, {"LICENSE", 0o644, license}} {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: e.mode, Size: int64(len(e.data)), ModTime: created, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return "", err
		}
		if _, err := tw.Write(e.data); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	if err := gz.Close(); err != nil {
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return hex.EncodeToString(sum.Sum(nil)), nil
}
