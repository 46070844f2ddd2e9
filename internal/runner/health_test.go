package runner

import (
	"encoding/json"
	"testing"
)

func TestHealthState(t *testing.T) {
	cases := []struct {
		name, value string
		sensitive   bool
		want        string
	}{
		{"object", `{"state":"running","detail":"x"}`, false, HealthRunning},
		{"word", `"pending"`, false, HealthPending},
		{"failed", `{"state":"failed"}`, false, HealthFailed},
		{"unknown word", `{"state":"CANARY-HEALTH"}`, false, HealthUnknown},
		{"not a word", `42`, false, HealthUnknown},
		{"no state", `{"status":"running"}`, false, HealthUnknown},
		{"sensitive", `{"state":"running"}`, true, HealthUnknown},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			outs := map[string]outputValue{OutputHealth: {Sensitive: c.sensitive, Value: json.RawMessage(c.value)}}
			if got := healthState(outs); got != c.want {
				t.Errorf("healthState(%s) = %q, want %q", c.value, got, c.want)
			}
		})
	}
	if got := healthState(map[string]outputValue{"other": {Value: json.RawMessage(`"running"`)}}); got != "" {
		t.Errorf("no health output: %q", got)
	}
	if got := healthState(nil); got != "" {
		t.Errorf("no outputs: %q", got)
	}
}
