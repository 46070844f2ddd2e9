package kubectl

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPathString(t *testing.T) {
	cases := []struct {
		in   path
		want string
	}{
		{path{"spec", "replicas"}, "spec.replicas"},
		{path{"spec", "containers", 0, "image"}, "spec.containers.0.image"},
		{path{"metadata", "labels", "app.kubernetes.io/name"}, `metadata.labels["app.kubernetes.io/name"]`},
		{path{"data", "0"}, `data["0"]`},
		{path{"data", "with \"quote\""}, `data["with \"quote\""]`},
		{path{"data", ".env", "x"}, `data[".env"].x`},
		{path{0}, "0"},
	}
	for _, tc := range cases {
		if got := tc.in.String(); got != tc.want {
			t.Errorf("%v: got %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestParsePath(t *testing.T) {
	cases := []struct {
		in      string
		want    path
		wantErr string
	}{
		{in: "status.loadBalancer.ingress.0.hostname", want: path{"status", "loadBalancer", "ingress", "0", "hostname"}},
		{in: `metadata.annotations["a.b/c"]`, want: path{"metadata", "annotations", "a.b/c"}},
		{in: `data[".env"].x`, want: path{"data", ".env", "x"}},
		{in: "", wantErr: "empty field path"},
		{in: "a..b", wantErr: `field path "a..b": empty segment`},
		{in: "a.", wantErr: `field path "a.": ends with a dot`},
		{in: "a[b]", wantErr: `field path "a[b]": a bracket holds a quoted key`},
		{in: `a["b"]c`, wantErr: `field path "a[\"b\"]c": expected a dot or a bracket after a quoted key`},
	}
	for _, tc := range cases {
		got, err := parsePath(tc.in)
		gotErr := ""
		if err != nil {
			gotErr = err.Error()
		}
		if len(tc.wantErr) > 0 && (len(gotErr) < len(tc.wantErr) || gotErr[:len(tc.wantErr)] != tc.wantErr) {
			t.Errorf("%q: error %q, want %q", tc.in, gotErr, tc.wantErr)
		}
		if tc.wantErr == "" {
			if err != nil {
				t.Errorf("%q: %v", tc.in, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%q (-want +got):\n%s", tc.in, diff)
			}
		}
	}
}

func TestLookup(t *testing.T) {
	o := map[string]any{
		"status": map[string]any{"ingress": []any{map[string]any{"ip": "10.0.0.1"}}},
		"data":   map[string]any{"0": "key named zero"},
	}
	cases := []struct {
		path   string
		want   any
		wantOK bool
	}{
		{"status.ingress.0.ip", "10.0.0.1", true},
		{"status.ingress.1.ip", nil, false},
		{"status.ingress.x", nil, false},
		{"data.0", "key named zero", true},
		{"status.ingress.0.ip.deeper", nil, false},
		{"missing", nil, false},
	}
	for _, tc := range cases {
		p, err := parsePath(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := lookup(o, p)
		if ok != tc.wantOK || !cmp.Equal(tc.want, got) {
			t.Errorf("%s: got %v %v, want %v %v", tc.path, got, ok, tc.want, tc.wantOK)
		}
	}
}
