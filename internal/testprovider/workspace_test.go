package testprovider_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/captf/captf/internal/tftest"
)

// workspace is a root module using captftest, run by one real binary, with
// the provider's root in a directory of the test's own.
type workspace struct {
	t    *testing.T
	bin  tftest.Binary
	dir  string // the root module
	root string // the provider's root directory
	env  []string
	// rootAttr names the root in the provider block; without it the
	// provider reads $CAPTF_TEST_PROVIDER_ROOT.
	rootAttr bool
}

func newWorkspace(t *testing.T, bin tftest.Binary) *workspace {
	t.Helper()
	p := tftest.Provider(t)
	return &workspace{t: t, bin: bin, dir: t.TempDir(), root: t.TempDir(), env: p.Env, rootAttr: true}
}

// config writes main.tf: the provider's requirement and block, then body.
func (w *workspace) config(body string) {
	w.t.Helper()
	provider := fmt.Sprintf("provider \"captftest\" {\n  root = %q\n}\n", w.root)
	if !w.rootAttr {
		provider = "provider \"captftest\" {}\n"
	}
	src := fmt.Sprintf(`terraform {
  required_providers {
    captftest = {
      source  = %q
      version = %q
    }
  }
}
`, tftest.ProviderSource, tftest.ProviderVersion) + provider + body
	if err := os.WriteFile(filepath.Join(w.dir, "main.tf"), []byte(src), 0o644); err != nil {
		w.t.Fatal(err)
	}
}

// run runs the binary and returns its standard output; an error fails the
// test.
func (w *workspace) run(args ...string) string {
	w.t.Helper()
	out, err := w.try(args...)
	if err != nil {
		w.t.Fatalf("%s %s: %v\n%s", w.bin.Name, strings.Join(args, " "), err, out)
	}
	return out
}

// try runs the binary and returns its output (stdout, then stderr) and
// error.
func (w *workspace) try(args ...string) (string, error) {
	w.t.Helper()
	cmd := exec.Command(w.bin.Path, args...)
	cmd.Dir = w.dir
	cmd.Env = append(os.Environ(), w.env...)
	if !w.rootAttr {
		cmd.Env = append(cmd.Env, tftest.ProviderRootEnv+"="+w.root)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String() + stderr.String(), err
}

func (w *workspace) init() { w.t.Helper(); w.run("init", "-no-color") }

func (w *workspace) apply() { w.t.Helper(); w.run("apply", "-auto-approve", "-no-color") }

// plan saves a plan (with extra flags such as -refresh-only) and returns
// it as show -json reads it, and the plan JSON itself.
func (w *workspace) plan(flags ...string) (*tfjson.Plan, []byte) {
	w.t.Helper()
	file := filepath.Join(w.t.TempDir(), "tfplan")
	w.run(append([]string{"plan", "-no-color", "-out=" + file}, flags...)...)
	raw := w.run("show", "-json", file)
	var p tfjson.Plan
	if err := json.Unmarshal([]byte(raw), &p); err != nil {
		w.t.Fatalf("show -json: %v", err)
	}
	if err := p.Validate(); err != nil {
		w.t.Fatalf("show -json: %v", err)
	}
	return &p, []byte(raw)
}

// path is a file under the provider's root.
func (w *workspace) path(rel string) string { return filepath.Join(w.root, rel) }

func (w *workspace) write(rel, content string) {
	w.t.Helper()
	if err := os.MkdirAll(filepath.Dir(w.path(rel)), 0o755); err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(w.path(rel), []byte(content), 0o644); err != nil {
		w.t.Fatal(err)
	}
}

func (w *workspace) read(rel string) string {
	w.t.Helper()
	b, err := os.ReadFile(w.path(rel))
	if err != nil {
		w.t.Fatal(err)
	}
	return string(b)
}

// change returns the planned change of addr, or nil.
func change(p *tfjson.Plan, addr string) *tfjson.ResourceChange {
	for _, rc := range p.ResourceChanges {
		if rc.Address == addr {
			return rc
		}
	}
	return nil
}

// drift returns the drift terraform noticed on addr, or nil.
func drift(p *tfjson.Plan, addr string) *tfjson.ResourceChange {
	for _, rc := range p.ResourceDrift {
		if rc.Address == addr {
			return rc
		}
	}
	return nil
}

// actions lists every resource change that is not a no-op, for messages
// and for "no changes".
func actions(p *tfjson.Plan) []string {
	var out []string
	for _, rc := range p.ResourceChanges {
		if !rc.Change.Actions.NoOp() || rc.Change.Importing != nil {
			out = append(out, fmt.Sprintf("%s %v", rc.Address, rc.Change.Actions))
		}
	}
	return out
}

// attr is the attribute name of the object v (a change's before or
// after), or nil.
func attr(v any, name string) any {
	m, _ := v.(map[string]any)
	return m[name]
}
