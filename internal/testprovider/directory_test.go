package testprovider_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/captf/captf/internal/tftest"
)

// TestDirectory: captftest_directory lists a directory's files, those a
// resource made and those made behind terraform's back, sorted and
// without hidden ones; a refresh-only apply brings an output that reads
// it up to date, and writes no new state when nothing changed (what a
// pool's membership refresh relies on), with the real terraform and tofu.
func TestDirectory(t *testing.T) {
	for _, bin := range tftest.Binaries(t) {
		t.Run(bin.Name, func(t *testing.T) {
			w := newWorkspace(t, bin)
			w.config(`
resource "captftest_file" "m" {
  directory = "pool"
  name      = "b.txt"
  content   = "member"
  secret    = "s"
}

data "captftest_directory" "pool" {
  directory  = "pool"
  depends_on = [captftest_file.m]
}

output "names" {
  value = data.captftest_directory.pool.names
}
`)
			w.init()
			w.apply()
			names := func() []string {
				t.Helper()
				var out []string
				if err := json.Unmarshal([]byte(w.run("output", "-json", "names")), &out); err != nil {
					t.Fatal(err)
				}
				return out
			}
			serial := func() int {
				t.Helper()
				var st struct{ Serial int }
				b, err := os.ReadFile(filepath.Join(w.dir, "terraform.tfstate"))
				if err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal(b, &st); err != nil {
					t.Fatal(err)
				}
				return st.Serial
			}
			if got := names(); !slices.Equal(got, []string{"b.txt"}) {
				t.Errorf("after the apply: %v, want [b.txt] (no hidden secret file)", got)
			}

			w.write("pool/a.txt", "made by an autoscaler")
			w.run("apply", "-refresh-only", "-auto-approve", "-no-color")
			if got := names(); !slices.Equal(got, []string{"a.txt", "b.txt"}) {
				t.Errorf("after a refresh-only apply: %v, want [a.txt b.txt]", got)
			}
			before := serial()
			w.run("apply", "-refresh-only", "-auto-approve", "-no-color")
			if after := serial(); after != before {
				t.Errorf("a refresh-only apply with nothing changed wrote serial %d after %d", after, before)
			}
		})
	}
}
