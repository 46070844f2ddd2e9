package changeset

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// sample is a small document with one of everything the digest covers.
func sample() *Document {
	return &Document{
		Version: Version,
		Members: []Member{
			{Name: "network", Component: "network", Capability: "terraform-apply", Status: StatusPlanned, PlanDigest: "tf1:aa"},
			{Name: "web", Component: "web", Capability: "kubectl-apply", Status: StatusHeld, PlanDigest: "k1:bb",
				Holes: []Hole{{Reason: "inputs from network; re-checked on apply"}}, UnknownInputs: []string{"network.vpc"}},
		},
		Entries: []Entry{
			{Member: "network", Address: "terraform_data.a", Action: ActionUpdate, Attributes: []Attribute{
				{Name: "input", Before: json.RawMessage(`"a"`), After: json.RawMessage(`"b"`)},
			}},
		},
		SideEffects: []SideEffect{{Member: "network", Kind: "import", Address: "terraform_data.a"}},
	}
}

func TestDigestCovers(t *testing.T) {
	base, err := sample().ComputeDigest()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(base, DigestPrefix) || len(base) != len(DigestPrefix)+64 {
		t.Fatalf("digest %q: want %s and 64 hex digits", base, DigestPrefix)
	}
	cases := []struct {
		reason string
		change func(d *Document)
		moves  bool
	}{
		{"member name", func(d *Document) { d.Members[0].Name = "net" }, true},
		{"member component", func(d *Document) { d.Members[0].Component = "other" }, true},
		{"member capability", func(d *Document) { d.Members[0].Capability = "cfn-deploy" }, true},
		{"member plan digest", func(d *Document) { d.Members[0].PlanDigest = "tf1:ab" }, true},
		{"member status", func(d *Document) { d.Members[0].Status = StatusFailed }, true},
		{"hole reason", func(d *Document) { d.Members[1].Holes[0].Reason = "other" }, true},
		{"hole added", func(d *Document) { d.Members[0].Holes = []Hole{{Reason: "unbound: shell"}} }, true},
		{"unknown inputs", func(d *Document) { d.Members[1].UnknownInputs = []string{"network.subnet"} }, true},
		{"member order", func(d *Document) { d.Members[0], d.Members[1] = d.Members[1], d.Members[0] }, true},
		{"entry address", func(d *Document) { d.Entries[0].Address = "terraform_data.b" }, true},
		{"entry action", func(d *Document) { d.Entries[0].Action = ActionReplace }, true},
		{"entry importing", func(d *Document) { d.Entries[0].Importing = true }, true},
		{"entry disruption", func(d *Document) { d.Entries[0].Disruption = DisruptionRolling }, true},
		{"entry note", func(d *Document) { d.Entries[0].Note = "the dry run waits for Namespace/team" }, true},
		{"entry added", func(d *Document) {
			d.Entries = append(d.Entries, Entry{Member: "network", Address: "x", Action: ActionNoOp})
		}, true},
		{"attribute name", func(d *Document) { d.Entries[0].Attributes[0].Name = "output" }, true},
		{"attribute before", func(d *Document) { d.Entries[0].Attributes[0].Before = json.RawMessage(`"c"`) }, true},
		{"attribute after", func(d *Document) { d.Entries[0].Attributes[0].After = json.RawMessage(`"c"`) }, true},
		{"attribute unknown", func(d *Document) { d.Entries[0].Attributes[0].Unknown = true }, true},
		{"attribute sensitive", func(d *Document) { d.Entries[0].Attributes[0].Sensitive = true }, true},
		{"attribute forces replacement", func(d *Document) { d.Entries[0].Attributes[0].ForcesReplacement = true }, true},
		{"side effect kind", func(d *Document) { d.SideEffects[0].Kind = "forget" }, true},
		{"side effect detail", func(d *Document) { d.SideEffects[0].Detail = "id" }, true},
		{"side effect removed", func(d *Document) { d.SideEffects = nil }, true},
		{"summary", func(d *Document) { d.Summary = d.Summarize() }, false},
		{"digest field", func(d *Document) { d.Digest = "cs1:00" }, false},
		{"member error text", func(d *Document) { d.Members[0].Error = "timeout" }, false},
		{"empty lists read back as absent", func(d *Document) { d.Members[0].Holes = []Hole{}; d.Members[0].UnknownInputs = []string{} }, false},
	}
	for _, c := range cases {
		t.Run(c.reason, func(t *testing.T) {
			d := sample()
			c.change(d)
			got, err := d.ComputeDigest()
			if err != nil {
				t.Fatal(err)
			}
			if moved := got != base; moved != c.moves {
				t.Errorf("digest moved = %v, want %v", moved, c.moves)
			}
		})
	}
}

func TestDigestSurvivesJSON(t *testing.T) {
	d := sample()
	want, _ := d.ComputeDigest()
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var back Document
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	got, _ := back.ComputeDigest()
	if got != want {
		t.Errorf("digest after a JSON round trip %s, want %s", got, want)
	}
}

func TestSummarize(t *testing.T) {
	d := &Document{
		Members: []Member{
			{Name: "a", Status: StatusPlanned},
			{Name: "b", Status: StatusHeld},
			{Name: "c", Status: StatusPlanned, Holes: []Hole{{Reason: "inputs from a; re-checked on apply"}}},
			{Name: "d", Status: StatusPlanned, Holes: []Hole{{Reason: "unbound: shell step deploy runs a script"}}},
			{Name: "e", Status: StatusPlanned, Holes: []Hole{{Address: "Deployment/web", Reason: "field is immutable"}}},
			{Name: "f", Status: StatusFailed},
		},
		Entries: []Entry{
			{Member: "a", Action: ActionCreate}, {Member: "a", Action: ActionCreate}, {Member: "a", Action: ActionUpdate},
			{Member: "a", Action: ActionReplace}, {Member: "a", Action: ActionDelete}, {Member: "a", Action: ActionNoOp},
			{Member: "a", Action: ActionRead}, {Member: "a", Action: ActionForget},
			{Member: "e", Action: ActionUpdate},
		},
	}
	want := &Summary{Members: []MemberCounts{
		{Name: "a", Status: StatusPlanned, Known: true, Create: 2, Update: 1, Replace: 1, Delete: 1},
		{Name: "b", Status: StatusHeld},
		{Name: "c", Status: StatusPlanned},
		{Name: "d", Status: StatusPlanned, Known: true},
		{Name: "e", Status: StatusPlanned, Known: true, Update: 1},
		{Name: "f", Status: StatusFailed},
	}}
	if diff := cmp.Diff(want, d.Summarize()); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
}
