package cli

import (
	"bytes"
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/captf/captf/internal/preview/capabilities"
	"github.com/captf/captf/internal/version"
)

// TestVersion: captf version and captf --version print the stamped version
// and exit 0; version takes no argument.
func TestVersion(t *testing.T) {
	defer func(s string) { version.Stamp = s }(version.Stamp)
	version.Stamp = "v0.7.1"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		got := captf(t, args...)
		if diff := cmp.Diff(outcome{0, "captf version v0.7.1\n", ""}, got, cmp.AllowUnexported(outcome{})); diff != "" {
			t.Errorf("captf %q (-want +got):\n%s", args, diff)
		}
	}
	if got := captf(t, "version", "extra"); got.code != 2 {
		t.Errorf("captf version extra: exit %d, want 2 (bad usage)", got.code)
	}
}

// TestPreviewVersion: captf-preview --version names the preview binary and
// the stamped version, and plans nothing.
func TestPreviewVersion(t *testing.T) {
	defer func(s string) { version.Stamp = s }(version.Stamp)
	version.Stamp = "v0.7.1"
	t.Chdir(t.TempDir()) // no project file: a plan would fail
	var stdout, stderr bytes.Buffer
	code := RunPreview(context.Background(), []string{"--version"}, &stdout, &stderr, capabilities.All(&stderr))
	if diff := cmp.Diff(outcome{0, "captf-preview version v0.7.1\n", ""}, outcome{code, stdout.String(), stderr.String()}, cmp.AllowUnexported(outcome{})); diff != "" {
		t.Errorf("captf-preview --version (-want +got):\n%s", diff)
	}
}
