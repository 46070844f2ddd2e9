package fieldpath

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFormat(t *testing.T) {
	cases := []struct {
		reason string
		path   Path
		plain  string
		dollar string
	}{
		{"map keys", Path{"spec", "replicas"}, "spec.replicas", "spec.replicas"},
		{"a list index", Path{"spec", "containers", 0, "image"}, "spec.containers.0.image", "spec.containers.0.image"},
		{"a key with dots and a slash", Path{"metadata", "labels", "app.kubernetes.io/name"},
			`metadata.labels["app.kubernetes.io/name"]`, `metadata.labels["app.kubernetes.io/name"]`},
		{"a key of digits is not an index", Path{"data", "0"}, `data["0"]`, `data["0"]`},
		{"a key with quotes", Path{"data", `with "quote"`}, `data["with \"quote\""]`, `data["with \"quote\""]`},
		{"a quoted key then a bare one", Path{"data", ".env", "x"}, `data[".env"].x`, `data[".env"].x`},
		{"a quoted key first", Path{"a b", "c"}, `["a b"].c`, `["a b"].c`},
		{"an index first", Path{0}, "0", "0"},
		{"hyphens and underscores are plain", Path{"_a-b", "c_d"}, "_a-b.c_d", "_a-b.c_d"},
		{"a dollar is plain only in PlainDollar", Path{"properties", "$schema", "a$b"}, `properties["$schema"]["a$b"]`, "properties.$schema.a$b"},
		{"a key starting with a hyphen", Path{"-a"}, `["-a"]`, `["-a"]`},
		{"an empty key", Path{"a", ""}, `a[""]`, `a[""]`},
		// json.Marshal's HTML escaping is part of the names digests hold.
		{"HTML characters are escaped", Path{"tags", "a<b>&c"}, `tags["a\u003cb\u003e\u0026c"]`, `tags["a\u003cb\u003e\u0026c"]`},
		{"the empty path", Path{}, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			if diff := cmp.Diff(tc.plain, Plain.Format(tc.path)); diff != "" {
				t.Errorf("Plain (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.plain, tc.path.String()); diff != "" {
				t.Errorf("String (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.dollar, PlainDollar.Format(tc.path)); diff != "" {
				t.Errorf("PlainDollar (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParse(t *testing.T) {
	cases := []struct {
		in   string
		want Path
		err  string
	}{
		{in: "status.loadBalancer.ingress.0.hostname", want: Path{"status", "loadBalancer", "ingress", "0", "hostname"}},
		{in: `metadata.annotations["a.b/c"]`, want: Path{"metadata", "annotations", "a.b/c"}},
		{in: `data[".env"].x`, want: Path{"data", ".env", "x"}},
		{in: `["a b"]["c"]`, want: Path{"a b", "c"}},
		{in: `data["a\"]b"]`, want: Path{"data", `a"]b`}},
		{in: "properties.$schema", want: Path{"properties", "$schema"}},
		{in: "", err: "empty field path"},
		{in: "a..b", err: `field path "a..b": empty segment`},
		{in: ".a", err: `field path ".a": empty segment`},
		{in: "a.", err: `field path "a.": ends with a dot`},
		{in: "a[b]", err: `field path "a[b]": a bracket holds a quoted key, e.g. ["app.kubernetes.io/name"]`},
		{in: `a["b"`, err: `field path "a[\"b\"": a bracket holds a quoted key, e.g. ["app.kubernetes.io/name"]`},
		{in: `a["b`, err: `field path "a[\"b": bad quoted key: unexpected EOF`},
		{in: `a["b"]c`, err: `field path "a[\"b\"]c": expected a dot or a bracket after a quoted key`},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := Parse(tc.in)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tc.err, gotErr); diff != "" {
				t.Fatalf("error (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("path (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParseReadsWhatFormatWrites: a path of keys reads back as it was
// written, in either syntax. (Parse keeps an index as its digits: a path
// of ints reads back as strings, which lookups treat as indexes.)
func TestParseReadsWhatFormatWrites(t *testing.T) {
	paths := []Path{
		{"spec", "template", "metadata", "labels", "app.kubernetes.io/name"},
		{"data", `with "quote"`, "x"},
		{"data", `a"]b`, `"]`, "["},
		{"a b", "c.d", "$e", "f$"},
		{"tags", "a<b>&c", "ünïcode"},
	}
	for _, p := range paths {
		for name, s := range map[string]Syntax{"Plain": Plain, "PlainDollar": PlainDollar} {
			text := s.Format(p)
			got, err := Parse(text)
			if err != nil {
				t.Errorf("%s: Parse(%s): %v", name, text, err)
				continue
			}
			if diff := cmp.Diff(p, got); diff != "" {
				t.Errorf("%s: %s (-want +got):\n%s", name, text, diff)
			}
		}
	}
}

func TestChild(t *testing.T) {
	parent := make(Path, 1, 4)
	parent[0] = "spec"
	a, b := parent.Child("a"), parent.Child("b")
	if diff := cmp.Diff([]Path{{"spec", "a"}, {"spec", "b"}}, []Path{a, b}); diff != "" {
		t.Errorf("siblings share a backing array (-want +got):\n%s", diff)
	}
}
