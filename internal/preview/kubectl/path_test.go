package kubectl

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/captf/captf/internal/preview/fieldpath"
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
		p, err := fieldpath.Parse(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := lookup(o, p)
		if ok != tc.wantOK || !cmp.Equal(tc.want, got) {
			t.Errorf("%s: got %v %v, want %v %v", tc.path, got, ok, tc.want, tc.wantOK)
		}
	}
}
