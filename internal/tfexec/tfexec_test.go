package tfexec_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/captf/captf/internal/tfexec"
	"github.com/captf/captf/internal/tftest"
)

// TestPlanChangesAndOutput drives the real binaries: plan -detailed-exitcode
// tells a plan with changes from one without, and output -json streams the
// outputs, none before the first apply.
func TestPlanChangesAndOutput(t *testing.T) {
	for _, bin := range tftest.Binaries(t) {
		t.Run(bin.Name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			main := `output "n" { value = 12345678901234567891 }` + "\n" + `resource "terraform_data" "a" { input = "x" }` + "\n"
			if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(main), 0o644); err != nil {
				t.Fatal(err)
			}
			tf := &tfexec.Terraform{Bin: bin.Path, Dir: dir, Env: tftest.Env(t)}
			if err := tf.Init(ctx); err != nil {
				t.Fatal(err)
			}
			outputs := func() string {
				t.Helper()
				var got []byte
				err := tf.Output(ctx, func(r io.Reader) error {
					var err error
					got, err = io.ReadAll(r)
					return err
				})
				if err != nil {
					t.Fatalf("output: %v", err)
				}
				var v map[string]struct {
					Value json.RawMessage `json:"value"`
				}
				if err := json.Unmarshal(got, &v); err != nil {
					t.Fatalf("output json: %v", err)
				}
				if len(v) == 0 {
					return "none"
				}
				return string(v["n"].Value)
			}
			if got := outputs(); got != "none" {
				t.Errorf("outputs before any apply: %s, want none", got)
			}
			plan := filepath.Join(t.TempDir(), "p.tfplan")
			changes, err := tf.PlanChanges(ctx, plan)
			if err != nil || !changes {
				t.Fatalf("plan of a new resource: changes %v, error %v; want changes", changes, err)
			}
			if err := tf.Apply(ctx, plan); err != nil {
				t.Fatal(err)
			}
			changes, err = tf.PlanChanges(ctx, plan)
			if err != nil || changes {
				t.Fatalf("plan after the apply: changes %v, error %v; want none", changes, err)
			}
			if diff := cmp.Diff("12345678901234567891", outputs()); diff != "" {
				t.Errorf("output n (-want +got):\n%s", diff)
			}
			if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte("resource \"terraform_data\" {\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if changes, err = tf.PlanChanges(ctx, plan); err == nil {
				t.Errorf("plan of a broken root: changes %v and no error", changes)
			}
		})
	}
}

func TestDataDir(t *testing.T) {
	t.Setenv("TF_DATA_DIR", "")
	for _, tc := range []struct {
		reason string
		env    []string
		want   string
	}{
		{"the default", nil, "/root/m/.terraform"},
		{"relative to the root", []string{"TF_DATA_DIR=data"}, "/root/m/data"},
		{"absolute, the last one wins", []string{"TF_DATA_DIR=data", "TF_DATA_DIR=/d"}, "/d"},
	} {
		tf := &tfexec.Terraform{Dir: "/root/m", Env: tc.env}
		if got := tf.DataDir(); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.reason, got, tc.want)
		}
	}
}
