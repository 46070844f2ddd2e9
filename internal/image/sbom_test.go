package image

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdxlib"
)

// goModVersion is the version of module that go.mod requires, as the go
// command reads it.
func goModVersion(t *testing.T, module string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", module).Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", module, err)
	}
	return strings.TrimSpace(string(out))
}

// host is this machine's platform, the one the test's Go binary is
// built for.
var host = v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}

// demoIndex is an index of two images: one for this machine's platform,
// Base and a real Go binary at /bin/app (testdata/sbomapp, built as
// Compile builds captf's), and one for linux/riscv64 with Base alone.
func demoIndex(t *testing.T) (v1.ImageIndex, string) {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "app")
	if err := Compile(context.Background(), "../..", "./internal/image/testdata/sbomapp", host, "v1.2.3", exe); err != nil {
		t.Fatal(err)
	}
	base, err := Layer(Base(), epoch)
	if err != nil {
		t.Fatal(err)
	}
	app, err := Layer([]File{{Path: "/bin/app", Mode: 0o755, Source: exe}}, epoch)
	if err != nil {
		t.Fatal(err)
	}
	var images []v1.Image
	for _, layers := range [][]v1.Layer{{base, app}, {base}} {
		p := host
		if len(layers) == 1 {
			p = v1.Platform{OS: "linux", Architecture: "riscv64"}
		}
		img, err := Build(Spec{Platform: p, Created: epoch, Layers: layers, Labels: map[string]string{VersionLabel: "v1.2.3"}})
		if err != nil {
			t.Fatal(err)
		}
		images = append(images, img)
	}
	idx, err := Index(images...)
	if err != nil {
		t.Fatal(err)
	}
	return idx, exe
}

// spdxDoc is what the test reads of an SPDX document, by the JSON names
// the format gives them.
type spdxDoc struct {
	SPDXVersion       string `json:"spdxVersion"`
	DataLicense       string `json:"dataLicense"`
	SPDXID            string `json:"SPDXID"`
	Name              string `json:"name"`
	DocumentNamespace string `json:"documentNamespace"`
	CreationInfo      struct {
		Creators []string `json:"creators"`
		Created  string   `json:"created"`
	} `json:"creationInfo"`
	Packages []struct {
		Name             string `json:"name"`
		SPDXID           string `json:"SPDXID"`
		VersionInfo      string `json:"versionInfo"`
		DownloadLocation string `json:"downloadLocation"`
		FilesAnalyzed    *bool  `json:"filesAnalyzed"`
		Checksums        []struct {
			Algorithm     string `json:"algorithm"`
			ChecksumValue string `json:"checksumValue"`
		} `json:"checksums"`
		VerificationCode *struct {
			Value string `json:"packageVerificationCodeValue"`
		} `json:"packageVerificationCode"`
		ExternalRefs []struct {
			Type    string `json:"referenceType"`
			Locator string `json:"referenceLocator"`
		} `json:"externalRefs"`
	} `json:"packages"`
	Files []struct {
		FileName  string `json:"fileName"`
		SPDXID    string `json:"SPDXID"`
		Checksums []struct {
			Algorithm     string `json:"algorithm"`
			ChecksumValue string `json:"checksumValue"`
		} `json:"checksums"`
	} `json:"files"`
	Relationships []struct {
		A    string `json:"spdxElementId"`
		B    string `json:"relatedSpdxElement"`
		Type string `json:"relationshipType"`
	} `json:"relationships"`
}

// readSPDX checks that b is an SPDX 2.3 document in JSON with the fields
// the format requires, and that the SPDX library reads it with every
// relationship naming an element of it.
func readSPDX(t *testing.T, b []byte) spdxDoc {
	t.Helper()
	var doc spdxDoc
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.DataLicense != "CC0-1.0" || doc.SPDXID != "SPDXRef-DOCUMENT" || doc.Name == "" {
		t.Errorf("spdxVersion, dataLicense, SPDXID, name = %q, %q, %q, %q", doc.SPDXVersion, doc.DataLicense, doc.SPDXID, doc.Name)
	}
	if u, err := url.Parse(doc.DocumentNamespace); err != nil || !u.IsAbs() || u.Fragment != "" {
		t.Errorf("documentNamespace %q is not an absolute URI without a fragment", doc.DocumentNamespace)
	}
	if len(doc.CreationInfo.Creators) == 0 || doc.CreationInfo.Created == "" {
		t.Errorf("creationInfo %+v", doc.CreationInfo)
	}
	if len(doc.Packages) == 0 {
		t.Error("no packages")
	}
	for _, p := range doc.Packages {
		if p.Name == "" || !strings.HasPrefix(p.SPDXID, "SPDXRef-") || p.DownloadLocation == "" || p.FilesAnalyzed == nil {
			t.Errorf("package %q, %q: a required field is missing", p.Name, p.SPDXID)
		}
		if *p.FilesAnalyzed && p.VerificationCode == nil {
			t.Errorf("package %s: files analyzed, but no verification code", p.Name)
		}
	}
	for _, f := range doc.Files {
		if !slices.ContainsFunc(f.Checksums, func(c struct {
			Algorithm     string `json:"algorithm"`
			ChecksumValue string `json:"checksumValue"`
		}) bool {
			return c.Algorithm == "SHA1"
		}) {
			t.Errorf("file %s has no SHA1", f.FileName)
		}
	}
	parsed, err := spdxjson.Read(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("the SPDX library does not read it: %v", err)
	}
	if err := spdxlib.ValidateDocument(parsed); err != nil {
		t.Errorf("the SPDX library finds it invalid: %v", err)
	}
	return doc
}

func sha1Hex(b []byte) string   { s := sha1.Sum(b); return hex.EncodeToString(s[:]) }
func sha256Hex(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// TestSBOM: the SBOM of an index is a valid SPDX document naming the
// index, each platform's image by its digest, each file by its checksums,
// the Go binary with the modules it was built with at the versions go.mod
// requires and the Go standard library, and where the CA certificates
// come from; the same index gives the same bytes.
func TestSBOM(t *testing.T) {
	idx, exe := demoIndex(t)
	b, err := SBOM("demo", idx, epoch)
	if err != nil {
		t.Fatal(err)
	}
	doc := readSPDX(t, b)
	idxDigest := digest(t, idx)
	if !strings.Contains(doc.DocumentNamespace, idxDigest.String()) || doc.CreationInfo.Created != "2023-11-14T22:13:20Z" {
		t.Errorf("documentNamespace %q, created %q: want the index digest %s and the time given", doc.DocumentNamespace, doc.CreationInfo.Created, idxDigest)
	}

	const goCmp = "github.com/google/go-cmp"
	ids := map[string]string{}     // name@version → SPDXID
	sha := map[string]string{}     // SPDXID → SHA256
	purls := map[string][]string{} // SPDXID → purls
	verification := map[string]string{}
	for _, p := range doc.Packages {
		ids[p.Name+"@"+p.VersionInfo] = p.SPDXID
		for _, c := range p.Checksums {
			if c.Algorithm == "SHA256" {
				sha[p.SPDXID] = c.ChecksumValue
			}
		}
		for _, r := range p.ExternalRefs {
			if r.Type == "purl" {
				purls[p.SPDXID] = append(purls[p.SPDXID], r.Locator)
			}
		}
		if p.VerificationCode != nil {
			verification[p.SPDXID] = p.VerificationCode.Value
		}
	}
	want := map[string]string{
		"index":     "demo@v1.2.3",
		"host":      "demo " + host.String() + "@v1.2.3",
		"riscv64":   "demo linux/riscv64@v1.2.3",
		"app":       "github.com/captf/captf/internal/image/testdata/sbomapp@v1.2.3",
		"go-cmp":    goCmp + "@" + goModVersion(t, goCmp),
		"stdlib":    "stdlib@" + strings.TrimPrefix(runtime.Version(), "go"),
		"ca bundle": caModule + "@" + goModVersion(t, caModule),
	}
	id := map[string]string{}
	missing := false
	for what, key := range want {
		if id[what] = ids[key]; id[what] == "" {
			t.Errorf("%s: no package %s", what, key)
			missing = true
		}
	}
	if missing {
		t.Fatalf("packages: %v", slices.Sorted(maps.Keys(ids)))
	}
	if got := sha[id["index"]]; got != idxDigest.Hex {
		t.Errorf("the index's SHA256 %s, want its digest %s", got, idxDigest.Hex)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for i, what := range []string{"host", "riscv64"} {
		if got := sha[id[what]]; got != m.Manifests[i].Digest.Hex {
			t.Errorf("%s: the image's SHA256 %s, want its manifest's digest %s", what, got, m.Manifests[i].Digest.Hex)
		}
	}
	if diff := cmp.Diff([]string{"pkg:golang/" + goCmp + "@" + goModVersion(t, goCmp)}, purls[id["go-cmp"]]); diff != "" {
		t.Errorf("go-cmp's purl (-want +got):\n%s", diff)
	}
	bin, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if got := sha[id["app"]]; got != sha256Hex(bin) {
		t.Errorf("the application's SHA256 %s, want the binary's %s", got, sha256Hex(bin))
	}

	// The files each image holds, and its verification code: the SHA1 of
	// their SHA1s, sorted and joined.
	base := map[string][]byte{}
	for _, f := range Base() {
		if !f.Dir {
			base[f.Path] = f.Data
		}
	}
	withApp := maps.Clone(base)
	withApp["/bin/app"] = bin
	wantFiles := map[string]string{}
	for what, files := range map[string]map[string][]byte{"host": withApp, "riscv64": base} {
		var sums []string
		for p, data := range files {
			sums = append(sums, sha1Hex(data))
			wantFiles[what+" ."+p] = sha1Hex(data) + " " + sha256Hex(data)
		}
		slices.Sort(sums)
		if got, want := verification[id[what]], sha1Hex([]byte(strings.Join(sums, ""))); got != want {
			t.Errorf("%s: verification code %s, want %s", what, got, want)
		}
	}
	fileNames := map[string]string{} // SPDXID → file name
	fileSums := map[string]string{}  // SPDXID → SHA1 SHA256
	for _, f := range doc.Files {
		var s1, s256 string
		for _, c := range f.Checksums {
			switch c.Algorithm {
			case "SHA1":
				s1 = c.ChecksumValue
			case "SHA256":
				s256 = c.ChecksumValue
			}
		}
		fileNames[f.SPDXID], fileSums[f.SPDXID] = f.FileName, s1+" "+s256
	}
	rels := map[string]bool{}
	gotFiles := map[string]string{}
	apps := map[string]string{} // image → application
	for _, r := range doc.Relationships {
		rels[r.A+" "+r.Type+" "+r.B] = true
		for what, imageID := range map[string]string{"host": id["host"], "riscv64": id["riscv64"]} {
			if r.A != imageID || r.Type != "CONTAINS" {
				continue
			}
			if name, ok := fileNames[r.B]; ok {
				gotFiles[what+" "+name] = fileSums[r.B]
			}
			if strings.HasPrefix(r.B, "SPDXRef-App-") {
				apps[what] = r.B
			}
		}
		if r.Type == "GENERATES" && r.A == id["ca bundle"] && fileNames[r.B] != "."+CACertificatesPath {
			t.Errorf("the CA module generates %s", fileNames[r.B])
		}
	}
	if diff := cmp.Diff(wantFiles, gotFiles); diff != "" {
		t.Errorf("each image's files, SHA1 and SHA256 (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"host": id["app"]}, apps); diff != "" {
		t.Errorf("the images' applications (-want +got):\n%s", diff)
	}
	for _, rel := range []string{
		"SPDXRef-DOCUMENT DESCRIBES " + id["index"],
		id["index"] + " CONTAINS " + id["host"],
		id["index"] + " CONTAINS " + id["riscv64"],
		id["app"] + " DEPENDS_ON " + id["go-cmp"],
		id["app"] + " DEPENDS_ON " + id["stdlib"],
		id["host"] + " CONTAINS " + id["ca bundle"],
		id["riscv64"] + " CONTAINS " + id["ca bundle"],
	} {
		if !rels[rel] {
			t.Errorf("no relationship %s", rel)
		}
	}

	again, err := SBOM("demo", idx, epoch)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, again) {
		t.Error("two SBOMs of one index differ")
	}
}

// emptyIndex is an index of one empty linux/amd64 image.
func emptyIndex(t *testing.T) v1.ImageIndex {
	t.Helper()
	img, err := Build(Spec{Platform: v1.Platform{OS: "linux", Architecture: "amd64"}, Created: epoch})
	if err != nil {
		t.Fatal(err)
	}
	idx, err := Index(img)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// TestSBOMReferrer: the SBOM's referrer is an OCI image manifest of
// artifact type application/spdx+json, with the empty config, the SBOM
// as its one layer, and the index as its subject; the layout lists it
// beside the index, named by its tag, and reads it back as the index's
// referrer, and not one whose subject is another index.
func TestSBOMReferrer(t *testing.T) {
	idx := emptyIndex(t)
	sbom := []byte(`{"spdxVersion":"SPDX-2.3"}`)
	r, err := SBOMReferrer("demo", idx, sbom, epoch)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := r.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	var m v1.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	rawIndex, err := idx.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	empty := v1.Hash{Algorithm: "sha256", Hex: sha256Hex([]byte("{}"))}
	want := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  "application/spdx+json",
		Config:        v1.Descriptor{MediaType: "application/vnd.oci.empty.v1+json", Digest: empty, Size: 2},
		Layers: []v1.Descriptor{{MediaType: "application/spdx+json", Size: int64(len(sbom)),
			Digest:      v1.Hash{Algorithm: "sha256", Hex: sha256Hex(sbom)},
			Annotations: map[string]string{"org.opencontainers.image.title": "demo.spdx.json"}}},
		Subject:     &v1.Descriptor{MediaType: types.OCIImageIndex, Digest: digest(t, idx), Size: int64(len(rawIndex))},
		Annotations: map[string]string{"org.opencontainers.image.created": "2023-11-14T22:13:20Z"},
	}
	if diff := cmp.Diff(want, m); diff != "" {
		t.Errorf("the referrer's manifest (-want +got):\n%s", diff)
	}
	if cfg, err := r.RawConfigFile(); err != nil || string(cfg) != "{}" {
		t.Errorf("config %q, %v", cfg, err)
	}

	other, err := Build(Spec{Platform: v1.Platform{OS: "linux", Architecture: "arm64"}, Created: epoch})
	if err != nil {
		t.Fatal(err)
	}
	otherIdx, err := Index(other)
	if err != nil {
		t.Fatal(err)
	}
	stray, err := SBOMReferrer("other", otherIdx, sbom, epoch)
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir() + "/demo"
	if err := WriteLayout(dir, "v1.2.3", idx, r, stray); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(dir + "/index.json")
	if err != nil {
		t.Fatal(err)
	}
	var top v1.IndexManifest
	if err := json.Unmarshal(b, &top); err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, d := range top.Manifests {
		listed = append(listed, string(d.MediaType)+" "+d.Digest.String()+" "+d.ArtifactType+" "+d.Annotations["org.opencontainers.image.ref.name"])
	}
	wantListed := []string{
		string(types.OCIImageIndex) + " " + digest(t, idx).String() + "  v1.2.3",
		string(types.OCIManifestSchema1) + " " + digest(t, r).String() + " application/spdx+json ",
		string(types.OCIManifestSchema1) + " " + digest(t, stray).String() + " application/spdx+json ",
	}
	if diff := cmp.Diff(wantListed, listed); diff != "" {
		t.Errorf("index.json lists (-want +got):\n%s", diff)
	}
	gotIdx, referrers, err := ReadLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	if digest(t, gotIdx) != digest(t, idx) {
		t.Errorf("ReadLayout: index %s, wrote %s", digest(t, gotIdx), digest(t, idx))
	}
	if len(referrers) != 1 || digest(t, referrers[0]) != digest(t, r) {
		t.Fatalf("ReadLayout: %d referrers, want the SBOM's (%s) alone", len(referrers), digest(t, r))
	}
	layers, err := referrers[0].Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers %v, %v", layers, err)
	}
	rc, err := layers[0].Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, sbom) {
		t.Errorf("the layout's SBOM %q, want %q", got, sbom)
	}
}

// TestPushReferrer: pushed after its index, the SBOM is among the index's
// referrers, both on a registry with the referrers API, which lists it
// itself, and on one without, where the push lists it in the index the
// referrers tag (sha256-<hex>) names.
func TestPushReferrer(t *testing.T) {
	idx := emptyIndex(t)
	r, err := SBOMReferrer("demo", idx, []byte(`{}`), epoch)
	if err != nil {
		t.Fatal(err)
	}
	for _, api := range []bool{true, false} {
		t.Run(fmt.Sprintf("referrers API %v", api), func(t *testing.T) {
			srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0)), registry.WithReferrersSupport(api)))
			defer srv.Close()
			ref := strings.TrimPrefix(srv.URL, "http://") + "/captf/demo:v1.2.3"
			ctx := context.Background()
			if _, err := Push(ctx, ref, idx); err != nil {
				t.Fatal(err)
			}
			d, err := PushReferrer(ctx, ref, r)
			if err != nil {
				t.Fatal(err)
			}
			if d != digest(t, r) {
				t.Errorf("PushReferrer returned %s, want the referrer's digest %s", d, digest(t, r))
			}
			repo, err := name.NewRepository(strings.TrimSuffix(ref, ":v1.2.3"))
			if err != nil {
				t.Fatal(err)
			}
			listed := func(ii v1.ImageIndex) []v1.Hash {
				t.Helper()
				m, err := ii.IndexManifest()
				if err != nil {
					t.Fatal(err)
				}
				var hs []v1.Hash
				for _, desc := range m.Manifests {
					hs = append(hs, desc.Digest)
				}
				return hs
			}
			referrers, err := remote.Referrers(repo.Digest(digest(t, idx).String()))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]v1.Hash{d}, listed(referrers)); diff != "" {
				t.Errorf("the index's referrers (-want +got):\n%s", diff)
			}
			tagged, err := remote.Index(repo.Tag("sha256-" + digest(t, idx).Hex))
			switch {
			case api && err == nil:
				t.Errorf("a registry with the referrers API got the referrers tag")
			case !api && err != nil:
				t.Errorf("the referrers tag: %v", err)
			case !api:
				if diff := cmp.Diff([]v1.Hash{d}, listed(tagged)); diff != "" {
					t.Errorf("the referrers tag lists (-want +got):\n%s", diff)
				}
			}
		})
	}
}
