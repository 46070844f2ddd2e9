package preview

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestResolve(t *testing.T) {
	values := map[string]string{"net.id": `"vpc-1"`, "net.port": `8080`, "net.tags": `{"a":1.50}`}
	value := func(ref StackOutput) (any, bool) {
		raw, ok := values[ref.String()]
		if !ok {
			return nil, false
		}
		v, err := decodeValue([]byte(raw))
		return v, err == nil
	}
	cases := []struct {
		name string
		in   map[string]any
		want map[string]any
	}{
		{"literals stay", map[string]any{"a": "x", "n": 1}, map[string]any{"a": "x", "n": 1}},
		{"a string", map[string]any{"id": StackOutput{"net", "id"}}, map[string]any{"id": "vpc-1"}},
		{"numbers as written", map[string]any{"p": StackOutput{"net", "port"}, "t": StackOutput{"net", "tags"}},
			map[string]any{"p": json.Number("8080"), "t": map[string]any{"a": json.Number("1.50")}}},
		{"nested in a list and a map", map[string]any{"l": []any{"a", StackOutput{"net", "id"}}, "m": map[string]any{"k": StackOutput{"net", "id"}}},
			map[string]any{"l": []any{"a", "vpc-1"}, "m": map[string]any{"k": "vpc-1"}}},
		{"without a value: left out", map[string]any{"x": StackOutput{"net", "nope"}, "l": []any{StackOutput{"db", "host"}, "b"}},
			map[string]any{"l": []any{"b"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, resolve(c.in, value)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadSeed(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, body, want string
	}{
		{"good", `{"net": {"id": "vpc-1", "port": 8080}}`, ""},
		{"not json", `{"net": `, "want {\"component\": {\"name\": value}}"},
		{"component not an object", `{"net": "vpc-1"}`, "cannot unmarshal"},
		{"component null", `{"net": null}`, `"net": want an object`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, "seed.json")
			if err := os.WriteFile(path, []byte(c.body), 0o600); err != nil {
				t.Fatal(err)
			}
			seed, err := ReadSeed(context.Background(), path)
			if c.want == "" {
				if err != nil || string(seed["net"]["port"]) != "8080" {
					t.Fatalf("seed %v, %v", seed, err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

func TestRepoPath(t *testing.T) {
	cases := []struct {
		in   string
		want string
		ok   bool
	}{
		{"site", "site", true},
		{"./site/", "site", true},
		{".", ".", true},
		{"/repo/site/x", "site/x", true},
		{"../other", "", false},
		{"/elsewhere", "", false},
		{"a/../../b", "", false},
	}
	for _, c := range cases {
		got, ok := repoPath("/repo", c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("repoPath(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}
