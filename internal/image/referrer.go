package image

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// EmptyMediaType is the media type of the empty JSON object ("{}"), the
// config of an artifact that needs none.
const EmptyMediaType types.MediaType = "application/vnd.oci.empty.v1+json"

// Annotations of a referrer: its creation time, by which clients order
// referrers, and the file name its layer is pulled to.
const (
	CreatedAnnotation = "org.opencontainers.image.created"
	TitleAnnotation   = "org.opencontainers.image.title"
)

// Referrer returns the artifact that attaches data to subject: an OCI
// image manifest whose artifactType is artifactType, whose config is the
// empty object, whose one layer is data (of that media type, titled
// title) and whose subject is subject's descriptor, so a registry lists
// it among subject's referrers. created, the time it carries, keeps its
// digest reproducible.
func Referrer(subject partial.Describable, artifactType, title string, data []byte, created time.Time) (v1.Image, error) {
	sub, err := partial.Descriptor(subject)
	if err != nil {
		return nil, fmt.Errorf("referrer: %w", err)
	}
	layer := static.NewLayer(data, types.MediaType(artifactType))
	layerDigest, err := layer.Digest()
	if err != nil {
		return nil, fmt.Errorf("referrer: %w", err)
	}
	config := []byte("{}")
	configDigest, configSize, err := v1.SHA256(bytes.NewReader(config))
	if err != nil {
		return nil, fmt.Errorf("referrer: %w", err)
	}
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  artifactType,
		Config:        v1.Descriptor{MediaType: EmptyMediaType, Digest: configDigest, Size: configSize},
		Layers: []v1.Descriptor{{
			MediaType:   types.MediaType(artifactType),
			Digest:      layerDigest,
			Size:        int64(len(data)),
			Annotations: map[string]string{TitleAnnotation: title},
		}},
		Subject:     &v1.Descriptor{MediaType: sub.MediaType, Digest: sub.Digest, Size: sub.Size},
		Annotations: map[string]string{CreatedAnnotation: created.UTC().Format(time.RFC3339)},
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("referrer: %w", err)
	}
	return partial.CompressedToImage(artifact{manifest: raw, config: config, layer: layer})
}

// artifact is a manifest with its config and one layer, as
// partial.CompressedToImage wants it.
type artifact struct {
	manifest, config []byte
	layer            v1.Layer
}

func (a artifact) RawConfigFile() ([]byte, error)      { return a.config, nil }
func (a artifact) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (a artifact) RawManifest() ([]byte, error)        { return a.manifest, nil }
func (a artifact) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if d, err := a.layer.Digest(); err == nil && d == h {
		return a.layer, nil
	}
	return nil, fmt.Errorf("artifact: no layer %s", h)
}

var _ partial.CompressedImageCore = artifact{}

// SBOMReferrer returns the referrer of idx carrying sbom, its SBOM (SBOM):
// artifact type SBOMMediaType, titled <name>.spdx.json.
func SBOMReferrer(name string, idx v1.ImageIndex, sbom []byte, created time.Time) (v1.Image, error) {
	return Referrer(idx, SBOMMediaType, name+".spdx.json", sbom, created)
}
