package fingerprint

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestIgnoreOutputs(t *testing.T) {
	const own = `"own":{"actions":["update"],"before":"h2:old","after":"h2:new"}`
	node := rc("terraform_data.node", "update", `"before":{"v":1},"after":{"v":2}`)
	cases := []struct {
		reason string
		ignore []string
		plan   string
		// same is a plan that must hash and report exactly like plan.
		same        string
		wantOutputs int
		wantIgnored []string
	}{
		{
			reason:      "a plan whose only change is an ignored output is the empty plan",
			ignore:      []string{"own"},
			plan:        docWithOutputs(own),
			same:        doc(),
			wantIgnored: []string{"own"},
		},
		{
			reason:      "an ignored output that is created counts as changed",
			ignore:      []string{"own"},
			plan:        docWithOutputs(`"own":{"actions":["create"],"before":null,"after":"h2:new"}`),
			same:        doc(),
			wantIgnored: []string{"own"},
		},
		{
			reason:      "an ignored output that is deleted counts as changed",
			ignore:      []string{"own"},
			plan:        docWithOutputs(`"own":{"actions":["delete"],"before":"h2:old","after":null}`),
			same:        doc(),
			wantIgnored: []string{"own"},
		},
		{
			reason: "an ignored output that does not change is not named",
			ignore: []string{"own"},
			plan:   docWithOutputs(`"own":{"actions":["no-op"],"before":"h2:a","after":"h2:a"}`),
			same:   doc(),
		},
		{
			reason:      "the module's changes still count, and hash as without the ignored output",
			ignore:      []string{"own"},
			plan:        docWithOutputs(own+`,"size":{"actions":["update"],"before":"1","after":"2"}`, node),
			same:        docWithOutputs(`"size":{"actions":["update"],"before":"1","after":"2"}`, node),
			wantOutputs: 1,
			wantIgnored: []string{"own"},
		},
		{
			reason:      "only the named outputs are ignored",
			ignore:      []string{"own", "other"},
			plan:        docWithOutputs(`"owner":{"actions":["create"],"after":"x"},` + own),
			same:        docWithOutputs(`"owner":{"actions":["create"],"after":"x"}`),
			wantOutputs: 1,
			wantIgnored: []string{"own"},
		},
		{
			reason:      "several ignored outputs are named once each, sorted",
			ignore:      []string{"own", "b"},
			plan:        docWithOutputs(own + `,"b":{"actions":["create"],"after":"x"}`),
			same:        doc(),
			wantIgnored: []string{"b", "own"},
		},
		{
			reason:      "a resource is never ignored, even one named like the output",
			ignore:      []string{"own"},
			plan:        doc(rc("output.own", "delete", "")),
			same:        doc(rc("output.own", "delete", "")),
			wantIgnored: nil,
		},
		{
			reason:      "without IgnoreOutputs every output counts",
			plan:        docWithOutputs(own),
			same:        docWithOutputs(own),
			wantOutputs: 1,
		},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			for _, detail := range []bool{false, true} {
				h, err := New(testKey)
				if err != nil {
					t.Fatal(err)
				}
				h.Detail = detail
				h.IgnoreOutputs = tc.ignore
				got, err := h.Compute(strings.NewReader(tc.plan))
				if err != nil {
					t.Fatalf("Compute: %v", err)
				}
				want := compute(t, testKey, tc.same)
				if d := cmp.Diff(want.Report, got.Report); d != "" {
					t.Errorf("detail %v: report (-want +got):\n%s", detail, d)
				}
				if got.Report.OutputChanges != tc.wantOutputs {
					t.Errorf("detail %v: %d output changes, want %d", detail, got.Report.OutputChanges, tc.wantOutputs)
				}
				if d := cmp.Diff(tc.wantIgnored, got.Ignored); d != "" {
					t.Errorf("detail %v: Ignored (-want +got):\n%s", detail, d)
				}
				if detail {
					wantDetail := computeDetail(t, tc.same)
					if d := cmp.Diff(slices.Collect(wantDetail.Changes.All()), slices.Collect(got.Changes.All())); d != "" {
						t.Errorf("Changes (-want +got):\n%s", d)
					}
				}
			}
		})
	}
}

// An ignored output is still read: a malformed change of one is refused.
func TestIgnoreOutputsStillChecks(t *testing.T) {
	h, err := New(testKey)
	if err != nil {
		t.Fatal(err)
	}
	h.IgnoreOutputs = []string{"own"}
	_, err = h.Compute(strings.NewReader(docWithOutputs(`"own":{"actions":["explode"]}`)))
	if !errors.Is(err, ErrMalformedPlan) {
		t.Errorf("err = %v, want ErrMalformedPlan", err)
	}
}
