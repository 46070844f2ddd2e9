package runner

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/captf/captf/pkg/fingerprint"
)

func TestMessageFits(t *testing.T) {
	long := func(n int) []string {
		var r []string
		for i := range n {
			r = append(r, fmt.Sprintf("module.very_long_module_name_%03d.aws_security_group_rule.allow_everything_from_everywhere[%d] (replace, move)", i, i))
		}
		return r
	}
	cases := []struct {
		name      string
		msg       Message
		truncated bool
	}{
		{"small", Message{Operation: "plan", Outcome: OutcomePlanned, Plan: &fingerprint.Report{Add: 1, Resources: long(2), PlanHash: fingerprint.EmptyPlanHash}}, false},
		{"fifty long entries", Message{Operation: "plan", Outcome: OutcomePlanned, Plan: &fingerprint.Report{Add: 70, Resources: long(50), Truncated: true, PlanHash: fingerprint.EmptyPlanHash}}, true},
		{"long error", Message{Operation: "apply", Outcome: OutcomeFailed, Error: strings.Repeat("x", 10000)}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := c.msg.Encode()
			if len(b) > MaxMessage {
				t.Fatalf("%d bytes", len(b))
			}
			var got Message
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if got.Plan != nil {
				if got.Plan.PlanHash != c.msg.Plan.PlanHash || got.Plan.Add != c.msg.Plan.Add {
					t.Errorf("hash or counts lost: %+v", got.Plan)
				}
				if got.Plan.Truncated != c.truncated {
					t.Errorf("truncated = %v, want %v", got.Plan.Truncated, c.truncated)
				}
				if n := len(got.Plan.Resources); c.truncated && (n == 0 || n >= 50) {
					t.Errorf("%d entries kept", n)
				}
				if len(c.msg.Plan.Resources) > 0 && len(got.Plan.Resources) > 0 && got.Plan.Resources[0] != c.msg.Plan.Resources[0] {
					t.Error("the first entries were not kept")
				}
			}
		})
	}
	// Encode does not change the caller's report.
	r := &fingerprint.Report{Resources: long(50)}
	Message{Plan: r}.Encode()
	if len(r.Resources) != 50 || r.Truncated {
		t.Error("Encode changed its argument")
	}
}
