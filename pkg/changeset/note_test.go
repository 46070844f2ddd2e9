package changeset

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files")

const canary = "CANARY-NOTE-5d1e"

// full is a document with every kind of member, entry, hole and side
// effect the note renders.
func full() *Document {
	d := &Document{
		Version: Version,
		Members: []Member{
			{Name: "network", Component: "network", Capability: "terraform-apply", Status: StatusPlanned, PlanDigest: "tf1:aa"},
			{Name: "web", Component: "web", Capability: "kubectl-apply", Status: StatusPlanned, PlanDigest: "k1:bb",
				Holes: []Hole{{Address: "apps/v1/Deployment/prod/web", Reason: "spec.selector: field is immutable"}}},
			{Name: "api", Component: "api", Capability: "cfn-deploy", Status: StatusFailed, Error: "create change set: stack api: template is not valid"},
			{Name: "worker", Component: "worker", Capability: "cfn-deploy", Status: StatusHeld, PlanDigest: "cf1:cc",
				Holes: []Hole{{Reason: "inputs from network; re-checked on apply"}}, UnknownInputs: []string{"network.subnet_id"}},
			{Name: "site", Component: "site", Capability: "composition", Status: StatusPlanned, PlanDigest: "cd1:dd",
				Holes: []Hole{{Address: "publish", Reason: "unbound: shell step publish runs content its input does not list"}}},
			{Name: "pipe|name", Component: "pipe", Capability: "terraform-apply", Status: StatusPlanned, PlanDigest: "tf1:ee"},
		},
		Entries: []Entry{
			{Member: "network", Address: "terraform_data.vpc", Action: ActionCreate, Attributes: []Attribute{
				{Name: "input", Before: json.RawMessage(`null`), After: json.RawMessage(`{"cidr":"10.0.0.0/16"}`)},
				{Name: "id", Unknown: true},
			}},
			{Member: "network", Address: "terraform_data.subnet", Action: ActionReplace, Attributes: []Attribute{
				{Name: "triggers_replace", Before: json.RawMessage(`1`), After: json.RawMessage(`2`), ForcesReplacement: true},
				{Name: "password", Sensitive: true, Before: json.RawMessage(`"` + canary + `"`), After: json.RawMessage(`"` + canary + `2"`)},
				{Name: "output", Before: json.RawMessage(`"x"`), Unknown: true},
			}},
			{Member: "network", Address: "terraform_data.old", Action: ActionDelete},
			{Member: "network", Address: "terraform_data.same", Action: ActionNoOp},
			{Member: "web", Address: "apps/v1/Deployment/prod/web", Action: ActionUpdate, Disruption: DisruptionRolling, Attributes: []Attribute{
				{Name: "spec.template.spec.containers.0.image", Before: json.RawMessage(`"web:1"`), After: json.RawMessage("\"web:`2`\"")},
				{Name: "spec.replicas", Before: json.RawMessage(`2`), After: json.RawMessage(`3`)},
			}},
			{Member: "web", Address: "v1/Secret/prod/db", Action: ActionUpdate, Attributes: []Attribute{{Name: "data", Sensitive: true}}},
			{Member: "web", Address: "v1/ConfigMap/team/settings", Action: ActionCreate, Note: "the dry run waits for Namespace/team,\nwhich this member creates first", Attributes: []Attribute{
				{Name: "data.a", After: json.RawMessage(`"1"`)},
			}},
			{Member: "web", Address: "v1/ConfigMap/prod/big", Action: ActionCreate, Attributes: []Attribute{
				{Name: "data", After: json.RawMessage(`"` + strings.Repeat("é", 150) + `"`)},
			}},
			{Member: "pipe|name", Address: "Bucket", Action: ActionUpdate, Importing: true, Attributes: []Attribute{{Name: "Tags"}}},
		},
		SideEffects: []SideEffect{{Member: "network", Kind: "import", Address: "terraform_data.vpc", Detail: "id from import block"}},
	}
	d.Summary = d.Summarize()
	d.Digest, _ = d.ComputeDigest()
	return d
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden file (run go test -update once): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

func TestNoteGolden(t *testing.T) {
	d := full()
	note := Note(d, NoteOptions{ApplyCommand: "captf preview apply --env prod --expect-digest " + d.Digest, DocumentFile: "preview/changeset.json"})
	golden(t, "note-full.md", note)
	if !strings.HasPrefix(note, NoteMarker+"\n") {
		t.Error("the note does not start with its marker line")
	}
	if strings.Contains(note, canary) {
		t.Error("a sensitive value reached the note")
	}
}

func TestNoteEmpty(t *testing.T) {
	d := &Document{Version: Version}
	d.Digest, _ = d.ComputeDigest()
	golden(t, "note-empty.md", Note(d, NoteOptions{ApplyCommand: "captf preview apply --expect-digest " + d.Digest}))
}

func TestNoteTruncated(t *testing.T) {
	d := &Document{Version: Version}
	for m := range 4 {
		name := fmt.Sprintf("member-%d", m)
		d.Members = append(d.Members, Member{Name: name, Component: name, Capability: "terraform-apply", Status: StatusPlanned})
		for i := range 3000 {
			action := ActionUpdate
			if m == 0 && i < 20 {
				action = ActionDelete
			}
			d.Entries = append(d.Entries, Entry{Member: name, Address: fmt.Sprintf("terraform_data.r[%d]", i), Action: action,
				Attributes: []Attribute{{Name: "input", Before: json.RawMessage(`"old"`), After: json.RawMessage(`"new"`)}}})
		}
	}
	d.Digest, _ = d.ComputeDigest()
	cmd := "captf preview apply --expect-digest " + d.Digest
	note := Note(d, NoteOptions{ApplyCommand: cmd, DocumentFile: "out/changeset.json"})
	if len(note) > MaxNoteLength {
		t.Fatalf("note of %d bytes, over %d", len(note), MaxNoteLength)
	}
	for _, want := range []string{
		NoteMarker,
		"| `member-3` | terraform-apply | planned | 0 | 3000 | 0 | 0 |",
		"Digest: `" + d.Digest + "`",
		cmd,
		"#### Destroys and replacements",
		"- delete `terraform_data.r[19]` in `member-0`",
		"4 groups are left out to keep this note under 65536 characters: `member-0`, `member-1`, `member-2`, `member-3`. The whole change set is in `out/changeset.json`.",
	} {
		if !strings.Contains(note, want) {
			t.Errorf("the truncated note lacks %q", want)
		}
	}
	if strings.Contains(note, "#### `member-0`") {
		t.Error("a member group that cannot fit is in the note")
	}
	if !strings.HasSuffix(note, "out/changeset.json`.\n") {
		t.Errorf("the note does not end with the line saying what was left out:\n%s", note[len(note)-300:])
	}
}

func TestNoteTruncatedTable(t *testing.T) {
	d := &Document{Version: Version}
	for m := range 2000 {
		name := fmt.Sprintf("component-with-a-long-name-%04d", m)
		d.Members = append(d.Members, Member{Name: name, Component: name, Capability: "terraform-apply", Status: StatusPlanned})
	}
	note := Note(d, NoteOptions{ApplyCommand: "captf preview apply --expect-digest cs1:x"})
	if len(note) > MaxNoteLength {
		t.Fatalf("note of %d bytes, over %d", len(note), MaxNoteLength)
	}
	for _, want := range []string{"more members are left out of this table", "captf preview apply --expect-digest cs1:x", "2000 groups are left out"} {
		if !strings.Contains(note, want) {
			t.Errorf("the note lacks %q", want)
		}
	}
}

func TestCode(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain", "`plain`"},
		{"a`b", "`` a`b ``"},
		{"``", "``` `` ```"},
		{"", "(none)"},
		{"two\nlines", "`two lines`"},
	}
	for _, c := range cases {
		if got := code(c.in); got != c.want {
			t.Errorf("code(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestNoteLimitHolds: whatever the apply command's length and the limit
// in force, the note stays within the limit, keeps its marker and its
// digest, and says which limit it kept to.
func TestNoteLimitHolds(t *testing.T) {
	d := full()
	long := "captf preview apply --expect-digest " + d.Digest + " " + strings.Repeat("--var-file=very/long/path.tfvars ", 4000)
	cases := []struct {
		name    string
		limit   int
		command string
		want    []string
	}{
		{"a command longer than the note", 0, long, []string{"too long for this note", "Digest: `" + d.Digest + "`"}},
		{"a command longer than a small limit", 1500, "captf preview apply --expect-digest " + d.Digest + strings.Repeat(" -x", 600),
			[]string{"too long for this note", "to keep this note under 1500 characters"}},
		{"a small limit names itself", 1200, "captf preview apply --expect-digest " + d.Digest,
			[]string{"captf preview apply --expect-digest " + d.Digest, "to keep this note under 1200 characters"}},
		{"a limit below the fixed lines", 40, long, []string{NoteMarker}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			note := Note(d, NoteOptions{ApplyCommand: c.command, Limit: c.limit})
			limit := c.limit
			if limit == 0 {
				limit = MaxNoteLength
			}
			if len(note) > limit {
				t.Fatalf("note of %d bytes, over the limit %d", len(note), limit)
			}
			if !utf8.ValidString(note) {
				t.Error("the note was cut inside a character")
			}
			for _, w := range c.want {
				if !strings.Contains(note, w) {
					t.Errorf("the note lacks %q:\n%s", w, note)
				}
			}
		})
	}
}

// BenchmarkNoteManyMembers: the note of a change set whose table alone is
// past the limit. Rows are measured once each, so the time per member
// stays flat from 1,000 to 100,000 members (ns/member is reported).
func BenchmarkNoteManyMembers(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		d := &Document{Version: Version}
		for m := range n {
			name := fmt.Sprintf("component-%06d", m)
			d.Members = append(d.Members, Member{Name: name, Component: name, Capability: "terraform-apply", Status: StatusPlanned})
		}
		d.Digest, _ = d.ComputeDigest()
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) {
			for b.Loop() {
				if note := Note(d, NoteOptions{ApplyCommand: "captf preview apply --expect-digest " + d.Digest}); len(note) > MaxNoteLength {
					b.Fatal("over the limit")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/member")
		})
	}
}
