package runner

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestPassDeclared: of the contracts' optional variables, the root passes
// to the module only those the module declares; required ones and the
// spec's own variables are passed whether declared or not (terraform names
// an undeclared one).
func TestPassDeclared(t *testing.T) {
	module, work := t.TempDir(), t.TempDir()
	write := func(dir, name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(module, "main.tf", `variable "captf_machine_name" {}
variable "captf_exports" { type = any }
`)
	write(module, "more.tf.json", `{"variable":{"captf_control_plane":{}}}`)
	write(module, "broken.tf", `variable "captf_failure_domain" {`)
	call := map[string]any{"source": "./module"}
	for _, n := range []string{"captf_machine_name", "captf_exports", "captf_control_plane", "captf_failure_domain", "captf_bootstrap_data", "size"} {
		call[n] = "${var." + n + "}"
	}
	b, _ := json.Marshal(map[string]any{"module": map[string]any{"main": call}, "output": map[string]any{"captf_inputs_hash": map[string]any{"value": "h2:x"}}})
	write(work, "main.tf.json", string(b))

	j := &Job{Module: module, Workdir: work}
	if err := j.passDeclared(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(work, "main.tf.json"))
	if err != nil {
		t.Fatal(err)
	}
	var root struct {
		Module map[string]map[string]any    `json:"module"`
		Output map[string]map[string]string `json:"output"`
	}
	if err := json.Unmarshal(got, &root); err != nil {
		t.Fatal(err)
	}
	var args []string
	for n := range root.Module["main"] {
		args = append(args, n)
	}
	slices.Sort(args)
	// captf_failure_domain is declared only in a file that does not parse.
	want := []string{"captf_bootstrap_data", "captf_control_plane", "captf_exports", "captf_machine_name", "size", "source"}
	if !slices.Equal(args, want) {
		t.Errorf("module arguments %v, want %v", args, want)
	}
	if root.Output["captf_inputs_hash"]["value"] != "h2:x" {
		t.Errorf("the root's output changed: %v", root.Output)
	}
}
