package image

import (
	"archive/tar"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

var epoch = time.Unix(1700000000, 0).UTC()

// entry is what a test reads back from a layer's tar.
type entry struct {
	Name     string
	Type     byte
	Mode     int64
	UID, GID int
	ModTime  time.Time
	Data     string
}

func readLayer(t *testing.T, l v1.Layer) []entry {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var out []entry
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, entry{h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid, h.ModTime.UTC(), string(b)})
	}
}

func digest(t *testing.T, d interface{ Digest() (v1.Hash, error) }) v1.Hash {
	t.Helper()
	h, err := d.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestLayer: entries come sorted, with their folders, at the given time and
// owner, whatever order the files were listed in; the digest depends on
// contents and time only.
func TestLayer(t *testing.T) {
	src := filepath.Join(t.TempDir(), "bin")
	writeFile(t, src, "binary")
	files := []File{
		{Path: "/usr/bin/tool", Mode: 0o755, Source: src},
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root\n")},
		{Path: "/home/nonroot", Mode: 0o700, UID: 65532, GID: 65532, Dir: true},
	}
	l, err := Layer(files, epoch)
	if err != nil {
		t.Fatal(err)
	}
	want := []entry{
		{"etc/", tar.TypeDir, 0o755, 0, 0, epoch, ""},
		{"etc/passwd", tar.TypeReg, 0o644, 0, 0, epoch, "root\n"},
		{"home/", tar.TypeDir, 0o755, 0, 0, epoch, ""},
		{"home/nonroot/", tar.TypeDir, 0o700, 65532, 65532, epoch, ""},
		{"usr/", tar.TypeDir, 0o755, 0, 0, epoch, ""},
		{"usr/bin/", tar.TypeDir, 0o755, 0, 0, epoch, ""},
		{"usr/bin/tool", tar.TypeReg, 0o755, 0, 0, epoch, "binary"},
	}
	if diff := cmp.Diff(want, readLayer(t, l)); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	if mt, err := l.MediaType(); err != nil || mt != types.OCILayer {
		t.Errorf("media type %q, %v", mt, err)
	}

	reversed := []File{files[2], files[1], files[0]}
	again, err := Layer(reversed, epoch)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := digest(t, l), digest(t, again); a != b {
		t.Errorf("the order of files changed the digest: %s, %s", a, b)
	}
	later, err := Layer(files, epoch.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if a, b := digest(t, l), digest(t, later); a == b {
		t.Errorf("another time kept the digest %s", a)
	}
	writeFile(t, src, "binary2")
	changed, err := Layer(files, epoch)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := digest(t, l), digest(t, changed); a == b {
		t.Errorf("other contents kept the digest %s", a)
	}
}

func TestLayerRefuses(t *testing.T) {
	for _, tc := range []struct {
		reason string
		files  []File
	}{
		{"a relative path", []File{{Path: "etc/passwd"}}},
		{"an unclean path", []File{{Path: "/etc/../passwd"}}},
		{"the root itself", []File{{Path: "/", Dir: true}}},
		{"a path twice", []File{{Path: "/a", Data: []byte("1")}, {Path: "/a", Data: []byte("2")}}},
		{"a file holding a file", []File{{Path: "/a", Data: []byte("1")}, {Path: "/a/b", Data: []byte("2")}}},
		{"a folder with contents", []File{{Path: "/a", Dir: true, Data: []byte("1")}}},
		{"a missing source", []File{{Path: "/a", Source: "/nonexistent/file"}}},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			if _, err := Layer(tc.files, epoch); err == nil {
				t.Error("accepted")
			}
		})
	}
}

// TestBuild: the image config says what runs, as whom, on which platform
// and when; the same spec gives the same digest, and the index describes
// each image by its platform.
func TestBuild(t *testing.T) {
	build := func() v1.Image {
		base, err := Layer(Base(), epoch)
		if err != nil {
			t.Fatal(err)
		}
		bin, err := Layer([]File{{Path: "/app", Mode: 0o755, Data: []byte("app")}}, epoch)
		if err != nil {
			t.Fatal(err)
		}
		img, err := Build(Spec{Platform: v1.Platform{OS: "linux", Architecture: "arm64"}, Created: epoch,
			Layers: []v1.Layer{base, bin}, CreatedBy: []string{"base", "app"}, Entrypoint: []string{"/app"}, User: User, WorkingDir: "/"})
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
	img := build()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	got := struct {
		OS, Arch, User, WorkingDir string
		Entrypoint                 []string
		Created                    time.Time
		History                    []string
	}{cf.OS, cf.Architecture, cf.Config.User, cf.Config.WorkingDir, cf.Config.Entrypoint, cf.Created.UTC(), nil}
	for _, h := range cf.History {
		got.History = append(got.History, h.CreatedBy+"@"+h.Created.UTC().Format(time.RFC3339))
	}
	want := got
	want.OS, want.Arch, want.User, want.WorkingDir, want.Entrypoint, want.Created = "linux", "arm64", "65532:65532", "/", []string{"/app"}, epoch
	want.History = []string{"base@2023-11-14T22:13:20Z", "app@2023-11-14T22:13:20Z"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	if mt, err := img.MediaType(); err != nil || mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %q, %v", mt, err)
	}
	if a, b := digest(t, img), digest(t, build()); a != b {
		t.Errorf("two builds of one spec: %s and %s", a, b)
	}
	idx, err := Index(img)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Platform == nil || m.Manifests[0].Platform.String() != "linux/arm64" || m.Manifests[0].Digest != digest(t, img) {
		t.Errorf("index %+v", m.Manifests)
	}
	if m.MediaType != types.OCIImageIndex {
		t.Errorf("index media type %q", m.MediaType)
	}
}

// TestBase: the non-root user and its group are named, and the CA bundle
// holds only certificates Go parses.
func TestBase(t *testing.T) {
	files := map[string]File{}
	for _, f := range Base() {
		files[f.Path] = f
	}
	if diff := cmp.Diff("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n", string(files["/etc/passwd"].Data)); diff != "" {
		t.Errorf("/etc/passwd (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("root:x:0:\nnonroot:x:65532:\n", string(files["/etc/group"].Data)); diff != "" {
		t.Errorf("/etc/group (-want +got):\n%s", diff)
	}
	if tmp := files["/tmp"]; !tmp.Dir || tmp.Mode != 0o1777 {
		t.Errorf("/tmp %+v", tmp)
	}
	rest := files[CACertificatesPath].Data
	n := 0
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			t.Fatalf("certificate %d: %v", n, err)
		}
		n++
	}
	if len(rest) != 0 || n < 100 {
		t.Errorf("%d certificates, %d bytes left over; want over 100 and none", n, len(rest))
	}
}

func TestParsePlatforms(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{in: "linux/amd64,linux/arm64", want: []string{"linux/amd64", "linux/arm64"}},
		{in: " linux/arm/v7 ", want: []string{"linux/arm/v7"}},
		{in: "linux", wantErr: true},
		{in: "", wantErr: true},
		{in: ",", wantErr: true},
	} {
		ps, err := ParsePlatforms(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("ParsePlatforms(%q) error %v, want error %v", tc.in, err, tc.wantErr)
			continue
		}
		var got []string
		for _, p := range ps {
			got = append(got, p.String())
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ParsePlatforms(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestUnpack: the flattened filesystem lands in the folder with its
// modes; a later layer's file replaces an earlier one's.
func TestUnpack(t *testing.T) {
	first, err := Layer([]File{{Path: "/bin/app", Mode: 0o755, Data: []byte("v1")}, {Path: "/etc/conf", Mode: 0o600, Data: []byte("c")}}, epoch)
	if err != nil {
		t.Fatal(err)
	}
	second, err := Layer([]File{{Path: "/bin/app", Mode: 0o750, Data: []byte("v2")}}, epoch)
	if err != nil {
		t.Fatal(err)
	}
	img, err := Build(Spec{Platform: v1.Platform{OS: "linux", Architecture: "amd64"}, Created: epoch, Layers: []v1.Layer{first, second}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := Unpack(img, dir); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, name := range []string{"bin/app", "etc/conf"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		got[name] = info.Mode().Perm().String() + " " + string(b)
	}
	want := map[string]string{"bin/app": "-rwxr-x--- v2", "etc/conf": "-rw------- c"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("unpacked (-want +got):\n%s", diff)
	}
}

// TestTree: a local folder's files and folders land under the given path
// with their modes.
func TestTree(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o750); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "main.tf"), "x")
	writeFile(t, filepath.Join(dir, "sub", "vars.tf"), "y")
	files, err := Tree(dir, "/captf/module")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		got = append(got, fmt.Sprintf("%s %o dir=%v src=%v", f.Path, f.Mode, f.Dir, f.Source != ""))
	}
	want := []string{
		"/captf/module 755 dir=true src=false",
		"/captf/module/main.tf 644 dir=false src=true",
		"/captf/module/sub 750 dir=true src=false",
		"/captf/module/sub/vars.tf 644 dir=false src=true",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Tree (-want +got):\n%s", diff)
	}
	if err := os.Symlink("main.tf", filepath.Join(dir, "link.tf")); err != nil {
		t.Fatal(err)
	}
	if _, err := Tree(dir, "/captf/module"); err == nil {
		t.Error("a symbolic link was taken")
	}
}
