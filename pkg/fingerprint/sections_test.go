package fingerprint

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSections: the sections asked for come back as they are, and asking
// for them changes nothing of the hash.
func TestSections(t *testing.T) {
	doc := `{"format_version":"1.2","variables":{"x":{"value":"CANARY"}},` +
		`"resource_changes":[{"address":"a.b","change":{"actions":["create"],"after":{"v":1}}}],` +
		`"configuration":{"root_module":{}}}`
	key := []byte("0123456789abcdef0123456789abcdef")
	plain, err := Compute(key, strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	h, _ := New(key)
	h.Sections = []string{"variables", "configuration", "absent"}
	got, err := h.Compute(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if got.Report.PlanHash != plain.Report.PlanHash {
		t.Errorf("hash with sections %s, without %s", got.Report.PlanHash, plain.Report.PlanHash)
	}
	want := map[string]string{"variables": `{"x":{"value":"CANARY"}}`, "configuration": `{"root_module":{}}`}
	gotS := map[string]string{}
	for k, v := range got.Sections {
		gotS[k] = string(v)
	}
	if d := cmp.Diff(want, gotS); d != "" {
		t.Errorf("sections (-want +got):\n%s", d)
	}
	if plain.Sections != nil {
		t.Errorf("sections not asked for: %v", plain.Sections)
	}
}
