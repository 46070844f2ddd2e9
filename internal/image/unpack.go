package image

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// Unpack writes the filesystem of img (its layers flattened, as a
// container runtime would see it) into dir: folders, regular files with
// their permission bits, and symbolic links. Ownership is not kept: the
// files belong to the caller. An entry that would land outside dir is
// refused.
func Unpack(img v1.Image, dir string) error {
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("unpack: %w", err)
		}
		name := filepath.Clean(filepath.FromSlash(h.Name))
		if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, ".."+string(filepath.Separator)) {
			return fmt.Errorf("unpack: %q is outside the image", h.Name)
		}
		p := filepath.Join(dir, name)
		mode := os.FileMode(h.Mode).Perm() | os.FileMode(h.Mode)&os.ModeSticky
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return fmt.Errorf("unpack: %w", err)
			}
			// Writable by its owner, the caller, so what follows fits in.
			if err := os.Chmod(p, mode|0o700); err != nil {
				return fmt.Errorf("unpack: %w", err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return fmt.Errorf("unpack: %w", err)
			}
			if err := writeEntry(p, tr, mode); err != nil {
				return fmt.Errorf("unpack: %w", err)
			}
		case tar.TypeSymlink:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return fmt.Errorf("unpack: %w", err)
			}
			if err := os.Symlink(h.Linkname, p); err != nil {
				return fmt.Errorf("unpack: %w", err)
			}
		default:
			return fmt.Errorf("unpack: %s: entry type %q not supported", h.Name, h.Typeflag)
		}
	}
}

func writeEntry(p string, r io.Reader, mode os.FileMode) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
