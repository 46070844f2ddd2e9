package fingerprint

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var (
	digestA = strings.Repeat("a", 64)
	digestB = strings.Repeat("b", 64)
)

// TestDetailRoundTrip reads every change of a Detail back with a
// DetailBuilder, the first one last: the Detail it builds holds the same
// changes in the same order, and compares equal to the first.
func TestDetailRoundTrip(t *testing.T) {
	plan := docWithOutputs(`"o":{"actions":["create"],"after":"v","after_sensitive":true}`,
		rc("b.upd", "update", `"before":{"m":{"k":"v1"},"n":1},"after":{"m":{"k":"v2"},"n":2},"before_sensitive":{"m":true},"after_sensitive":{"m":true}`),
		rc("a.new", "create", `"after":{"x":1,"y":[1]},"after_unknown":{"id":true}`),
		rc("c.cbd", "create,delete", `"before":{"v":1},"after":{"v":2}`),
		`{"address":"c.cbd","deposed":"00ab","change":{"actions":["delete"],"before":{"v":0}}}`,
		`{"address":"d.imp","previous_address":"d.old","change":{"actions":["no-op"],"importing":{"id":"i"}}}`,
		rc("e.del", "delete", ""),
	)
	d := computeDetail(t, plan).Changes
	changes := slices.Collect(d.All())
	var b DetailBuilder
	for _, c := range append(slices.Clone(changes[1:]), changes[0]) {
		if err := b.Add(c); err != nil {
			t.Fatalf("Add(%+v): %v", c, err)
		}
	}
	back := b.Detail()
	if diff := cmp.Diff(changes, slices.Collect(back.All())); diff != "" {
		t.Errorf("changes read back (-want +got):\n%s", diff)
	}
	if diff := Compare(d, back); diff != nil {
		t.Errorf("Compare of a Detail and its copy: %+v", diff)
	}
	var addrs []string
	for _, c := range changes {
		addrs = append(addrs, c.Address+" "+c.Labels)
	}
	want := []string{"a.new create", "b.upd update", "c.cbd replace", "c.cbd delete", "d.imp import, move", "e.del delete", "output.o create"}
	if diff := cmp.Diff(want, addrs); diff != "" {
		t.Errorf("addresses (-want +got):\n%s", diff)
	}
	if got := changes[3].Paths; got != nil {
		t.Errorf("a delete has paths: %v", got)
	}
	if got := slices.Sorted(func(yield func(string) bool) {
		for p := range changes[4].Paths {
			yield(p)
		}
	}); !slices.Equal(got, []string{"(import)", "(moved from)"}) {
		t.Errorf("paths of an import and move: %v", got)
	}
}

func TestDetailBuilderRefuses(t *testing.T) {
	ok := Change{Address: "a.b", Actions: "update", Labels: "update", Digest: digestA, Paths: map[string]string{"x": digestB}}
	for _, c := range []struct {
		reason string
		change func(*Change)
		want   string
	}{
		{"no address", func(c *Change) { c.Address = "" }, "address: missing"},
		{"unknown actions", func(c *Change) { c.Actions = "update,update" }, `actions "update,update": not a list of actions this release knows`},
		{"labels of another action", func(c *Change) { c.Labels = "create" }, `labels "create": do not go with the actions "update"`},
		{"unknown label", func(c *Change) { c.Labels = "update, teleport" }, `labels "update, teleport": do not go with the actions "update"`},
		{"short digest", func(c *Change) { c.Digest = "d" }, "digest: 1 characters, want 64 hex digits"},
		{"upper-case digest", func(c *Change) { c.Digest = strings.ToUpper(digestA) }, "digest: character 1 is not a lower-case hex digit"},
		{"bad path digest", func(c *Change) { c.Paths = map[string]string{"x": digestA, "y": digestA[:63] + "g"} }, `paths["y"]: character 64 is not a lower-case hex digit`},
		{"empty path name", func(c *Change) { c.Paths = map[string]string{"": digestA} }, "paths: an empty path name"},
	} {
		t.Run(c.reason, func(t *testing.T) {
			var b DetailBuilder
			if err := b.Add(ok); err != nil {
				t.Fatal(err)
			}
			bad := ok
			c.change(&bad)
			err := b.Add(bad)
			if err == nil || err.Error() != c.want {
				t.Fatalf("Add = %v, want %q", err, c.want)
			}
			// A refused change leaves nothing behind.
			if diff := cmp.Diff([]Change{ok}, slices.Collect(b.Detail().All())); diff != "" {
				t.Errorf("after a refused change (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCompareChangesRefusesDisorder(t *testing.T) {
	fresh := computeDetail(t, doc(rc("a.x", "delete", ""))).Changes
	approved := []Change{
		{Address: "b.y", Actions: "delete", Labels: "delete", Digest: digestA},
		{Address: "a.x", Actions: "delete", Labels: "delete", Digest: digestA},
	}
	_, err := CompareChanges(slices.Values(approved), fresh)
	if want := "approved changes: a.x comes after b.y, out of address order"; err == nil || err.Error() != want {
		t.Errorf("CompareChanges = %v, want %q", err, want)
	}
	got, err := CompareChanges(slices.Values(approved[:1]), fresh)
	want := []Difference{{Address: "a.x", Kind: Added, Labels: "delete"}, {Address: "b.y", Kind: Gone, Labels: "delete"}}
	if err != nil || !cmp.Equal(want, got) {
		t.Errorf("CompareChanges = %+v, %v; want %+v", got, err, want)
	}
}

// TestManyBlocks fingerprints a plan of several blocks of lines, in an
// order that is not address order: the hash is the SHA-256 of the sorted
// lines of its changes, and every change keeps the digest it has alone.
func TestManyBlocks(t *testing.T) {
	const n = 3*blockLen + 7
	changes := make([]string, n)
	for i := range changes {
		// Reversed, so that the lines must be sorted.
		changes[n-1-i] = rc(fmt.Sprintf("terraform_data.r%05d", i), "update", fmt.Sprintf(`"before":{"v":%d,"w":1},"after":{"v":%d,"w":2}`, i, i+1))
	}
	r := computeDetail(t, doc(changes...))
	if r.Changes.Len() != n || r.Report.Change != n {
		t.Fatalf("%d changes, report %+v; want %d", r.Changes.Len(), r.Report, n)
	}
	var lines []string
	for c := range r.Changes.All() {
		lines = append(lines, c.Line())
	}
	if !slices.IsSorted(lines) {
		t.Error("the changes are not in address order")
	}
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	if got, want := r.Report.PlanHash, Prefix+hex.EncodeToString(sum[:]); got != want {
		t.Errorf("hash %s, want %s from the lines", got, want)
	}
	for _, i := range []int{0, blockLen - 1, blockLen, 2*blockLen + 1, n - 1} {
		alone := computeDetail(t, doc(changes[n-1-i])).Changes.Change(0)
		if d := cmp.Diff(alone, r.Changes.Change(i)); d != "" {
			t.Errorf("change %d differs from the same change alone (-alone +in the plan):\n%s", i, d)
		}
	}
}
