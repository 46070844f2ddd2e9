// Package image builds container images without a container engine, with
// go-containerregistry: reproducible layers from a list of files, images
// on scratch with a non-root user and CA certificates, captf's manager and
// runner images from their Go packages, multi-platform indexes, an SBOM
// (SPDX JSON) of what an index holds, attached to it as an OCI referrer,
// OCI layouts on disk, and pushes to a registry; and it unpacks an image's
// filesystem into a folder, as a container runtime would.
//
// The same inputs give the same digests: every entry has a fixed time,
// owner and order, and image configs carry a fixed creation time.
package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// File is one entry of a layer: a regular file whose bytes are Data or,
// when Source is set, the file at Source on this machine; or a folder
// when Dir is set.
type File struct {
	// Path is where the entry is in the image, absolute ("/etc/passwd").
	Path string
	// Mode holds the permission bits (and sticky bit) of the entry.
	Mode int64
	// UID and GID own the entry; 0 (root) unless set.
	UID, GID int
	Data     []byte
	Source   string
	Dir      bool
}

// Layer returns a layer of files in the OCI media type, every entry
// modified at mtime. Folders the files sit in that files does not list are
// added, owned by root, mode 0755. Entries are sorted by path, so the
// order of files does not change the digest.
func Layer(files []File, mtime time.Time) (v1.Layer, error) {
	entries, err := entries(files)
	if err != nil {
		return nil, err
	}
	opener := func() (io.ReadCloser, error) {
		var buf bytes.Buffer
		if err := writeTar(&buf, entries, mtime); err != nil {
			return nil, err
		}
		return io.NopCloser(&buf), nil
	}
	// Open once now, so a missing Source fails here and not at a push.
	if _, err := opener(); err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(opener, tarball.WithMediaType(types.OCILayer))
}

// entries checks files and returns them with their implied folders,
// sorted by path.
func entries(files []File) ([]File, error) {
	byPath := map[string]File{}
	for _, f := range files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path || f.Path == "/" {
			return nil, fmt.Errorf("layer: %q is not a clean absolute path", f.Path)
		}
		if _, dup := byPath[f.Path]; dup {
			return nil, fmt.Errorf("layer: %s is listed twice", f.Path)
		}
		if f.Dir && (f.Data != nil || f.Source != "") {
			return nil, fmt.Errorf("layer: folder %s has contents", f.Path)
		}
		byPath[f.Path] = f
	}
	for _, f := range files {
		for dir := path.Dir(f.Path); dir != "/"; dir = path.Dir(dir) {
			if d, ok := byPath[dir]; ok {
				if !d.Dir {
					return nil, fmt.Errorf("layer: %s is a file and holds %s", dir, f.Path)
				}
				continue
			}
			byPath[dir] = File{Path: dir, Mode: 0o755, Dir: true}
		}
	}
	out := make([]File, 0, len(byPath))
	for _, f := range byPath {
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b File) int {
		switch {
		case a.Path < b.Path:
			return -1
		case a.Path > b.Path:
			return 1
		}
		return 0
	})
	return out, nil
}

// writeTar writes entries, already sorted, as a tar stream.
func writeTar(w io.Writer, entries []File, mtime time.Time) error {
	tw := tar.NewWriter(w)
	for _, f := range entries {
		hdr := &tar.Header{
			Name:    f.Path[1:],
			Mode:    f.Mode,
			Uid:     f.UID,
			Gid:     f.GID,
			ModTime: mtime,
		}
		if f.Dir {
			hdr.Typeflag = tar.TypeDir
			hdr.Name += "/"
			if err := tw.WriteHeader(hdr); err != nil {
				return fmt.Errorf("layer: %w", err)
			}
			continue
		}
		data := f.Data
		if f.Source != "" {
			b, err := os.ReadFile(f.Source)
			if err != nil {
				return fmt.Errorf("layer: %s: %w", f.Path, err)
			}
			data = b
		}
		hdr.Typeflag = tar.TypeReg
		hdr.Size = int64(len(data))
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("layer: %w", err)
		}
		if _, err := tw.Write(data); err != nil {
			return fmt.Errorf("layer: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("layer: %w", err)
	}
	return nil
}

// Tree returns the regular files and folders under dir on this machine as
// Files under at in the image, with their permission bits. Symbolic links
// and other entries are refused: a layer holds copies.
func Tree(dir, at string) ([]File, error) {
	var files []File
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		target := path.Join(at, filepath.ToSlash(rel))
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			files = append(files, File{Path: target, Mode: int64(info.Mode().Perm()), Dir: true})
		case info.Mode().IsRegular():
			files = append(files, File{Path: target, Mode: int64(info.Mode().Perm()), Source: p})
		default:
			return fmt.Errorf("%s is neither a file nor a folder", p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("tree %s: %w", dir, err)
	}
	return files, nil
}
