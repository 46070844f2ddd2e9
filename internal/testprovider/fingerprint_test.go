package testprovider_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/captf/captf/internal/tftest"
	"github.com/captf/captf/pkg/fingerprint"
)

// TestFingerprintOfRealDrift: captf's plan hash of plans made by the real
// binaries against a real drifted file. The same drift hashes alike in two
// plans (timestamps and the like are not bound); another drifted content
// moves the hash, and Compare names the path; a drifted secret and two
// configured secrets move the hash too, while neither the report nor the
// Detail holds a secret, which the plan JSON does hold.
func TestFingerprintOfRealDrift(t *testing.T) {
	key := bytes.Repeat([]byte("k"), fingerprint.MinKeySize)
	for _, bin := range tftest.Binaries(t) {
		t.Run(bin.Name, func(t *testing.T) {
			w := newWorkspace(t, bin)
			resource := func(secret string) string {
				return `
resource "captftest_file" "a" {
  directory = "d"
  name      = "a.txt"
  content   = "hello"
  secret    = "` + secret + `"
}
`
			}
			w.config(resource("alpha-secret"))
			w.init()
			w.apply()

			// hash plans and checks that no result holds a secret.
			secrets := []string{"alpha-secret", "beta-secret", "gamma-secret", "drifted-secret-1", "drifted-secret-2"}
			hash := func(what string) (*fingerprint.Result, []byte) {
				t.Helper()
				p, raw := w.plan()
				if c := change(p, "captftest_file.a"); c == nil || !c.Change.Actions.Update() {
					t.Fatalf("%s: plan %v, want an update of captftest_file.a", what, actions(p))
				}
				h, err := fingerprint.New(key)
				if err != nil {
					t.Fatal(err)
				}
				h.Detail = true
				res, err := h.Compute(bytes.NewReader(raw))
				if err != nil {
					t.Fatalf("%s: fingerprint: %v", what, err)
				}
				var changes []fingerprint.Change
				for c := range res.Changes.All() {
					changes = append(changes, c)
				}
				out, err := json.Marshal(struct {
					Report  fingerprint.Report
					Changes []fingerprint.Change
					Ignored []string
				}{res.Report, changes, res.Ignored})
				if err != nil {
					t.Fatal(err)
				}
				for _, s := range secrets {
					if strings.Contains(string(out), s) {
						t.Errorf("%s: the fingerprint's result holds the secret %q:\n%s", what, s, out)
					}
				}
				return res, raw
			}

			w.write("d/a.txt", "drift-x")
			x1, _ := hash("content drifted to x")
			w.write("d/a.txt", "drift-x")
			x2, _ := hash("content drifted to x again")
			if x1.Report.PlanHash != x2.Report.PlanHash {
				t.Errorf("one drift, two plans: %s and %s, want one hash", x1.Report.PlanHash, x2.Report.PlanHash)
			}
			w.write("d/a.txt", "drift-y")
			y, _ := hash("content drifted to y")
			if y.Report.PlanHash == x1.Report.PlanHash {
				t.Errorf("contents drifted to x and to y hash alike: %s", y.Report.PlanHash)
			}
			want := []fingerprint.Difference{{Address: "captftest_file.a", Kind: fingerprint.Changed, Labels: "update", Paths: []string{"content"}}}
			if diff := cmp.Diff(want, fingerprint.Compare(x1.Changes, y.Changes)); diff != "" {
				t.Errorf("compare drift x with drift y (-want +got):\n%s", diff)
			}
			w.write("d/a.txt", "hello")

			// The secret drifted outside terraform: the before side differs.
			w.write("d/.a.txt.captftest-secret", "drifted-secret-1")
			s1, raw := hash("secret drifted to 1")
			if !strings.Contains(string(raw), "drifted-secret-1") {
				t.Fatalf("plan JSON lacks the drifted secret: the check of the result proves nothing")
			}
			w.write("d/.a.txt.captftest-secret", "drifted-secret-2")
			s2, _ := hash("secret drifted to 2")
			if s1.Report.PlanHash == s2.Report.PlanHash {
				t.Errorf("two drifted secrets hash alike: %s", s1.Report.PlanHash)
			}
			want[0].Paths = []string{"secret"}
			if diff := cmp.Diff(want, fingerprint.Compare(s1.Changes, s2.Changes)); diff != "" {
				t.Errorf("compare two drifted secrets (-want +got):\n%s", diff)
			}
			w.write("d/.a.txt.captftest-secret", "alpha-secret")

			// Two configured secrets: the after side differs.
			w.config(resource("beta-secret"))
			b, _ := hash("secret set to beta")
			w.config(resource("gamma-secret"))
			g, _ := hash("secret set to gamma")
			if b.Report.PlanHash == g.Report.PlanHash {
				t.Errorf("two configured secrets hash alike: %s", b.Report.PlanHash)
			}
		})
	}
}
