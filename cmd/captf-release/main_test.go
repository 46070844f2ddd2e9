package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestManifestsWritesTheRelease(t *testing.T) {
	out := t.TempDir()
	if err := run([]string{"manifests", "--version", "v0.1.0", "--registry", "ghcr.io/captf", "--out", out, "--config", "../../config"}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"infrastructure-components.yaml": "image: ghcr.io/captf/captf-manager:v0.1.0",
		"metadata.yaml":                  "contract: v1beta2",
		"cluster-template.yaml":          "kind: TerraformCluster",
	} {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %q", name, want)
		}
	}
}

func TestRefusesWithoutSubcommand(t *testing.T) {
	for _, args := range [][]string{nil, {"--version", "v0.1.0"}, {"manifests", "--registry", "ghcr.io/captf", "extra"}} {
		if err := run(args); err == nil {
			t.Errorf("run(%q) succeeded", args)
		}
	}
}
