package planconfig

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var key = []byte("0123456789abcdef0123456789abcdef")

// files writes a configuration: paths relative to the root, the modules
// manifest of init for module "m" in ./mod.
func files(t *testing.T, fs map[string]string) string {
	t.Helper()
	root := t.TempDir()
	fs[".terraform/modules/modules.json"] = `{"Modules":[{"Key":"","Source":"","Dir":"."},{"Key":"m","Source":"./mod","Dir":"mod"}]}`
	for p, s := range fs {
		path := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const rootTF = `
variable "word" {}
locals {
  msg = "say ${var.word}"
}
provider "aws" {
  region = "eu-west-1"
}
provider "aws" {
  alias  = "west"
  region = "us-west-2"
}
resource "aws_instance" "a" {
  connection {
    host = "h"
  }
  provisioner "local-exec" {
    command = "echo ${local.msg}"
  }
  provisioner "local-exec" {
    when    = destroy
    command = "echo bye"
  }
}
resource "aws_instance" "b" {
  provider = aws.west
}
removed {
  from = aws_instance.gone
  provisioner "local-exec" {
    when    = destroy
    command = "echo removed"
  }
}
module "m" {
  source = "./mod"
  n      = 2
  word   = var.word
}
`

const modTF = `
variable "n" {}
variable "word" {}
resource "aws_instance" "c" {
  count = var.n
  provisioner "remote-exec" {
    inline = ["echo ${var.word} ${count.index}"]
  }
}
`

// configJSON is the configuration section terraform writes for rootTF.
const configJSON = `{
  "provider_config": {
    "aws": {"name": "aws", "full_name": "registry.terraform.io/hashicorp/aws"},
    "aws.west": {"name": "aws", "full_name": "registry.terraform.io/hashicorp/aws", "alias": "west"}
  },
  "root_module": {
    "resources": [
      {"mode": "managed", "type": "aws_instance", "name": "a", "provider_config_key": "aws"},
      {"mode": "managed", "type": "aws_instance", "name": "b", "provider_config_key": "aws.west"}
    ],
    "module_calls": {"m": {"module": {"resources": [
      {"mode": "managed", "type": "aws_instance", "name": "c", "provider_config_key": "aws"}
    ]}}}
  }
}`

func bind(t *testing.T, root, vars string, changes ...Change) map[string]string {
	t.Helper()
	blocks, err := Bind(key, Input{
		Root: root, DataDir: filepath.Join(root, ".terraform"), Changes: changes,
		Variables: json.RawMessage(vars), Configuration: json.RawMessage(configJSON),
	})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, b := range blocks {
		if strings.Contains(b.Address+b.Block, "echo") {
			t.Errorf("a block's name holds configuration: %+v", b)
		}
		out[b.Address+" | "+b.Block] = b.Digest
	}
	return out
}

func names(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

func sortStrings(s []string) []string {
	slices.Sort(s)
	return s
}

func ch(addr string, actions ...string) Change { return Change{Address: addr, Actions: actions} }

const vars = `{"word":{"value":"CANARY-1"}}`

const awsDefault = `provider["registry.terraform.io/hashicorp/aws"] | provider "aws"`

// TestWhatRuns: which blocks an action runs, and their names.
func TestWhatRuns(t *testing.T) {
	root := files(t, map[string]string{"main.tf": rootTF, "mod/main.tf": modTF})
	for _, tc := range []struct {
		reason string
		change Change
		want   []string
	}{
		{"a create runs the create-time provisioner and the connection", ch("aws_instance.a", "create"),
			[]string{"aws_instance.a | connection", `aws_instance.a | provisioner "local-exec" #0`, awsDefault}},
		{"a delete runs the destroy-time provisioner", ch("aws_instance.a", "delete"),
			[]string{"aws_instance.a | connection", `aws_instance.a | provisioner "local-exec" #1`, awsDefault}},
		{"a replace runs both", ch("aws_instance.a", "delete", "create"),
			[]string{"aws_instance.a | connection", `aws_instance.a | provisioner "local-exec" #0`, `aws_instance.a | provisioner "local-exec" #1`, awsDefault}},
		{"an update runs no provisioner, only the provider", ch("aws_instance.a", "update"), []string{awsDefault}},
		{"a no-op runs nothing", ch("aws_instance.a", "no-op"), nil},
		{"the aliased provider", ch("aws_instance.b", "update"),
			[]string{`provider["registry.terraform.io/hashicorp/aws"].west | provider "aws"`}},
		{"an instance of a module with count", ch(`module.m.aws_instance.c[1]`, "create"),
			[]string{`module.m.aws_instance.c[1] | provisioner "remote-exec" #0`, awsDefault}},
		{"a removed block's destroy-time provisioner; every configuration of the implied provider", ch("aws_instance.gone", "delete"),
			[]string{`aws_instance.gone | removed provisioner "local-exec" #0`, awsDefault, `provider["registry.terraform.io/hashicorp/aws"].west | provider "aws"`}},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			if d := cmp.Diff(tc.want, names(bind(t, root, vars, tc.change))); d != "" {
				t.Errorf("blocks (-want +got):\n%s", d)
			}
		})
	}
}

// TestDigestsMove: a digest moves with its block's source and with what
// its references resolve to, and with nothing else.
func TestDigestsMove(t *testing.T) {
	changes := []Change{ch("aws_instance.a", "delete", "create"), ch("aws_instance.b", "update"), ch("module.m.aws_instance.c[0]", "create"), ch(`module.m.aws_instance.c[1]`, "create")}
	base := bind(t, files(t, map[string]string{"main.tf": rootTF, "mod/main.tf": modTF}), vars, changes...)
	for _, tc := range []struct {
		reason   string
		root     string
		mod      string
		vars     string
		moved    []string
		unmoved  string
		keyIsNew bool
	}{
		{reason: "a provisioner's command", root: strings.Replace(rootTF, `echo ${local.msg}`, `echo ${local.msg} more`, 1),
			moved: []string{`aws_instance.a | provisioner "local-exec" #0`}},
		{reason: "a local it references", root: strings.Replace(rootTF, `"say ${var.word}"`, `"shout ${var.word}"`, 1),
			moved: []string{`aws_instance.a | provisioner "local-exec" #0`}},
		{reason: "a variable value it references through a local and a module argument", vars: `{"word":{"value":"CANARY-2"}}`,
			moved: []string{`aws_instance.a | provisioner "local-exec" #0`, `module.m.aws_instance.c[0] | provisioner "remote-exec" #0`, `module.m.aws_instance.c[1] | provisioner "remote-exec" #0`}},
		{reason: "a destroy-time provisioner", root: strings.Replace(rootTF, `echo bye`, `echo farewell`, 1),
			moved: []string{`aws_instance.a | provisioner "local-exec" #1`}},
		{reason: "the connection block", root: strings.Replace(rootTF, `host = "h"`, `host = "g"`, 1),
			moved: []string{"aws_instance.a | connection"}},
		{reason: "a provider argument", root: strings.Replace(rootTF, `"us-west-2"`, `"us-east-1"`, 1),
			moved: []string{`provider["registry.terraform.io/hashicorp/aws"].west | provider "aws"`}},
		{reason: "a provisioner in a module with count", mod: strings.Replace(modTF, `echo ${var.word}`, `echo X ${var.word}`, 1),
			moved: []string{`module.m.aws_instance.c[0] | provisioner "remote-exec" #0`, `module.m.aws_instance.c[1] | provisioner "remote-exec" #0`}},
		{reason: "the module argument's source", root: strings.Replace(rootTF, `word   = var.word`, `word   = "${var.word}!"`, 1),
			moved: []string{`module.m.aws_instance.c[0] | provisioner "remote-exec" #0`, `module.m.aws_instance.c[1] | provisioner "remote-exec" #0`}},
		{reason: "an unrelated argument moves nothing", mod: strings.Replace(modTF, `count = var.n`, `count = var.n + 0`, 1)},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			root, mod, v := rootTF, modTF, vars
			if tc.root != "" {
				root = tc.root
			}
			if tc.mod != "" {
				mod = tc.mod
			}
			if tc.vars != "" {
				v = tc.vars
			}
			got := bind(t, files(t, map[string]string{"main.tf": root, "mod/main.tf": mod}), v, changes...)
			if d := cmp.Diff(names(base), names(got)); d != "" {
				t.Fatalf("blocks (-before +after):\n%s", d)
			}
			var moved []string
			for k, d := range got {
				if base[k] != d {
					moved = append(moved, k)
				}
			}
			if d := cmp.Diff(sortStrings(tc.moved), sortStrings(moved)); d != "" {
				t.Errorf("moved (-want +got):\n%s", d)
			}
		})
	}
}

// TestKeyed: the digests are keyed: another key, other digests.
func TestKeyed(t *testing.T) {
	root := files(t, map[string]string{"main.tf": rootTF, "mod/main.tf": modTF})
	in := Input{Root: root, DataDir: filepath.Join(root, ".terraform"), Changes: []Change{ch("aws_instance.a", "create")},
		Variables: json.RawMessage(vars), Configuration: json.RawMessage(configJSON)}
	a, err := Bind(key, in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Bind([]byte("another key, another key, another key"), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) == 0 || a[0].Digest == b[0].Digest {
		t.Errorf("the same digest under two keys: %+v %+v", a, b)
	}
}

func TestCompare(t *testing.T) {
	approved := []Block{{"a", "x", "1"}, {"a", "y", "2"}, {"b", "x", "3"}}
	fresh := []Block{{"a", "x", "1"}, {"a", "y", "9"}, {"c", "x", "4"}}
	want := []Moved{{"a", "y", "changed"}, {"c", "x", "added"}}
	if d := cmp.Diff(want, Compare(approved, fresh)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestParseAddress(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want resourceAddr
	}{
		{"aws_instance.a", resourceAddr{"", "managed", "aws_instance", "a"}},
		{"aws_instance.a[3]", resourceAddr{"", "managed", "aws_instance", "a"}},
		{`module.x["a.b]"].module.y[0].data.t.n["k.\"]"]`, resourceAddr{"x.y", "data", "t", "n"}},
	} {
		got, err := parseAddress(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.in, got, tc.want)
		}
	}
	for _, bad := range []string{"", "module.x", "aws_instance", `aws_instance.a["x`, "aws_instance.a[1]x"} {
		if _, err := parseAddress(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
