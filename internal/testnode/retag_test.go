package testnode

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestRetag moves a tag twice and runs containers of the tag and of the tag
// pinned to each digest it had: a pull of the tag gets what it points to
// now, a pinned pull what it pointed to then, and each container reports
// the digest it ran. It guards the one thing the manager's digest tests
// rely on: a digest the node once served stays pullable, with the same
// content, after the tag moved.
func TestRetag(t *testing.T) {
	const ref, other = "example.test/module:1", "example.test/other:1"
	folder := func(content string) []Image {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "which"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return []Image{{Path: "/img", Dir: dir}}
	}
	n := &Node{Images: map[string][]Image{ref: folder("A"), other: folder("O")}, logf: t.Logf}
	// run runs a container of image that copies /img/which to its
	// termination message, and returns that and the imageID it reported.
	run := func(image string) (content, imageID string) {
		t.Helper()
		if _, _, known := n.image(image); !known {
			return "", ""
		}
		c := corev1.Container{Name: "c", Image: image, Command: []string{"cp", "/img/which", corev1.TerminationMessagePathDefault}}
		st, err := n.container(context.Background(), t.TempDir(), &corev1.Pod{}, c)
		if err != nil {
			t.Fatal(err)
		}
		if st.State.Terminated.ExitCode != 0 {
			t.Fatalf("container of %s exited %d", image, st.State.Terminated.ExitCode)
		}
		return st.State.Terminated.Message, st.ImageID
	}

	a := Digest(ref)
	b := n.Retag(ref, folder("B"))
	c := n.Retag(ref, folder("C"))
	if b == a || c == a || c == b {
		t.Fatalf("digests over time %s, %s, %s: want three", a, b, c)
	}
	const repo = "example.test/module@"
	for _, tc := range []struct {
		image, content, imageID string
	}{
		{ref, "C", repo + c},
		{ref + "@" + a, "A", repo + a},
		{ref + "@" + b, "B", repo + b},
		{ref + "@" + c, "C", repo + c},
		{ref + "@" + Digest("example.test/module:2"), "", ""},
		{other, "O", "example.test/other@" + Digest(other)},
		{other + "@" + Digest(other), "O", "example.test/other@" + Digest(other)},
	} {
		content, imageID := run(tc.image)
		if content != tc.content || imageID != tc.imageID {
			t.Errorf("%s ran %q and reported %q, want %q and %q", tc.image, content, imageID, tc.content, tc.imageID)
		}
	}

	// A reference the node did not know is added under its usual digest.
	if got := n.Retag("example.test/new:1", folder("N")); got != Digest("example.test/new:1") {
		t.Errorf("Retag of a new reference: digest %s, want %s", got, Digest("example.test/new:1"))
	}

	// Pods resolve images while a test retags (run with -race).
	d := folder("D")
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if i == 0 {
					n.Retag(ref, d)
				} else if _, _, known := n.image(ref + "@" + a); !known {
					t.Error("the first digest is lost while retagging")
					return
				}
			}
		}()
	}
	wg.Wait()
}
