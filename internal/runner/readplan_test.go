package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/captf/captf/internal/tfexec"
	"github.com/captf/captf/internal/tftest"
	"github.com/captf/captf/pkg/fingerprint"
)

// readPlanCanary is a value of the configuration that must not reach the
// schema cache or any error.
const readPlanCanary = "canary-7f3e9a"

// TestReadPlanMatchesShow holds captf's own reading of terraform's saved
// plan files to terraform show -json: on plans of every action (create,
// update, both replacements, delete, read, forget, import, move, no-op
// outputs) over values of every shape (captftest_shape: numbers, sets,
// maps, a dynamic value, nested attributes and blocks of every nesting,
// sensitive values at every depth, values known after apply), with
// variables set and defaulted, providers in modules and aliases, the
// hash, every change's digest and paths, and what runs at apply outside
// the plan must come out the same both ways, from the same plan file;
// with terraform and with tofu.
func TestReadPlanMatchesShow(t *testing.T) {
	for _, bin := range tftest.Binaries(t) {
		t.Run(bin.Name, func(t *testing.T) { readPlanMatchesShow(t, bin) })
	}
}

func readPlanMatchesShow(t *testing.T, bin tftest.Binary) {
	p := tftest.Provider(t)
	ctx := context.Background()
	dir, files, other := t.TempDir(), t.TempDir(), t.TempDir()
	key := []byte(strings.Repeat("k", 32))
	var stderr bytes.Buffer
	tf := &tfexec.Terraform{Bin: bin.Path, Dir: dir, Env: p.Env, Stderr: &stderr}
	r := &Runner{TF: tf, RuntimeKey: key, Schemas: &SchemaCache{Path: filepath.Join(dir, StateDir, SchemaCacheFile)}}
	var err error
	if r.Hasher, err = fingerprint.New(key); err != nil {
		t.Fatal(err)
	}
	r.Hasher.Detail = true
	r.Hasher.Sections = []string{"variables", "configuration"}

	write := func(name, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	header := fmt.Sprintf(`terraform {
  required_providers {
    captftest = { source = %q, version = %q }
  }
}
provider "captftest" {
  root = %q
}
provider "captftest" {
  alias = "other"
  root  = var.other_root
}
variable "other_root" {
  type    = string
  default = %q
}
variable "set_var" {
  type = object({ a = number, b = optional(string, "dflt") })
}
variable "secret_in" {
  type      = string
  sensitive = true
  default   = %q
}
`, tftest.ProviderSource, tftest.ProviderVersion, files, other, readPlanCanary)
	write("mod/main.tf", `terraform {
  required_providers {
    captftest = { source = "`+tftest.ProviderSource+`" }
  }
}
variable "n" {
  type = number
}
resource "captftest_shape" "m" {
  name = "m-${var.n}"
  size = var.n
}
output "id" {
  value = captftest_shape.m.id
}
`)

	// plan plans with the variables file and extra arguments, compares,
	// and returns the plan file.
	plan := func(extra ...string) (string, *fingerprint.Result) {
		t.Helper()
		f := filepath.Join(t.TempDir(), "plan.tfplan")
		if err := tf.Plan(ctx, f, append([]string{"-var-file=" + filepath.Join(dir, "vars.tfvars")}, extra...)...); err != nil {
			t.Fatalf("%v\n%s", err, stderr.String())
		}
		var viaShow *fingerprint.Result
		err := tf.Show(ctx, f, func(rd io.Reader) error {
			var err error
			viaShow, err = r.Hasher.Compute(rd)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		viaRead, providers, err := r.readPlan(ctx, f, r.Schemas.read(tf))
		if err != nil {
			t.Fatalf("captf's own reading: %v", err)
		}
		if !reflect.DeepEqual(viaRead.Report, viaShow.Report) {
			t.Fatalf("report:\n read %+v\n show %+v", viaRead.Report, viaShow.Report)
		}
		a, b := slices.Collect(viaRead.Changes.All()), slices.Collect(viaShow.Changes.All())
		if !reflect.DeepEqual(a, b) {
			ja, _ := json.MarshalIndent(a, "", " ")
			jb, _ := json.MarshalIndent(b, "", " ")
			t.Fatalf("changes:\n read %s\n show %s", ja, jb)
		}
		ra, err := r.bindRuntime(viaRead, providers)
		if err != nil {
			t.Fatal(err)
		}
		rb, err := r.bindRuntime(viaShow, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(ra, rb) {
			t.Fatalf("what runs at apply:\n read %+v\n show %+v", ra, rb)
		}
		return f, viaShow
	}
	seen := map[string]bool{}
	note := func(res *fingerprint.Result) {
		for c := range res.Changes.All() {
			seen[c.Actions] = true
		}
	}
	apply := func(f string) {
		t.Helper()
		if err := tf.Apply(ctx, f); err != nil {
			t.Fatalf("%v\n%s", err, stderr.String())
		}
	}

	write("vars.tfvars", `set_var = { a = 1 }`)
	write("main.tf", header+`
resource "terraform_data" "d" {
  count = 3
  input = { name = "d${count.index}", n = 1.5, big = 12345678901234567890, s = var.secret_in, v = var.set_var }
  provisioner "local-exec" {
    command = "true"
  }
}
resource "captftest_shape" "s" {
  name        = "one"
  replace_key = "k1"
  size        = 3
  ratio       = 0.1
  enabled     = true
  flags       = [true, false]
  tags        = { a = "1", "b<&>" = "x\u2028y" }
  labels      = ["x", "y"]
  password    = "pw1"
  payload     = { k = [1, "two", true] }
  settings    = { mode = "m", size = 10, token = "t1" }
  rules       = [{ port = 80, secret = "r1" }, { port = 443 }]
  members     = [{ name = "a", key = "k" }, { name = "b" }]
  endpoints   = { e1 = { url = "http://x" } }
  disk {
    size  = 1
    label = "l"
    key   = "dk"
  }
  disk {
    size = 2
  }
  group {
    name  = "g1"
    token = "gt"
  }
  group {
    name = "g2"
  }
}
resource "captftest_shape" "old" {
  name = "old"
}
resource "captftest_shape" "r1" {
  name        = "r1"
  replace_key = "a"
}
resource "captftest_shape" "r2" {
  name        = "r2"
  replace_key = "a"
  lifecycle {
    create_before_destroy = true
  }
}
resource "captftest_file" "gone" {
  directory = "."
  name      = "gone.txt"
  content   = "g"
}
resource "captftest_file" "f" {
  provider  = captftest.other
  directory = "."
  name      = "f.txt"
  content   = "c"
  secret    = "fs"
}
module "m" {
  source    = "./mod"
  n         = 2
  providers = { captftest = captftest.other }
}
data "terraform_remote_state" "r" {
  backend  = "local"
  config   = { path = "${path.module}/remote.tfstate" }
  defaults = { x = captftest_shape.s.id }
}
output "plain" {
  value = captftest_shape.s.name
}
output "unknown" {
  value = captftest_shape.s.id
}
output "secret" {
  value     = var.secret_in
  sensitive = true
}
output "obj" {
  value = { a = terraform_data.d[0].output, list = captftest_shape.s.computed, m = module.m.id }
}
`)
	write("remote.tfstate", `{"version": 4, "serial": 1, "lineage": "l", "outputs": {"x": {"value": "v", "type": "string"}}, "resources": []}`)
	if err := tf.Init(ctx); err != nil {
		t.Fatal(err)
	}
	f, res := plan()
	note(res)
	apply(f)

	if err := os.WriteFile(filepath.Join(files, "imp.txt"), []byte("imported"), 0o644); err != nil {
		t.Fatal(err)
	}
	write("vars.tfvars", `set_var = { a = 2, b = "x" }`)
	write("main.tf", header+`
resource "terraform_data" "d" {
  count = 2
  input = { name = "d${count.index}", n = 2.5e-7, big = 1e30, s = var.secret_in, v = var.set_var }
  provisioner "local-exec" {
    command = "true"
  }
}
resource "captftest_shape" "s" {
  name        = "two"
  replace_key = "k1"
  size        = 123456789012345678901234567890
  ratio       = 1e-7
  flags       = [false]
  tags        = { a = "2", c = "" }
  labels      = ["y", "z"]
  password    = "pw2"
  payload     = { k = { nested = "object now" } }
  settings    = { mode = "m", size = 11, token = "t2" }
  rules       = [{ port = 80 }, { port = 444, secret = "r2" }]
  members     = [{ name = "a", key = "k2" }, { name = "c" }]
  endpoints   = { e2 = { url = "http://y" } }
  disk {
    size  = 1
    label = "l2"
    key   = "dk"
  }
  group {
    name  = "g1"
    token = "gt2"
  }
  timeouts {
    create = "5m"
  }
}
moved {
  from = captftest_shape.old
  to   = captftest_shape.renamed
}
resource "captftest_shape" "renamed" {
  name = "old"
}
resource "captftest_shape" "r1" {
  name        = "r1"
  replace_key = "b"
}
resource "captftest_shape" "r2" {
  name        = "r2"
  replace_key = "b"
  lifecycle {
    create_before_destroy = true
  }
}
removed {
  from = captftest_file.gone
  lifecycle {
    destroy = false
  }
}
import {
  to = captftest_file.imp
  id = "imp.txt"
}
resource "captftest_file" "imp" {
  directory = "."
  name      = "imp.txt"
  content   = "imported"
}
resource "captftest_file" "f" {
  provider  = captftest.other
  directory = "."
  name      = "f.txt"
  content   = "c2"
  secret    = "fs2"
}
module "m" {
  source    = "./mod"
  n         = 3
  providers = { captftest = captftest.other }
}
output "plain" {
  value = captftest_shape.s.name
}
output "unknown" {
  value = captftest_shape.s.id
}
output "secret" {
  value     = "${var.secret_in}-2"
  sensitive = true
}
output "obj" {
  value = { a = terraform_data.d[0].output, list = captftest_shape.s.computed, m = module.m.id }
}
`)
	f, res = plan()
	note(res)
	apply(f)
	// Moved and refreshed: a plan whose only changes are outputs, then
	// the destroy plan.
	_, res = plan("-var=secret_in=other")
	note(res)
	_, res = plan("-destroy")
	note(res)

	for _, want := range []string{"create", "update", "delete", "delete,create", "create,delete", "read", "forget", "no-op"} {
		if !seen[want] {
			t.Errorf("no plan had a change of actions %q: the test covers less than it says (%v)", want, seen)
		}
	}
	cache, err := os.ReadFile(r.Schemas.Path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(cache), readPlanCanary) || strings.Contains(string(cache), "pw1") {
		t.Fatal("the schema cache holds a value")
	}
}

// TestSchemaKey: the schema cache's key moves with the lock file and the
// CLI config, not with the configuration; with dev_overrides there is
// none, so nothing is cached.
func TestSchemaKey(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "terraform.rc")
	tf := &tfexec.Terraform{Bin: tftest.Terraform(t).Path, Dir: dir, Env: []string{"TF_CLI_CONFIG_FILE=" + cfg}}
	write := func(path, body string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	key := func() string {
		t.Helper()
		k, err := schemaKey(tf)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write(cfg, "disable_checkpoint = true\n")
	write(filepath.Join(dir, "main.tf"), `resource "terraform_data" "a" {}`)
	first := key()
	write(filepath.Join(dir, "main.tf"), `resource "terraform_data" "b" {}`)
	if key() != first || first == "" {
		t.Fatal("the key moved with the configuration")
	}
	write(filepath.Join(dir, ".terraform.lock.hcl"), "# lock\n")
	if key() == first {
		t.Fatal("the key did not move with the lock file")
	}
	write(cfg, "provider_installation {\n  dev_overrides {\n    \"hashicorp/aws\" = \"/opt/aws\"\n  }\n  direct {}\n}\n")
	if k := key(); k != "" {
		t.Fatalf("with dev_overrides, key %q", k)
	}
}

func TestReadable(t *testing.T) {
	for v, want := range map[string]bool{
		"Terraform v1.11.4": true, "Terraform v1.5.0": true, "Terraform v1.4.7": false, "Terraform v2.0.0": false,
		"OpenTofu v1.12.6": true, "OpenTofu v1.6.0": true, "OpenTofu v1.5.9": false, "": false, "Terraform vx": false,
	} {
		if got := readable(v); got != want {
			t.Errorf("readable(%q) = %v", v, got)
		}
	}
}
