package runner

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestModuleOutputs(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		want  map[string]bool
	}{
		{"hcl", map[string]string{"main.tf": "output \"control_plane_endpoint_host\" {\n  value = 1\n}\n  output \"control_plane_endpoint_port\" { value = 2 }\n"},
			map[string]bool{OutputEndpointHost: true, OutputEndpointPort: true}},
		{"hcl, a comment is not a declaration", map[string]string{"main.tf": "# output \"control_plane_endpoint_host\"\noutput \"control_plane_endpoint_portx\" {}\n"},
			map[string]bool{OutputEndpointHost: false, OutputEndpointPort: false}},
		{"json object after another output", map[string]string{"main.tf.json": `{"output":{"a":{"value":1},"control_plane_endpoint_host":{"value":"h"},"control_plane_endpoint_port":{"value":1}}}`},
			map[string]bool{OutputEndpointHost: true, OutputEndpointPort: true}},
		{"json list form, split over files", map[string]string{
			"a.tf.json": `{"output":[{"control_plane_endpoint_host":{"value":"h"}}]}`,
			"b.tf":      "output \"control_plane_endpoint_port\" {}\n"},
			map[string]bool{OutputEndpointHost: true, OutputEndpointPort: true}},
		{"other files ignored", map[string]string{"notes.tfvars": "output \"control_plane_endpoint_host\"\n"},
			map[string]bool{OutputEndpointHost: false, OutputEndpointPort: false}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, body := range c.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := moduleOutputs(dir)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
