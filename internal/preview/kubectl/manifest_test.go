package kubectl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// writeFiles writes files (path: content) under a new root.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestReadManifest(t *testing.T) {
	cm := func(name string) string { return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n" }
	root := writeFiles(t, map[string]string{
		"dir/b.yaml":        cm("b1") + "---\n# only a comment\n---\n" + cm("b2"),
		"dir/a.yml":         cm("a"),
		"dir/c.json":        `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}`,
		"dir/notes.txt":     "not a manifest",
		"dir/sub/d.yaml":    cm("d"),
		"list.yaml":         "apiVersion: v1\nkind: List\nitems:\n- " + strings.ReplaceAll(cm("l1"), "\n", "\n  ") + "\n- " + strings.ReplaceAll(cm("l2"), "\n", "\n  "),
		"numbers.yaml":      "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  replicas: 3\n",
		"empty/readme.md":   "",
		"bad/notyaml.yaml":  cm("ok") + "---\nkey: [unclosed\n",
		"bad/noname.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n",
		"bad/generate.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  generateName: x-\n",
		"bad/scalar.yaml":   "just a string\n",
		"bad/nokind.yaml":   "apiVersion: v1\nmetadata:\n  name: x\n",
		"bad/nullitem.yaml": "apiVersion: v1\nkind: List\nitems:\n- null\n",
		"bad/secret.yaml":   "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\nstringData:\n  pw: " + canary + ": [\n",
		"bad/anchor.yaml":   "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\nstringData:\n  pw: *" + canary + "\n",
		"bad/tag.yaml":      "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\nstringData:\n  pw: !!int " + canary + "\n",
		"bad/twice.yaml":    "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\nstringData:\n  pw: " + canary + "\n  pw: other\n",
	})
	names := func(docs []document) []string {
		var out []string
		for _, d := range docs {
			out = append(out, d.Where+" "+d.Kind+"/"+d.Name)
		}
		return out
	}

	docs, err := readManifest(root, "dir")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"dir/a.yml: document 1 ConfigMap/a", "dir/b.yaml: document 1 ConfigMap/b1", "dir/b.yaml: document 3 ConfigMap/b2", "dir/c.json: document 1 ConfigMap/c"}
	if diff := cmp.Diff(want, names(docs)); diff != "" {
		t.Errorf("a directory: its YAML and JSON files in name order, not its subdirectories (-want +got):\n%s", diff)
	}

	docs, err = readManifest(root, "list.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"list.yaml: document 1: items.0 ConfigMap/l1", "list.yaml: document 1: items.1 ConfigMap/l2"}, names(docs)); diff != "" {
		t.Errorf("a List (-want +got):\n%s", diff)
	}

	docs, err = readManifest(root, "numbers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if r := docs[0].Object["spec"].(map[string]any)["replicas"]; r != int64(3) {
		t.Errorf("a whole number decodes as %T %v, want int64 as the API machinery", r, r)
	}

	errs := []struct{ rel, want string }{
		{"bad/notyaml.yaml", "bad/notyaml.yaml: document 2: not YAML: "},
		{"bad/noname.yaml", "bad/noname.yaml: document 1: metadata.name is missing or not a string"},
		{"bad/generate.yaml", "bad/generate.yaml: document 1: metadata.generateName is not supported: a server-side apply needs metadata.name"},
		{"bad/scalar.yaml", "bad/scalar.yaml: document 1: a document must be an object with apiVersion, kind and metadata, not a string"},
		{"bad/nokind.yaml", "bad/nokind.yaml: document 1: kind is missing or not a string"},
		{"bad/nullitem.yaml", "bad/nullitem.yaml: document 1: items.0: an item must be an object, not a null"},
		{"bad/secret.yaml", "bad/secret.yaml: document 1: not YAML: yaml: line 6: mapping values are not allowed in this context"},
		{"bad/anchor.yaml", "bad/anchor.yaml: document 1: not YAML: yaml: unknown anchor (…) referenced"},
		{"bad/tag.yaml", "bad/tag.yaml: document 1: not YAML: yaml: cannot decode !!str (…) as a !!int"},
		{"bad/twice.yaml", "bad/twice.yaml: document 1: not YAML: "},
		{"empty", "manifest: empty holds no .yaml, .yml or .json file"},
		{"missing.yaml", "manifest: stat "},
		{"../outside.yaml", `inputs: manifest "../outside.yaml" must be a path inside the repository, relative to its root`},
		{"/etc/passwd", `inputs: manifest "/etc/passwd" must be a path inside the repository, relative to its root`},
	}
	for _, e := range errs {
		_, err := readManifest(root, e.rel)
		if err == nil || !strings.HasPrefix(err.Error(), e.want) {
			t.Errorf("%s: got %v, want an error starting with %q", e.rel, err, e.want)
			continue
		}
		if strings.Contains(err.Error(), canary) {
			t.Errorf("%s: the error holds the Secret value: %v", e.rel, err)
		}
	}
}
