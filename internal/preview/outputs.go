package preview

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/captf/captf/internal/inputfile"
)

// resolve copies inputs, replacing each StackOutput with the value value
// gives. A reference without a value is left out: a map drops its key, a
// list its element.
func resolve(v any, value func(StackOutput) (any, bool)) any {
	switch t := v.(type) {
	case StackOutput:
		if got, ok := value(t); ok {
			return got
		}
		return nil
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			if ref, isRef := e.(StackOutput); isRef {
				if got, ok := value(ref); ok {
					out[k] = got
				}
				continue
			}
			out[k] = resolve(e, value)
		}
		return out
	case []any:
		out := make([]any, 0, len(t))
		for _, e := range t {
			if ref, isRef := e.(StackOutput); isRef {
				if got, ok := value(ref); ok {
					out = append(out, got)
				}
				continue
			}
			out = append(out, resolve(e, value))
		}
		return out
	}
	return v
}

// decodeValue decodes an output value with numbers kept as written.
func decodeValue(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// MaxSeedBytes is the largest --seed-outputs file ReadSeed reads.
const MaxSeedBytes = 16 << 20

// ReadSeed reads a --seed-outputs file: a JSON object of components, each
// an object of output names and their values.
func ReadSeed(ctx context.Context, path string) (map[string]Outputs, error) {
	data, err := inputfile.Read(ctx, path, MaxSeedBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: seed outputs: %w", ErrInvalid, err)
	}
	var raw map[string]map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		// The decoder's message names a position or a type, never a value.
		return nil, fmt.Errorf("%w: seed outputs %s: want {\"component\": {\"name\": value}}: %w", ErrInvalid, path, err)
	}
	seed := make(map[string]Outputs, len(raw))
	for comp, outs := range raw {
		if outs == nil {
			return nil, fmt.Errorf("%w: seed outputs %s: %q: want an object of output names and values", ErrInvalid, path, comp)
		}
		seed[comp] = Outputs(outs)
	}
	return seed, nil
}
