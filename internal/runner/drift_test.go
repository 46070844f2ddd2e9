package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/captf/captf/internal/tfexec"
	"github.com/captf/captf/internal/tftest"
)

const driftCanary = "CANARY-DRIFT-SECRET-3c7d"

// driftRoot is a root module of captftest files, whose "infrastructure"
// (files under root) the test edits behind terraform's back.
type driftRoot struct {
	t          *testing.T
	dir, files string
	r          *Runner
}

func newDriftRoot(t *testing.T, bin tftest.Binary) *driftRoot {
	p := tftest.Provider(t)
	d := &driftRoot{t: t, dir: t.TempDir(), files: t.TempDir()}
	var env []string
	env = append(env, p.Env...)
	d.r = &Runner{TF: &tfexec.Terraform{Bin: bin.Path, Dir: d.dir, Env: env}}
	return d
}

// config writes main.tf: captftest's requirement and provider, then body.
func (d *driftRoot) config(body string) {
	d.t.Helper()
	src := fmt.Sprintf(`terraform {
  required_providers {
    captftest = {
      source  = %q
      version = %q
    }
  }
}
provider "captftest" {
  root = %q
}
`, tftest.ProviderSource, tftest.ProviderVersion, d.files) + body
	if err := os.WriteFile(filepath.Join(d.dir, "main.tf"), []byte(src), 0o644); err != nil {
		d.t.Fatal(err)
	}
}

func (d *driftRoot) apply() {
	d.t.Helper()
	if err := d.r.prepare(context.Background()); err != nil {
		d.t.Fatal(err)
	}
	if err := d.r.TF.ApplyAuto(context.Background()); err != nil {
		d.t.Fatal(err)
	}
}

func (d *driftRoot) drift() *Changes {
	d.t.Helper()
	got, err := d.r.Drift(context.Background())
	if err != nil {
		d.t.Fatal(err)
	}
	b, _ := json.Marshal(got)
	if strings.Contains(string(b), driftCanary) || strings.Contains(string(b), "edited") {
		d.t.Fatalf("the drift report holds a value: %s", b)
	}
	return got
}

const driftFiles = `
variable "out" {
  type    = string
  default = "one"
}
resource "captftest_file" "a" {
  directory = "d"
  name      = "a.txt"
  content   = "a"
  secret    = "` + driftCanary + `"
}
resource "captftest_file" "b" {
  directory = "d"
  name      = "b.txt"
  content   = "b"
}
resource "captftest_file" "c" {
  directory = "d"
  name      = "c.txt"
  content   = "c"
}
output "out" {
  value = var.out
}
`

// TestDrift checks a drift check on a real provider: edits outside
// terraform are counted by the action that would undo them, and an
// import, a move or an output change alone is no drift.
func TestDrift(t *testing.T) {
	for _, bin := range tftest.Binaries(t) {
		t.Run(bin.Name, func(t *testing.T) {
			d := newDriftRoot(t, bin)
			d.config(driftFiles)
			d.apply()
			if got := d.drift(); got.Total() != 0 {
				t.Fatalf("drift right after an apply: %+v", got)
			}

			// Edited content, a chmod (mode replaces) and a deleted file.
			if err := os.WriteFile(filepath.Join(d.files, "d/a.txt"), []byte("edited"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(filepath.Join(d.files, "d/b.txt"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(filepath.Join(d.files, "d/c.txt")); err != nil {
				t.Fatal(err)
			}
			got := d.drift()
			want := []string{"captftest_file.a (update)", "captftest_file.b (replace)", "captftest_file.c (create)"}
			if got.Update != 1 || got.Replace != 1 || got.Create != 1 || got.Delete != 0 || !slices.Equal(got.Resources, want) {
				t.Fatalf("drift %+v, want one update, replace and create: %v", got, want)
			}
			// The check changed no file: the drift is still there.
			if b, _ := os.ReadFile(filepath.Join(d.files, "d/a.txt")); string(b) != "edited" {
				t.Fatalf("a drift check changed a.txt to %q", b)
			}
			if again := d.drift(); again.Total() != 3 {
				t.Fatalf("second check: %+v", again)
			}
			// A drifted secret is an update, never shown.
			d.apply()
			if err := os.WriteFile(filepath.Join(d.files, "d/.a.txt.captftest-secret"), []byte("edited"), 0o600); err != nil {
				t.Fatal(err)
			}
			if got := d.drift(); got.Update != 1 || got.Total() != 1 {
				t.Fatalf("drifted secret: %+v", got)
			}
			d.apply()

			// Neither an output change, nor a move, nor an import is drift.
			if err := os.WriteFile(filepath.Join(d.dir, "terraform.tfvars"), []byte(`out = "two"`+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			moved := strings.Replace(driftFiles, `resource "captftest_file" "c"`, `resource "captftest_file" "renamed"`, 1) + `
moved {
  from = captftest_file.c
  to   = captftest_file.renamed
}
resource "captftest_file" "adopted" {
  directory = "d"
  name      = "adopted.txt"
  content   = "made by hand"
}
import {
  to = captftest_file.adopted
  id = "d/adopted.txt"
}
`
			if err := os.WriteFile(filepath.Join(d.files, "d/adopted.txt"), []byte("made by hand"), 0o644); err != nil {
				t.Fatal(err)
			}
			d.config(moved)
			if got := d.drift(); got.Total() != 0 || len(got.Resources) != 0 {
				t.Fatalf("an output change, a move and an import counted as drift: %+v", got)
			}
		})
	}
}

// TestCountChangesTruncates: at most MaxChangedResources addresses, the
// counts whole.
func TestCountChangesTruncates(t *testing.T) {
	var raw strings.Builder
	raw.WriteString(`{"format_version":"1.2","resource_changes":[`)
	for i := range 25 {
		if i > 0 {
			raw.WriteString(",")
		}
		fmt.Fprintf(&raw, `{"address":"x.r[%d]","mode":"managed","type":"x","name":"r","change":{"actions":["delete"]}}`, i)
	}
	raw.WriteString(`,{"address":"data.x.d","mode":"data","type":"x","name":"d","change":{"actions":["read"]}}`)
	raw.WriteString(`,{"address":"x.kept","mode":"managed","type":"x","name":"kept","change":{"actions":["no-op"],"importing":{"id":"i"}}}]}`)
	var p tfjson.Plan
	if err := json.Unmarshal([]byte(raw.String()), &p); err != nil {
		t.Fatal(err)
	}
	d := CountChanges(&p)
	if d.Delete != 25 || d.Total() != 25 || len(d.Resources) != MaxChangedResources || !d.Truncated {
		t.Fatalf("%+v", d)
	}
}

// TestGuarded checks the destructive-plan guard's apply on a real
// provider: an update applies, a replace or a delete applies nothing.
func TestGuarded(t *testing.T) {
	for _, bin := range tftest.Binaries(t) {
		t.Run(bin.Name, func(t *testing.T) {
			d := newDriftRoot(t, bin)
			d.config(driftFiles)
			d.apply()
			ctx := context.Background()

			d.config(strings.Replace(driftFiles, `content   = "b"`, `content   = "b2"`, 1))
			c, err := d.r.Guarded(ctx, nil)
			if err != nil || c.Update != 1 || c.Destructive() {
				t.Fatalf("an update: %+v, %v", c, err)
			}
			if b, _ := os.ReadFile(filepath.Join(d.files, "d/b.txt")); string(b) != "b2" {
				t.Fatalf("the update was not applied: %q", b)
			}

			applied := strings.Replace(driftFiles, `content   = "b"`, `content   = "b2"`, 1)
			replace := strings.Replace(applied, `content   = "b2"`, "content   = \"b2\"\n  mode      = \"0600\"", 1)
			c0 := strings.Index(applied, `resource "captftest_file" "c"`)
			remove := applied[:c0] + applied[strings.Index(applied, "output \"out\""):]
			for name, config := range map[string]string{"replace": replace, "delete": remove} {
				d.config(config)
				c, err := d.r.Guarded(ctx, nil)
				if !errors.Is(err, ErrDestructive) || ExitCode(err) != ExitPlanChanged || !c.Destructive() {
					t.Fatalf("%s: %+v, %v", name, c, err)
				}
				info, err := os.Stat(filepath.Join(d.files, "d/b.txt"))
				if err != nil || info.Mode().Perm() != 0o644 {
					t.Fatalf("%s: b.txt was touched: %v %v", name, info, err)
				}
				if _, err := os.Stat(filepath.Join(d.files, "d/c.txt")); err != nil {
					t.Fatalf("%s: c.txt was deleted: %v", name, err)
				}
			}
		})
	}
}
