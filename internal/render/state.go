package render

import (
	"encoding/json"
	"fmt"

	"github.com/captf/captf/internal/tfstate"
)

// StateInputsHash returns the inputs hash a terraform state records in the
// output HashOutput, "" when it records none. chunks are the state's
// chunks as terraform's kubernetes backend keeps them (gzip'ed JSON under
// the Secret key "tfstate" of tfstate-default-<suffix> and, for a large
// state, of its -part-<n> Secrets: tfstate.Chunks). Only that output is
// read; no other value is decoded.
func StateInputsHash(chunks ...[]byte) (string, error) { return stateOutput(chunks, HashOutput) }

// StateApprovalHash returns the approval hash a terraform state records:
// its output ApprovalOutput, else (none left out of it) its inputs hash;
// "" when it records neither. The state is what the last apply wrote, so
// it says with which approval hash that apply ran, where no annotation
// that a Secret writer can edit does.
func StateApprovalHash(chunks ...[]byte) (string, error) {
	h, err := stateOutput(chunks, ApprovalOutput)
	if err != nil || h != "" {
		return h, err
	}
	return StateInputsHash(chunks...)
}

// stateOutput is the string output name of a state, "" when it has none.
func stateOutput(chunks [][]byte, name string) (string, error) {
	state, err := tfstate.Open(chunks)
	if err != nil {
		return "", fmt.Errorf("state: %w", err)
	}
	h, err := tfstate.OutputString(state, name)
	if err != nil {
		return "", fmt.Errorf("state: %w", err)
	}
	return h, nil
}

// RootInputsHash returns the inputs hash a rendered main.tf.json records
// in its output HashOutput, "" when it records none.
func RootInputsHash(mainTF []byte) (string, error) { return rootOutput(mainTF, HashOutput) }

// RootApprovalHash returns the approval hash a rendered main.tf.json
// records: its output ApprovalOutput, else (none left out of it) its
// inputs hash; "" when it records neither.
func RootApprovalHash(mainTF []byte) (string, error) {
	h, err := rootOutput(mainTF, ApprovalOutput)
	if err != nil || h != "" {
		return h, err
	}
	return RootInputsHash(mainTF)
}

// rootOutput is the string output name of a rendered main.tf.json, ""
// when it has none.
func rootOutput(mainTF []byte, name string) (string, error) {
	var root struct {
		Output map[string]struct {
			Value json.RawMessage `json:"value"`
		} `json:"output"`
	}
	if err := json.Unmarshal(mainTF, &root); err != nil {
		return "", fmt.Errorf("root module: %w", err)
	}
	var h string
	if out, ok := root.Output[name]; ok {
		_ = json.Unmarshal(out.Value, &h)
	}
	return h, nil
}
