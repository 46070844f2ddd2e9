package image

import (
	"archive/tar"
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdx/v2/common"
	spdx "github.com/spdx/tools-golang/spdx/v2/v2_3"

	"github.com/captf/captf/internal/version"
)

// SBOMMediaType is the media type of an SPDX document in JSON: the
// artifact type of an SBOM referrer and the media type of its one layer.
const SBOMMediaType = "application/spdx+json"

// caModule is the module whose bundle Base writes to CACertificatesPath.
const caModule = "golang.org/x/crypto/x509roots/fallback"

// SBOM returns the SPDX 2.3 document, in JSON, of what the images of idx
// hold, read from the images themselves: each platform's image, its
// regular files with their SHA-1 and SHA-256, each Go binary among them
// with the modules and the Go standard library its build info names, and
// the module the CA certificates come from. name is the image's name
// (captf-manager); created is the document's creation time, so the same
// index gives the same bytes.
func SBOM(name string, idx v1.ImageIndex, created time.Time) ([]byte, error) {
	d, err := newSBOM(name, idx, created)
	if err != nil {
		return nil, fmt.Errorf("sbom of %s: %w", name, err)
	}
	var buf bytes.Buffer
	if err := spdxjson.Write(&d.doc, &buf, spdxjson.Indent("  ")); err != nil {
		return nil, fmt.Errorf("sbom of %s: %w", name, err)
	}
	return buf.Bytes(), nil
}

// sbom builds one document; ids keeps element IDs unique.
type sbom struct {
	doc      spdx.Document
	ids      map[common.ElementID]bool
	packages map[string]common.ElementID // Go packages by name@version, shared by every binary
}

func newSBOM(name string, idx v1.ImageIndex, created time.Time) (*sbom, error) {
	digest, err := idx.Digest()
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	s := &sbom{ids: map[common.ElementID]bool{}, packages: map[string]common.ElementID{}}
	s.doc = spdx.Document{
		SPDXVersion:       spdx.Version,
		DataLicense:       spdx.DataLicense,
		SPDXIdentifier:    "DOCUMENT",
		DocumentName:      name + "@" + digest.String(),
		DocumentNamespace: "https://github.com/captf/captf/spdx/" + name + "/" + digest.String(),
		CreationInfo: &spdx.CreationInfo{
			Creators: []common.Creator{{CreatorType: "Organization", Creator: "captf"}, {CreatorType: "Tool", Creator: "captf-release-" + version.Get()}},
			Created:  created.UTC().Format(time.RFC3339),
		},
	}
	labelled := ""
	indexID := s.id("Index-" + name)
	index := &spdx.Package{
		PackageName:             name,
		PackageSPDXIdentifier:   indexID,
		PackageDownloadLocation: "NOASSERTION",
		PackageChecksums:        []common.Checksum{{Algorithm: common.SHA256, Value: digest.Hex}},
		PackageExternalReferences: []*spdx.PackageExternalReference{
			{Category: common.CategoryPackageManager, RefType: common.TypePackageManagerPURL, Locator: "pkg:oci/" + name + "@" + purlEscape(digest.String())},
		},
		PrimaryPackagePurpose: "CONTAINER",
		PackageComment:        "The image index: one image per platform.",
	}
	s.doc.Packages = append(s.doc.Packages, index)
	s.relate("DOCUMENT", indexID, common.TypeRelationshipDescribe)
	for _, desc := range m.Manifests {
		img, err := idx.Image(desc.Digest)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", desc.Digest, err)
		}
		v, err := s.image(name, img, indexID)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", desc.Digest, err)
		}
		if labelled == "" {
			labelled = v
		}
	}
	index.PackageVersion = labelled
	return s, nil
}

// image adds the package of img, its files and what they come from, and
// returns the version its config is labelled with.
func (s *sbom) image(name string, img v1.Image, parent common.ElementID) (string, error) {
	digest, err := img.Digest()
	if err != nil {
		return "", err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return "", err
	}
	platform := cf.Platform()
	if platform == nil {
		return "", errors.New("its config names no platform")
	}
	pl := platform.String()
	labelled := cf.Config.Labels[VersionLabel]
	files, err := regularFiles(img)
	if err != nil {
		return "", err
	}
	imageID := s.id("Image-" + name + "-" + pl)
	purl := "pkg:oci/" + name + "@" + purlEscape(digest.String()) + "?arch=" + platform.Architecture
	pkg := &spdx.Package{
		PackageName:             name + " " + pl,
		PackageSPDXIdentifier:   imageID,
		PackageVersion:          labelled,
		PackageDownloadLocation: "NOASSERTION",
		FilesAnalyzed:           true,
		PackageVerificationCode: &common.PackageVerificationCode{Value: verificationCode(files)},
		PackageChecksums:        []common.Checksum{{Algorithm: common.SHA256, Value: digest.Hex}},
		PackageExternalReferences: []*spdx.PackageExternalReference{
			{Category: common.CategoryPackageManager, RefType: common.TypePackageManagerPURL, Locator: purl},
		},
		PrimaryPackagePurpose: "CONTAINER",
		PackageComment:        "The image for " + pl + "; its checksum is its manifest's digest.",
	}
	s.doc.Packages = append(s.doc.Packages, pkg)
	s.relate(parent, imageID, common.TypeRelationshipContains)
	for _, f := range files {
		fileID := s.id("File-" + pl + f.path)
		file := &spdx.File{
			FileName:           "." + f.path,
			FileSPDXIdentifier: fileID,
			Checksums: []common.Checksum{
				{Algorithm: common.SHA1, Value: f.sha1},
				{Algorithm: common.SHA256, Value: f.sha256},
			},
			LicenseConcluded:  "NOASSERTION",
			FileCopyrightText: "NOASSERTION",
		}
		s.doc.Files = append(s.doc.Files, file)
		s.relate(imageID, fileID, common.TypeRelationshipContains)
		switch {
		case f.build != nil:
			file.FileTypes = []string{"BINARY", "APPLICATION"}
			s.goBinary(f, labelled, imageID)
		case f.path == CACertificatesPath && f.sha256 == caBundleSHA256():
			file.FileTypes = []string{"TEXT"}
			if err := s.caBundle(imageID, fileID); err != nil {
				return "", err
			}
		default:
			file.FileTypes = []string{"TEXT"}
		}
	}
	return labelled, nil
}

// goBinary adds the application package of the Go binary f and relates
// it to a package for each module it was built with and for the standard
// library. The application's version is the one the image is labelled
// with, the one stamped into it; the main module's version as the go
// command recorded it, and the commit, go to the package's source info.
func (s *sbom) goBinary(f imageFile, labelled string, imageID common.ElementID) {
	bi := f.build
	appID := s.id("App-" + bi.Path + "-" + f.path)
	source := fmt.Sprintf("built from %s %s with %s", bi.Main.Path, bi.Main.Version, bi.GoVersion)
	for _, setting := range bi.Settings {
		if setting.Key == "vcs.revision" || setting.Key == "vcs.modified" {
			source += ", " + setting.Key + "=" + setting.Value
		}
	}
	app := &spdx.Package{
		PackageName:             bi.Path,
		PackageSPDXIdentifier:   appID,
		PackageVersion:          labelled,
		PackageFileName:         "." + f.path,
		PackageDownloadLocation: "NOASSERTION",
		PackageChecksums: []common.Checksum{
			{Algorithm: common.SHA1, Value: f.sha1},
			{Algorithm: common.SHA256, Value: f.sha256},
		},
		PackageSourceInfo:     source,
		PrimaryPackagePurpose: "APPLICATION",
	}
	if labelled != "" && bi.Main.Path != "" {
		app.PackageExternalReferences = []*spdx.PackageExternalReference{
			{Category: common.CategoryPackageManager, RefType: common.TypePackageManagerPURL, Locator: goPURL(bi.Main.Path, labelled)},
		}
	}
	s.doc.Packages = append(s.doc.Packages, app)
	s.relate(imageID, appID, common.TypeRelationshipContains)
	// Go links statically: what the binary depends on is inside it.
	std := s.goModule("stdlib", strings.TrimPrefix(bi.GoVersion, "go"), "The Go standard library and runtime.")
	s.relate(appID, std, common.TypeRelationshipDependsOn)
	for _, dep := range bi.Deps {
		mod, comment := dep, ""
		if dep.Replace != nil {
			mod, comment = dep.Replace, "Replaces "+dep.Path+" "+dep.Version+"."
		}
		s.relate(appID, s.goModule(mod.Path, mod.Version, comment), common.TypeRelationshipDependsOn)
	}
}

// caBundle adds the module whose roots Base writes to CACertificatesPath,
// at the version this program links, the one that wrote the file.
func (s *sbom) caBundle(imageID, fileID common.ElementID) error {
	mod, err := linked(caModule)
	if err != nil {
		return err
	}
	id := s.goModule(mod.Path, mod.Version, "Mozilla's NSS roots, written as "+CACertificatesPath+".")
	s.relate(imageID, id, common.TypeRelationshipContains)
	s.relate(id, fileID, common.TypeRelationshipGenerates)
	return nil
}

// linked returns the module modPath at the version this program was built
// with, as its build info records it; a test binary records no module,
// so there it is the version the go command resolves in the module the
// test was built in, which is the one the test binary links.
func linked(modPath string) (*debug.Module, error) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return nil, errors.New("this program carries no build info, to name the version of " + modPath)
	}
	if len(bi.Deps) == 0 && strings.HasSuffix(bi.Path, ".test") {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Path}} {{.Version}}", modPath).Output()
		if err != nil {
			return nil, fmt.Errorf("go list -m %s: %w", modPath, err)
		}
		f := strings.Fields(string(out))
		if len(f) != 2 {
			return nil, fmt.Errorf("go list -m %s: %q", modPath, out)
		}
		return &debug.Module{Path: f[0], Version: f[1]}, nil
	}
	for _, dep := range bi.Deps {
		if dep.Path != modPath {
			continue
		}
		if dep.Replace != nil {
			return dep.Replace, nil
		}
		return dep, nil
	}
	return nil, errors.New("this program does not link " + modPath)
}

// goModule returns the ID of the library package of a Go module at a
// version, added once.
func (s *sbom) goModule(modPath, ver, comment string) common.ElementID {
	key := modPath + "@" + ver
	if id, ok := s.packages[key]; ok {
		return id
	}
	id := s.id("Go-" + key)
	s.packages[key] = id
	s.doc.Packages = append(s.doc.Packages, &spdx.Package{
		PackageName:             modPath,
		PackageSPDXIdentifier:   id,
		PackageVersion:          ver,
		PackageDownloadLocation: "NOASSERTION",
		PackageExternalReferences: []*spdx.PackageExternalReference{
			{Category: common.CategoryPackageManager, RefType: common.TypePackageManagerPURL, Locator: goPURL(modPath, ver)},
		},
		PrimaryPackagePurpose: "LIBRARY",
		PackageComment:        comment,
	})
	return id
}

// id returns a new element ID made of s's letters, digits, dots and
// dashes, the only characters an ID may hold; a second ID that would read
// the same gets a number.
func (s *sbom) id(from string) common.ElementID {
	base := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '-'
	}, from)
	id := common.ElementID(base)
	for n := 2; s.ids[id]; n++ {
		id = common.ElementID(fmt.Sprintf("%s-%d", base, n))
	}
	s.ids[id] = true
	return id
}

func (s *sbom) relate(a, b common.ElementID, kind string) {
	s.doc.Relationships = append(s.doc.Relationships, &spdx.Relationship{
		RefA:         common.DocElementID{ElementRefID: a},
		RefB:         common.DocElementID{ElementRefID: b},
		Relationship: kind,
	})
}

// imageFile is a regular file of an image's filesystem, and its build
// info when it is a Go binary.
type imageFile struct {
	path         string
	sha1, sha256 string
	build        *buildinfo.BuildInfo
}

// regularFiles returns the regular files of img's flattened filesystem,
// sorted by path.
func regularFiles(img v1.Image) ([]imageFile, error) {
	rc := mutate.Extract(img)
	defer rc.Close()
	var files []imageFile
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		s1, s256 := sha1.Sum(b), sha256.Sum256(b)
		f := imageFile{path: path.Clean("/" + h.Name), sha1: hex.EncodeToString(s1[:]), sha256: hex.EncodeToString(s256[:])}
		if bi, err := buildinfo.Read(bytes.NewReader(b)); err == nil {
			f.build = bi
		}
		files = append(files, f)
	}
	slices.SortFunc(files, func(a, b imageFile) int { return strings.Compare(a.path, b.path) })
	return files, nil
}

// verificationCode is the SPDX package verification code of files: the
// SHA-1 of their SHA-1s, sorted and joined.
func verificationCode(files []imageFile) string {
	sums := make([]string, len(files))
	for i, f := range files {
		sums[i] = f.sha1
	}
	slices.Sort(sums)
	sum := sha1.Sum([]byte(strings.Join(sums, "")))
	return hex.EncodeToString(sum[:])
}

// caBundleSHA256 is the SHA-256 of CACertificates.
var caBundleSHA256 = sync.OnceValue(func() string {
	sum := sha256.Sum256(CACertificates())
	return hex.EncodeToString(sum[:])
})

// goPURL is the package URL of a Go module at a version.
func goPURL(modPath, ver string) string {
	return "pkg:golang/" + modPath + "@" + purlEscape(ver)
}

// purlEscape escapes what a package URL's version may not hold as is.
func purlEscape(s string) string {
	return strings.NewReplacer("%", "%25", ":", "%3A", "+", "%2B", " ", "%20").Replace(s)
}
