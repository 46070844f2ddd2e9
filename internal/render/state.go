package render

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
)

// StateInputsHash returns the inputs hash a terraform state records in the
// output HashOutput, "" when it records none. tfstate is the state as
// terraform's kubernetes backend keeps it (gzip'ed JSON under the Secret
// key "tfstate"). Only that output is read; no other value is decoded.
func StateInputsHash(tfstate []byte) (string, error) {
	zr, err := gzip.NewReader(bytes.NewReader(tfstate))
	if err != nil {
		return "", fmt.Errorf("state: %w", err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return "", fmt.Errorf("state: %w", err)
	}
	var state struct {
		Outputs map[string]struct {
			Value json.RawMessage `json:"value"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(raw, &state); err != nil {
		return "", fmt.Errorf("state: %w", err)
	}
	var h string
	if out, ok := state.Outputs[HashOutput]; ok {
		// Any other type is no hash of ours.
		_ = json.Unmarshal(out.Value, &h)
	}
	return h, nil
}

// RootInputsHash returns the inputs hash a rendered main.tf.json records
// in its output HashOutput, "" when it records none.
func RootInputsHash(mainTF []byte) (string, error) {
	var root struct {
		Output map[string]struct {
			Value json.RawMessage `json:"value"`
		} `json:"output"`
	}
	if err := json.Unmarshal(mainTF, &root); err != nil {
		return "", fmt.Errorf("root module: %w", err)
	}
	var h string
	if out, ok := root.Output[HashOutput]; ok {
		_ = json.Unmarshal(out.Value, &h)
	}
	return h, nil
}
