package image

import (
	"bytes"
	"encoding/pem"
	"fmt"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// NonRoot is the user and group captf's images run as, the one runner
// Jobs run as unless told otherwise.
const NonRoot = 65532

// User is the image config's User: NonRoot's user and group.
var User = fmt.Sprintf("%d:%d", NonRoot, NonRoot)

// CACertificatesPath is where the base layer puts the CA certificates, the
// first file Go's crypto/x509 looks for on Linux.
const CACertificatesPath = "/etc/ssl/certs/ca-certificates.crt"

// Base returns the files every image of captf starts from on scratch:
// /etc/passwd and /etc/group naming root and nonroot (NonRoot), nonroot's
// home, a /tmp anyone may write, and the CA certificates.
func Base() []File {
	return []File{
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/sbin/nologin\n" +
			fmt.Sprintf("nonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonRoot, NonRoot))},
		{Path: "/etc/group", Mode: 0o644, Data: []byte(fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", NonRoot))},
		{Path: "/home/nonroot", Mode: 0o700, UID: NonRoot, GID: NonRoot, Dir: true},
		{Path: "/tmp", Mode: 0o1777, Dir: true},
		{Path: CACertificatesPath, Mode: 0o644, Data: CACertificates()},
	}
}

// CACertificates returns the PEM bundle of the roots Mozilla's NSS trusts,
// as golang.org/x/crypto/x509roots/fallback ships them: the same bytes on
// every build machine, at the version go.mod pins. A root NSS distrusts
// after a date is left out, since a PEM file cannot say so.
func CACertificates() []byte {
	var buf bytes.Buffer
	for root := range bundle.Roots() {
		if root.Constraint != nil {
			continue
		}
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: root.Certificate})
	}
	return buf.Bytes()
}

// Spec is one image for one platform: its layers on scratch and what it
// runs.
type Spec struct {
	Platform v1.Platform
	// Created is the creation time recorded in the config and history;
	// a fixed time keeps the digest reproducible.
	Created time.Time
	// Layers are applied in order; CreatedBy describes each in the history.
	Layers     []v1.Layer
	CreatedBy  []string
	Entrypoint []string
	User       string
	Env        []string
	WorkingDir string
	Labels     map[string]string
}

// Build returns the image of spec in the OCI media types.
func Build(spec Spec) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	created := v1.Time{Time: spec.Created.UTC()}
	adds := make([]mutate.Addendum, len(spec.Layers))
	for i, l := range spec.Layers {
		by := ""
		if i < len(spec.CreatedBy) {
			by = spec.CreatedBy[i]
		}
		adds[i] = mutate.Addendum{Layer: l, MediaType: types.OCILayer, History: v1.History{Created: created, CreatedBy: by}}
	}
	img, err := mutate.Append(img, adds...)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Created = created
	cf.OS, cf.Architecture, cf.Variant, cf.OSVersion = spec.Platform.OS, spec.Platform.Architecture, spec.Platform.Variant, spec.Platform.OSVersion
	cf.Config = v1.Config{
		Entrypoint: spec.Entrypoint,
		User:       spec.User,
		Env:        spec.Env,
		WorkingDir: spec.WorkingDir,
		Labels:     spec.Labels,
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	return img, nil
}

// Index returns the OCI index of images, each described by the platform
// its config names, in the order given.
func Index(images ...v1.Image) (v1.ImageIndex, error) {
	adds := make([]mutate.IndexAddendum, len(images))
	for i, img := range images {
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, fmt.Errorf("index: %w", err)
		}
		p := cf.Platform()
		adds[i] = mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: p}}
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	return mutate.AppendManifests(idx, adds...), nil
}

// ParsePlatforms parses a comma-separated list of os/arch[/variant], such
// as "linux/amd64,linux/arm64".
func ParsePlatforms(s string) ([]v1.Platform, error) {
	var out []v1.Platform
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		p, err := v1.ParsePlatform(part)
		if err != nil {
			return nil, fmt.Errorf("platform %q: %w", part, err)
		}
		if p.OS == "" || p.Architecture == "" || strings.Count(part, "/") < 1 {
			return nil, fmt.Errorf("platform %q: want os/arch", part)
		}
		out = append(out, *p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no platform in %q", s)
	}
	return out, nil
}
