package runner

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestModuleOutputs(t *testing.T) {
	none := map[string]moduleOutput{OutputEndpointHost: {}, OutputEndpointPort: {}, OutputFailureDomains: {}, OutputExports: {}, OutputProviderID: {}, OutputAddresses: {}, OutputFailureDomain: {}, OutputProviderIDs: {}, OutputMemberAddresses: {}, OutputHealth: {}}
	with := func(set map[string]moduleOutput) map[string]moduleOutput {
		out := maps.Clone(none)
		maps.Copy(out, set)
		return out
	}
	yes := moduleOutput{Declared: true}
	cases := []struct {
		name  string
		files map[string]string
		want  map[string]moduleOutput
	}{
		{"hcl", map[string]string{"main.tf": "output \"control_plane_endpoint_host\" {\n  value = 1\n}\n  output \"control_plane_endpoint_port\" { value = 2 }\n"},
			with(map[string]moduleOutput{OutputEndpointHost: yes, OutputEndpointPort: yes})},
		{"hcl, a comment is not a declaration", map[string]string{"main.tf": "# output \"control_plane_endpoint_host\"\noutput \"control_plane_endpoint_portx\" {}\n"},
			none},
		{"json object after another output", map[string]string{"main.tf.json": `{"output":{"a":{"value":1},"control_plane_endpoint_host":{"value":"h"},"control_plane_endpoint_port":{"value":1}}}`},
			with(map[string]moduleOutput{OutputEndpointHost: yes, OutputEndpointPort: yes})},
		{"json list form, split over files", map[string]string{
			"a.tf.json": `{"output":[{"control_plane_endpoint_host":{"value":"h"}}]}`,
			"b.tf":      "output \"control_plane_endpoint_port\" {}\n"},
			with(map[string]moduleOutput{OutputEndpointHost: yes, OutputEndpointPort: yes})},
		{"failure domains alone", map[string]string{"main.tf": "output \"failure_domains\" {\n  value = [\"a\"]\n}\n"},
			with(map[string]moduleOutput{OutputFailureDomains: yes})},
		{"exports", map[string]string{"main.tf": "output \"exports\" {\n  value = { network = \"n\" }\n}\n"},
			with(map[string]moduleOutput{OutputExports: yes})},
		{"a pool's members", map[string]string{"main.tf": "output \"provider_ids\" {\n  value = [\"a\"]\n}\n"},
			with(map[string]moduleOutput{OutputProviderIDs: yes})},
		{"a pool's members' addresses", map[string]string{"main.tf": "output \"member_addresses\" {\n  value = { a = \"x.y\" }\n}\n"},
			with(map[string]moduleOutput{OutputMemberAddresses: yes})},
		{"health, sensitive", map[string]string{"main.tf": "output \"health\" {\n  value     = { state = \"running\" }\n  sensitive = true\n}\n"},
			with(map[string]moduleOutput{OutputHealth: {Declared: true, Sensitive: true}})},
		{"sensitive, in hcl and in json", map[string]string{
			"a.tf":      "output \"failure_domains\" {\n  value     = [var.z]\n  sensitive = true\n  precondition {\n    condition     = true\n    error_message = \"x\"\n  }\n}\n",
			"b.tf.json": `{"output":{"control_plane_endpoint_host":{"value":"h","sensitive":true}}}`,
			"c.tf":      "output \"control_plane_endpoint_port\" {\n  value     = 1\n  sensitive = false\n}\n"},
			with(map[string]moduleOutput{OutputFailureDomains: {Declared: true, Sensitive: true}, OutputEndpointHost: {Declared: true, Sensitive: true}, OutputEndpointPort: yes})},
		{"a file that does not parse is terraform's to report", map[string]string{"main.tf": "output \"failure_domains\" {\n"}, none},
		{"other files ignored", map[string]string{"notes.tfvars": "output \"control_plane_endpoint_host\" {}\n"}, none},
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

func TestParseFailureDomains(t *testing.T) {
	many := make([]string, maxFailureDomains+1)
	for i := range many {
		many[i] = fmt.Sprintf("z%d", i)
	}
	tooMany, _ := json.Marshal(many)
	long, _ := json.Marshal([]string{strings.Repeat("a", maxDomainName+1)})
	big := make([]map[string]any, 20)
	for i := range big {
		big[i] = map[string]any{"name": fmt.Sprintf("zone-%02d", i), "attributes": map[string]string{"note": strings.Repeat("x", 100)}}
	}
	tooBig, _ := json.Marshal(big)
	cases := []struct {
		reason string
		in     string
		want   []FailureDomain
		err    string
	}{
		{"names: each may hold the control plane, sorted",
			`["b","a"]`,
			[]FailureDomain{{Name: "a", ControlPlane: true}, {Name: "b", ControlPlane: true}}, ""},
		{"objects",
			`[{"name":"b","control_plane":false,"attributes":{"rack":"2"}},{"name":"a"}]`,
			[]FailureDomain{{Name: "a", ControlPlane: true}, {Name: "b", Attributes: map[string]string{"rack": "2"}}}, ""},
		{"an object by name",
			`{"b":{"control_plane":false},"a":{"attributes":{"k":"v"}}}`,
			[]FailureDomain{{Name: "a", ControlPlane: true, Attributes: map[string]string{"k": "v"}}, {Name: "b"}}, ""},
		{"empty", `[]`, []FailureDomain{}, ""},
		{"a string", `"zone-a"`, nil, "not a list of names"},
		{"an attribute that is not a string", `[{"name":"a","attributes":{"n":1}}]`, nil, "entry 0 is not an object"},
		{"an entry without a name", `[{"name":"a"},{"control_plane":true}]`, nil, "entry 1 has no name"},
		{"an empty name", `[""]`, nil, "entry 0 has no name"},
		{"a name too long", string(long), nil, "entry 0 has no name of 1 to 256"},
		{"a repeated name", `["a","a"]`, nil, "entry 1 repeats a name"},
		{"too many", string(tooMany), nil, "101 entries, at most 100"},
		{"too long for the report", string(tooBig), nil, "more than the 2048 a Job's report holds"},
	}
	for _, c := range cases {
		t.Run(c.reason, func(t *testing.T) {
			got, err := parseFailureDomains(json.RawMessage(c.in))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one saying %q", err, c.err)
				}
				if strings.Contains(err.Error(), "zone-") || strings.Contains(err.Error(), "aaaa") {
					t.Errorf("the error names a value: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
