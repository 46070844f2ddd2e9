package image

import (
	"context"
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// WriteLayout writes idx as the OCI image layout at dir, replacing any
// layout there: index.json is idx itself, so the layout's index has idx's
// digest.
func WriteLayout(dir string, idx v1.ImageIndex) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("layout: %w", err)
	}
	if _, err := layout.Write(dir, idx); err != nil {
		return fmt.Errorf("layout %s: %w", dir, err)
	}
	return nil
}

// ReadLayout returns the index of the OCI image layout at dir.
func ReadLayout(dir string) (v1.ImageIndex, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("layout %s: %w", dir, err)
	}
	return idx, nil
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
