package preview

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestInRepository(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	for _, dir := range []string{"deploy", "deploy/base"} {
		if err := os.Mkdir(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"deploy/out":     outside,
		"deploy/current": "base",
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		reason string
		rel    string
		want   string
		err    string
	}{
		{reason: "a directory", rel: "deploy/base", want: "deploy/base"},
		{reason: "a path that does not exist yet", rel: "deploy/app.yaml", want: "deploy/app.yaml"},
		{reason: "dots that stay inside", rel: "deploy/../deploy/./base", want: "deploy/base"},
		{reason: "a link that stays inside", rel: "deploy/current", want: "deploy/current"},
		{reason: "the root itself", rel: ".", want: "."},
		{reason: "climbing out", rel: "../app.yaml", err: "../app.yaml leaves the repository"},
		{reason: "climbing out from within", rel: "deploy/../../app.yaml", err: "deploy/../../app.yaml leaves the repository"},
		{reason: "a name that only starts with dots", rel: "..app.yaml", want: "..app.yaml"},
		{reason: "absolute", rel: "/etc/app.yaml", err: "/etc/app.yaml is absolute; want a path relative to the repository"},
		{reason: "a link that points out", rel: "deploy/out", err: "deploy/out leaves the repository through a symbolic link"},
		{reason: "a missing file under a link that points out (nothing to read)", rel: "deploy/out/app.yaml", want: "deploy/out/app.yaml"},
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.yaml"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases = append(cases, struct {
		reason string
		rel    string
		want   string
		err    string
	}{reason: "an existing file under a link that points out", rel: "deploy/out/secret.yaml", err: "deploy/out/secret.yaml leaves the repository through a symbolic link"})
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			got, err := InRepository(root, tc.rel)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tc.err, gotErr); diff != "" {
				t.Fatalf("error (-want +got):\n%s", diff)
			}
			if tc.err != "" {
				return
			}
			if diff := cmp.Diff(filepath.Join(root, tc.want), got); diff != "" {
				t.Errorf("path (-want +got):\n%s", diff)
			}
		})
	}
}
