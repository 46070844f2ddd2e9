package cli

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/captf/captf/internal/preview/capabilities"
	"github.com/captf/captf/internal/runner"
	"github.com/captf/captf/internal/tftest"
)

// TestStdoutFull: a report that cannot be written (a full disk here,
// /dev/full) fails the command with the write error: the hash to approve
// must not be lost silently.
func TestStdoutFull(t *testing.T) {
	setup(t)
	tf := tftest.Terraform(t)
	dir := tftest.CopyRoot(t, "testdata/roots/canary")
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	for _, args := range [][]string{
		{"plan", dir, "--binary", tf.Path},
		{"plan", dir, "--binary", tf.Path, "--json"},
		{"version"},
	} {
		var stderr strings.Builder
		code := run(context.Background(), args, full, &stderr, capabilities.All(&stderr))
		if code != runner.ExitFailure {
			t.Errorf("captf %s > /dev/full: exit %d, want %d; stderr:\n%s", strings.Join(args, " "), code, runner.ExitFailure, stderr.String())
		}
		if !strings.Contains(stderr.String(), "no space left on device") {
			t.Errorf("captf %s > /dev/full: stderr does not give the write error:\n%s", strings.Join(args, " "), stderr.String())
		}
	}
}
