package fingerprint

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

// formatV02 derives a plan of format 0.2 (terraform 0.15 and 1.0) from the
// real golden plan of terraform 1.11: format_version set to "0.2", and the
// fields format 0.2 does not have removed (top-level timestamp, applyable,
// complete, errored, checks, relevant_attributes; per change
// previous_address, importing, action_reason, generated_config), with the
// forget change, an action those releases cannot plan. What remains is what
// terraform 0.15 writes for the same changes.
func formatV02(t *testing.T) []byte {
	t.Helper()
	raw, err := os.ReadFile("testdata/plans/golden-terraform.json")
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers keep their text
	var plan map[string]any
	if err := dec.Decode(&plan); err != nil {
		t.Fatal(err)
	}
	plan["format_version"] = "0.2"
	plan["terraform_version"] = "1.0.11"
	for _, k := range []string{"timestamp", "applyable", "complete", "errored", "checks", "relevant_attributes"} {
		delete(plan, k)
	}
	var kept []any
	for _, rc := range plan["resource_changes"].([]any) {
		rc := rc.(map[string]any)
		change := rc["change"].(map[string]any)
		if slices.Contains(change["actions"].([]any), any("forget")) {
			continue
		}
		delete(rc, "previous_address")
		delete(rc, "action_reason")
		delete(change, "importing")
		delete(change, "generated_config")
		kept = append(kept, rc)
	}
	plan["resource_changes"] = kept
	b, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	for _, absent := range []string{`"importing"`, `"previous_address"`, `"forget"`, `"timestamp"`} {
		if bytes.Contains(b, []byte(absent)) {
			t.Fatalf("the derived 0.2 plan still holds %s", absent)
		}
	}
	return b
}

// TestFormatVersions: plans of format 0.2 (terraform 0.15, 1.0) hash as the
// same document marked 1.x would, since they carry everything the hash
// binds; format 0.1 lacks the sensitivity markers and is refused with the
// oldest terraform that plans well enough.
func TestFormatVersions(t *testing.T) {
	v02 := formatV02(t)
	got, err := Compute(testKey, bytes.NewReader(v02))
	if err != nil {
		t.Fatalf("a plan of format 0.2: %v", err)
	}
	as12 := bytes.Replace(v02, []byte(`"format_version":"0.2"`), []byte(`"format_version":"1.2"`), 1)
	want, err := Compute(testKey, bytes.NewReader(as12))
	if err != nil {
		t.Fatal(err)
	}
	if got.Report.PlanHash != want.Report.PlanHash || got.Report.PlanHash == EmptyPlanHash {
		t.Errorf("format 0.2 hashes to %s, the same plan as 1.2 to %s", got.Report.PlanHash, want.Report.PlanHash)
	}
	if r := got.Report; r.Add != 2 || r.Change != 2 || r.Destroy != 2 || r.Replace != 1 {
		t.Errorf("report of the 0.2 plan: %+v", r)
	}

	for _, c := range []struct{ version, want string }{
		{"0.1", "terraform 0.15 or later"},
		{"0.3", "format 0.2 (terraform 0.15 and 1.0) and 1.x"},
		{"2.0", "format 0.2 (terraform 0.15 and 1.0) and 1.x"},
	} {
		doc := bytes.Replace(v02, []byte(`"format_version":"0.2"`), []byte(`"format_version":"`+c.version+`"`), 1)
		_, err := Compute(testKey, bytes.NewReader(doc))
		if !errors.Is(err, ErrMalformedPlan) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("format %s: err = %v, want ErrMalformedPlan saying %q", c.version, err, c.want)
		}
	}
}
