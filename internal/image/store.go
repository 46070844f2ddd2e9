package image

import (
	"context"
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// RefNameAnnotation names a manifest of an OCI image layout's index.json,
// as a tag names it in a registry.
const RefNameAnnotation = "org.opencontainers.image.ref.name"

// WriteLayout writes idx, named tag, and the artifacts that refer to it
// (Referrer, such as its SBOM) as the OCI image layout at dir, replacing
// any layout there: index.json lists idx's descriptor, annotated with tag,
// and each referrer's, with its artifact type.
func WriteLayout(dir, tag string, idx v1.ImageIndex, referrers ...v1.Image) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("layout: %w", err)
	}
	adds := []mutate.IndexAddendum{{Add: idx, Descriptor: v1.Descriptor{Annotations: map[string]string{RefNameAnnotation: tag}}}}
	for _, r := range referrers {
		at, err := partial.ArtifactType(r)
		if err != nil {
			return fmt.Errorf("layout %s: %w", dir, err)
		}
		adds = append(adds, mutate.IndexAddendum{Add: r, Descriptor: v1.Descriptor{ArtifactType: at}})
	}
	top := mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...)
	if _, err := layout.Write(dir, top); err != nil {
		return fmt.Errorf("layout %s: %w", dir, err)
	}
	return nil
}

// ReadLayout returns the image index of the OCI image layout at dir, the
// one index.json lists, and the artifacts it lists whose subject is that
// index.
func ReadLayout(dir string) (v1.ImageIndex, []v1.Image, error) {
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("layout %s: %w", dir, err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		return nil, nil, fmt.Errorf("layout %s: %w", dir, err)
	}
	var idx v1.ImageIndex
	var manifests []v1.Descriptor
	for _, desc := range m.Manifests {
		switch {
		case desc.MediaType.IsIndex() && idx == nil:
			if idx, err = top.ImageIndex(desc.Digest); err != nil {
				return nil, nil, fmt.Errorf("layout %s: %w", dir, err)
			}
		case desc.MediaType.IsIndex():
			return nil, nil, fmt.Errorf("layout %s: more than one image index", dir)
		case desc.MediaType.IsImage():
			manifests = append(manifests, desc)
		}
	}
	if idx == nil {
		return nil, nil, fmt.Errorf("layout %s: no image index", dir)
	}
	d, err := idx.Digest()
	if err != nil {
		return nil, nil, fmt.Errorf("layout %s: %w", dir, err)
	}
	var referrers []v1.Image
	for _, desc := range manifests {
		img, err := top.Image(desc.Digest)
		if err != nil {
			return nil, nil, fmt.Errorf("layout %s: %w", dir, err)
		}
		im, err := img.Manifest()
		if err != nil {
			return nil, nil, fmt.Errorf("layout %s: %w", dir, err)
		}
		if im.Subject != nil && im.Subject.Digest == d {
			referrers = append(referrers, img)
		}
	}
	return idx, referrers, nil
}

// Push writes idx and every image it holds to ref in a registry, straight
// over the registry API (no container engine), with the credentials the
// default keychain finds (the docker config, as docker login and crane
// auth login write it). It returns the pushed index's digest.
func Push(ctx context.Context, ref string, idx v1.ImageIndex, opts ...remote.Option) (v1.Hash, error) {
	r, err := name.ParseReference(ref, name.StrictValidation)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("push %s: %w", ref, err)
	}
	opts = append([]remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}, opts...)
	if err := remote.WriteIndex(r, idx, opts...); err != nil {
		return v1.Hash{}, fmt.Errorf("push %s: %w", ref, err)
	}
	d, err := idx.Digest()
	if err != nil {
		return v1.Hash{}, fmt.Errorf("push %s: %w", ref, err)
	}
	return d, nil
}

// PushReferrer writes the artifact r, which refers to an index or image
// of ref's repository (Referrer), to that repository by its digest, over
// the registry API as Push does. A registry with the referrers API lists
// it there; for one without, the referrers tag of its subject
// (sha256-<hex>) is updated to list it. It returns r's digest.
func PushReferrer(ctx context.Context, ref string, r v1.Image, opts ...remote.Option) (v1.Hash, error) {
	parsed, err := name.ParseReference(ref, name.StrictValidation)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("push %s: %w", ref, err)
	}
	d, err := r.Digest()
	if err != nil {
		return v1.Hash{}, fmt.Errorf("push %s: %w", ref, err)
	}
	opts = append([]remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}, opts...)
	if err := remote.Write(parsed.Context().Digest(d.String()), r, opts...); err != nil {
		return v1.Hash{}, fmt.Errorf("push %s@%s: %w", parsed.Context(), d, err)
	}
	return d, nil
}
