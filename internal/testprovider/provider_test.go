package testprovider_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	tfjson "github.com/hashicorp/terraform-json"

	"github.com/captf/captf/internal/testprovider"
	"github.com/captf/captf/internal/tftest"
)

// TestAddress: tftest installs the provider under the address and version
// the provider serves.
func TestAddress(t *testing.T) {
	got := []string{tftest.ProviderSource, tftest.ProviderVersion, tftest.ProviderRootEnv}
	want := []string{testprovider.Address, testprovider.Version, testprovider.RootEnv}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tftest's provider constants (-provider +tftest):\n%s", diff)
	}
}

// TestLifecycle walks one file through every kind of change with the real
// terraform and tofu, installed from the mirror: create, no changes, drift
// of the content seen by a refresh-only plan and undone by a plan, a file
// deleted behind terraform's back planned for creation, an in-place
// update, a replacement by a change of mode and by a chmod behind
// terraform's back, and destroy.
func TestLifecycle(t *testing.T) {
	for _, bin := range tftest.Binaries(t) {
		t.Run(bin.Name, func(t *testing.T) {
			w := newWorkspace(t, bin)
			w.config(file("hello", "0644"))
			w.init()

			p, _ := w.plan()
			if c := change(p, "captftest_file.a"); c == nil || !c.Change.Actions.Create() {
				t.Fatalf("first plan: %v, want a create", actions(p))
			}
			if got := attr(p.ResourceChanges[0].Change.AfterUnknown, "id"); got != true {
				t.Errorf("first plan: id unknown = %v, want true", got)
			}
			w.apply()
			if got := w.read("d/a.txt"); got != "hello" {
				t.Errorf("after create the file holds %q, want hello", got)
			}
			assertMode(t, w.path("d/a.txt"), 0o644)

			p, _ = w.plan()
			if got := actions(p); len(got) != 0 {
				t.Errorf("plan after create: %v, want no changes", got)
			}

			// Drift: the content edited outside terraform.
			w.write("d/a.txt", "edited")
			p, _ = w.plan("-refresh-only")
			d := drift(p, "captftest_file.a")
			if d == nil || !d.Change.Actions.Update() {
				t.Fatalf("refresh-only plan after an edit: drift %v, want an update of captftest_file.a", d)
			}
			if before, after := attr(d.Change.Before, "content"), attr(d.Change.After, "content"); before != "hello" || after != "edited" {
				t.Errorf("drift of content: %v → %v, want hello → edited", before, after)
			}
			p, _ = w.plan()
			c := change(p, "captftest_file.a")
			if c == nil || !c.Change.Actions.Update() {
				t.Fatalf("plan after an edit: %v, want an update", actions(p))
			}
			if before, after := attr(c.Change.Before, "content"), attr(c.Change.After, "content"); before != "edited" || after != "hello" {
				t.Errorf("update of content: %v → %v, want edited → hello", before, after)
			}
			w.apply()
			if got := w.read("d/a.txt"); got != "hello" {
				t.Errorf("after the update the file holds %q, want hello", got)
			}

			// Drift: the file deleted outside terraform.
			if err := os.Remove(w.path("d/a.txt")); err != nil {
				t.Fatal(err)
			}
			p, _ = w.plan("-refresh-only")
			if d := drift(p, "captftest_file.a"); d == nil || !d.Change.Actions.Delete() {
				t.Errorf("refresh-only plan after a delete: drift %v, want a delete of captftest_file.a", d)
			}
			p, _ = w.plan()
			if c := change(p, "captftest_file.a"); c == nil || !c.Change.Actions.Create() {
				t.Fatalf("plan after a delete: %v, want a create", actions(p))
			}
			w.apply()
			if got := w.read("d/a.txt"); got != "hello" {
				t.Errorf("after the re-create the file holds %q, want hello", got)
			}

			// In place: a new content.
			w.config(file("bye", "0644"))
			p, _ = w.plan()
			if c := change(p, "captftest_file.a"); c == nil || !c.Change.Actions.Update() {
				t.Fatalf("plan of a new content: %v, want an update in place", actions(p))
			}
			w.apply()
			if got := w.read("d/a.txt"); got != "bye" {
				t.Errorf("after the update the file holds %q, want bye", got)
			}

			// Replace: a new mode.
			w.config(file("bye", "0600"))
			p, _ = w.plan()
			c = change(p, "captftest_file.a")
			if c == nil || !c.Change.Actions.Replace() {
				t.Fatalf("plan of a new mode: %v, want a replace", actions(p))
			}
			if diff := cmp.Diff([]any{[]any{"mode"}}, c.Change.ReplacePaths); diff != "" {
				t.Errorf("replace paths (-want +got):\n%s", diff)
			}
			w.apply()
			assertMode(t, w.path("d/a.txt"), 0o600)

			// Replace: the mode changed outside terraform.
			if err := os.Chmod(w.path("d/a.txt"), 0o640); err != nil {
				t.Fatal(err)
			}
			p, _ = w.plan()
			if c := change(p, "captftest_file.a"); c == nil || !c.Change.Actions.Replace() {
				t.Fatalf("plan after a chmod: %v, want a replace", actions(p))
			}
			w.apply()
			assertMode(t, w.path("d/a.txt"), 0o600)

			w.run("destroy", "-auto-approve", "-no-color")
			if _, err := os.Stat(w.path("d/a.txt")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("after destroy: stat %v, want not exist", err)
			}
		})
	}
}

func file(content, mode string) string {
	return `
resource "captftest_file" "a" {
  directory = "d"
  name      = "a.txt"
  content   = "` + content + `"
  mode      = "` + mode + `"
}
`
}

func assertMode(t *testing.T, p string, want os.FileMode) {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != want {
		t.Errorf("%s has mode %04o, want %04o", p, got, want)
	}
}

// TestImport imports a file made outside terraform by its id, with the
// provider's root from $CAPTF_TEST_PROVIDER_ROOT: the plan imports without
// a change, the file is then in state and the next plan has no changes. A
// create over an existing file fails and says to import it.
func TestImport(t *testing.T) {
	for _, bin := range tftest.Binaries(t) {
		t.Run(bin.Name, func(t *testing.T) {
			w := newWorkspace(t, bin)
			w.rootAttr = false
			w.write("sub/dir/b.txt", "made by hand")
			w.write("sub/dir/.b.txt.captftest-secret", "hunter2")
			resource := `
resource "captftest_file" "b" {
  directory = "sub/dir"
  name      = "b.txt"
  content   = "made by hand"
  secret    = "hunter2"
}
`
			w.config(resource)
			w.init()
			if out, err := w.try("apply", "-auto-approve", "-no-color"); err == nil || !strings.Contains(strings.Join(strings.Fields(out), " "), "exists already: import it") {
				t.Errorf("create over an existing file: error %v, output:\n%s\nwant a failure saying to import it", err, out)
			}

			w.config(resource + `
import {
  to = captftest_file.b
  id = "sub/dir/b.txt"
}
`)
			p, _ := w.plan()
			c := change(p, "captftest_file.b")
			if c == nil || c.Change.Importing == nil || !c.Change.Actions.NoOp() {
				t.Fatalf("plan of the import: %v, want an import without change", actions(p))
			}
			if got := c.Change.Importing.ID; got != "sub/dir/b.txt" {
				t.Errorf("importing id %q, want sub/dir/b.txt", got)
			}
			w.apply()
			w.config(resource)
			p, _ = w.plan()
			if got := actions(p); len(got) != 0 {
				t.Errorf("plan after the import: %v, want no changes", got)
			}
			state := w.run("state", "list")
			if !strings.Contains(state, "captftest_file.b") {
				t.Errorf("state list after the import:\n%s\nwant captftest_file.b", state)
			}
		})
	}
}

// TestSensitive: the secret is marked sensitive in the plan JSON and
// stays out of the human plan, while the JSON holds it in plain text (so
// the check of the human output is not vacuous). A secret edited outside
// terraform is drift like any other attribute.
func TestSensitive(t *testing.T) {
	const secret = "correct-horse-battery-staple"
	for _, bin := range tftest.Binaries(t) {
		t.Run(bin.Name, func(t *testing.T) {
			w := newWorkspace(t, bin)
			w.config(`
resource "captftest_file" "s" {
  directory = "."
  name      = "s.txt"
  content   = "public"
  secret    = "` + secret + `"
}
`)
			w.init()
			human := w.run("plan", "-no-color")
			if strings.Contains(human, secret) {
				t.Errorf("human plan shows the secret:\n%s", human)
			}
			if !strings.Contains(human, "(sensitive value)") {
				t.Errorf("human plan does not mark the secret:\n%s", human)
			}
			p, raw := w.plan()
			c := change(p, "captftest_file.s")
			if c == nil {
				t.Fatalf("plan: %v, want captftest_file.s", actions(p))
			}
			if got := attr(c.Change.AfterSensitive, "secret"); got != true {
				t.Errorf("after_sensitive.secret = %v, want true", got)
			}
			if got := attr(c.Change.AfterSensitive, "content"); got != nil {
				t.Errorf("after_sensitive.content = %v, want unmarked", got)
			}
			if !strings.Contains(string(raw), secret) {
				t.Errorf("plan JSON lacks the secret: the human plan check proves nothing")
			}
			w.apply()
			var state tfjson.State
			if err := json.Unmarshal([]byte(w.run("show", "-json")), &state); err != nil {
				t.Fatalf("show -json of the state: %v", err)
			}
			if rs := state.Values.RootModule.Resources; len(rs) != 1 || attr(mapOf(rs[0].SensitiveValues), "secret") != true {
				t.Errorf("state: resources %v, want captftest_file.s with sensitive_values.secret true", rs)
			}
			if got := w.read(".s.txt.captftest-secret"); got != secret {
				t.Errorf("secret file holds %q, want the secret", got)
			}

			w.write(".s.txt.captftest-secret", "tampered")
			human = w.run("plan", "-no-color")
			if strings.Contains(human, secret) || strings.Contains(human, "tampered") {
				t.Errorf("human plan of a drifted secret shows a value:\n%s", human)
			}
			p, _ = w.plan()
			if c := change(p, "captftest_file.s"); c == nil || !c.Change.Actions.Update() {
				t.Errorf("plan after the secret was edited: %v, want an update", actions(p))
			}
			w.run("destroy", "-auto-approve", "-no-color")
			if _, err := os.Stat(w.path(".s.txt.captftest-secret")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("after destroy the secret file: stat %v, want not exist", err)
			}
		})
	}
}

// mapOf decodes raw JSON (sensitive_values) for attr.
func mapOf(raw json.RawMessage) any {
	var v any
	_ = json.Unmarshal(raw, &v)
	return v
}
