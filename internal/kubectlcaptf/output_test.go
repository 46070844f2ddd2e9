package kubectlcaptf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"
)

func TestCheckOutput(t *testing.T) {
	cases := []struct {
		reason string
		output string
		json   bool
		want   string
		err    string
	}{
		{reason: "text", want: ""},
		{reason: "-o json", output: "json", want: "json"},
		{reason: "-o yaml", output: "yaml", want: "yaml"},
		{reason: "--json is -o json", json: true, want: "json"},
		{reason: "--json and -o json agree", output: "json", json: true, want: "json"},
		{reason: "--json and -o yaml do not", output: "yaml", json: true, err: "--json and -o yaml ask for two formats; give one"},
		{reason: "a format kubectl has and the plugin has not", output: "wide", err: "-o wide: want json or yaml"},
		{reason: "formats are lower case, as kubectl's", output: "JSON", err: "-o JSON: want json or yaml"},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			o := &options{output: tc.output, json: tc.json}
			err := o.checkOutput()
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
			if diff := cmp.Diff(tc.want, o.output); diff != "" {
				t.Errorf("format (-want +got):\n%s", diff)
			}
		})
	}
}

// TestOutputFormats: what -o json and -o yaml print for plans (a list)
// and show (one object) parses back in its format, holds the fields a
// script reads, and for each plan no string its TerraformPlan does not
// hold: the output invents nothing and carries nothing from elsewhere.
func TestOutputFormats(t *testing.T) {
	var plans []Plan
	heldBy := map[string]map[string]bool{} // namespace/name: the strings of the object
	for _, p := range examplePlans() {
		plans = append(plans, newPlan(p))
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		heldBy[p.Namespace+"/"+p.Name] = map[string]bool{}
		collectStrings(v, heldBy[p.Namespace+"/"+p.Name])
	}
	sortPlans(plans)
	unmarshal := map[string]func([]byte, any) error{"json": json.Unmarshal, "yaml": func(b []byte, v any) error { return yaml.Unmarshal(b, v) }}
	for _, format := range []string{"json", "yaml"} {
		for _, tc := range []struct {
			command string
			v       any
			want    []string // namespace/name of the plans it holds
		}{
			{"plans", plans, []string{"default/demo-0a0b0c0d0e", "default/demo-3f9a1c07be", "infra/pool-a-77d0e1f2aa"}},
			{"show", plans[1], []string{"default/demo-3f9a1c07be"}},
		} {
			t.Run(tc.command+" -o "+format, func(t *testing.T) {
				var out bytes.Buffer
				o := &options{output: format, streams: genericiooptions.IOStreams{Out: &out}}
				if err := o.writeObjects(tc.v); err != nil {
					t.Fatal(err)
				}
				if format == "yaml" && json.Valid(out.Bytes()) {
					t.Fatalf("-o yaml printed JSON:\n%s", out.String())
				}
				// Into the fields a script reads.
				var got []Plan
				if tc.command == "plans" {
					err := unmarshal[format](out.Bytes(), &got)
					if err != nil {
						t.Fatalf("not %s: %v\n%s", format, err, out.String())
					}
				} else {
					var one Plan
					if err := unmarshal[format](out.Bytes(), &one); err != nil {
						t.Fatalf("not %s: %v\n%s", format, err, out.String())
					}
					got = []Plan{one}
				}
				var names []string
				for _, p := range got {
					names = append(names, p.Namespace+"/"+p.Name)
				}
				if diff := cmp.Diff(tc.want, names); diff != "" {
					t.Errorf("plans (-want +got):\n%s", diff)
				}
				want := plans
				if tc.command == "show" {
					want = plans[1:2]
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("the objects read back (-want +got):\n%s", diff)
				}
				// Into plain values: every string of a plan is one its
				// object holds.
				var raw any
				if err := unmarshal[format](out.Bytes(), &raw); err != nil {
					t.Fatal(err)
				}
				items, ok := raw.([]any)
				if !ok {
					items = []any{raw}
				}
				for i, item := range items {
					printed := map[string]bool{}
					collectStrings(item, printed)
					if len(printed) == 0 {
						t.Errorf("plan %d: no string at all", i)
					}
					for s := range printed {
						if !heldBy[names[i]][s] {
							t.Errorf("-o %s printed %q for %s, which its TerraformPlan does not hold", format, s, names[i])
						}
					}
				}
			})
		}
	}
}

// collectStrings adds every string value of v, a decoded JSON or YAML
// document, to into. Numbers and booleans are counts and flags the
// objects' own fields give (destructive is worked out from the counts).
func collectStrings(v any, into map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			collectStrings(e, into)
		}
	case []any:
		for _, e := range x {
			collectStrings(e, into)
		}
	case string:
		into[x] = true
	case nil, bool, float64, int64, int, json.Number:
	default:
		panic(fmt.Sprintf("unexpected %T", v))
	}
}

// TestBadOutputReachesNoServer: a misspelt -o is refused before a command
// loads the kubeconfig, so approve -o wide approves nothing.
func TestBadOutputReachesNoServer(t *testing.T) {
	for _, args := range [][]string{
		{"approve", "demo-3f9a1c07be", "-o", "wide"},
		{"plans", "--json", "-o", "yaml"},
	} {
		_, err := run(t, append(args, "--kubeconfig", "/nonexistent/kubeconfig")...)
		if err == nil || strings.Contains(err.Error(), "kubeconfig") {
			t.Errorf("%q: err = %v, want the -o error before any kubeconfig is read", args, err)
		}
	}
}

// TestCompletion: the completion command prints cobra's script for each
// shell, without reaching an API server.
func TestCompletion(t *testing.T) {
	t.Setenv("KUBECONFIG", "/nonexistent/kubeconfig")
	for shell, prefix := range map[string]string{
		"bash":       "# bash completion V2 for kubectl-captf",
		"zsh":        "#compdef kubectl-captf\n",
		"fish":       "# fish completion for kubectl-captf",
		"powershell": "# powershell completion for kubectl-captf",
	} {
		out, err := run(t, "completion", shell)
		if err != nil {
			t.Errorf("completion %s: %v", shell, err)
		}
		if !strings.HasPrefix(out, prefix) || len(out) < 1000 {
			t.Errorf("completion %s printed %d bytes, want a script starting %q:\n%.200s", shell, len(out), prefix, out)
		}
	}
	out, err := run(t, "__complete", "plans", "-o", "")
	if err != nil || !strings.HasPrefix(out, "json\nyaml\n:4\n") {
		t.Errorf("completing -o: %v\n%s", err, out)
	}
}
