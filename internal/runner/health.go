package runner

import (
	"bytes"
	"encoding/json"

	"github.com/captf/captf/internal/modulecontract"
)

// OutputHealth is the module output that says how the infrastructure is
// doing: an object whose state is a word of HealthStates (or that word
// alone). The manager samples it after each apply and drift check and
// reports only the word.
const OutputHealth = modulecontract.OutputHealth

// Health states.
const (
	HealthRunning = modulecontract.HealthRunning
	HealthPending = modulecontract.HealthPending
	HealthFailed  = modulecontract.HealthFailed
	HealthUnknown = modulecontract.HealthUnknown
)

// healthState is the state word of the health output among outs: "" when
// the root has none, HealthUnknown when it is sensitive or holds no known
// word (whatever it holds is never repeated).
func healthState(outs map[string]outputValue) string {
	out, ok := outs[OutputHealth]
	if !ok || out.Value == nil {
		return ""
	}
	if out.Sensitive {
		return HealthUnknown
	}
	var word string
	var obj struct {
		State string `json:"state"`
	}
	switch {
	case bytes.HasPrefix(bytes.TrimSpace(out.Value), []byte("{")) && json.Unmarshal(out.Value, &obj) == nil:
		word = obj.State
	case json.Unmarshal(out.Value, &word) == nil:
	}
	switch word {
	case HealthRunning, HealthPending, HealthFailed:
		return word
	}
	return HealthUnknown
}
