package tfstate

import (
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Meta is what identifies a state without holding any of its values.
type Meta struct {
	Serial  int64
	Lineage string
}

// Open returns the decompressed state (terraform's JSON) of chunks as a
// stream; nothing is decompressed ahead. A read that finds the bytes are
// no gzip, are cut short or fail their checksum returns an error wrapping
// ErrCorrupt that names the chunk where decompression stopped (chunk-<n>,
// the backup's key). No chunk at all is ErrNoState.
func Open(chunks [][]byte) (io.Reader, error) {
	if len(chunks) == 0 {
		return nil, fmt.Errorf("%w: no chunk", ErrNoState)
	}
	cr := &chunkReader{chunks: chunks}
	zr, err := gzip.NewReader(cr)
	if err != nil {
		return nil, cr.corrupt(err)
	}
	return &stateReader{zr: zr, cr: cr}, nil
}

// Digests are the sha256 of each chunk as stored, in hex, comma
// separated: the backup's record that names a changed chunk
// (VerifyDigests), where a gzip checksum only tells that one changed.
func Digests(chunks [][]byte) string {
	sums := make([]string, len(chunks))
	for n, c := range chunks {
		sum := sha256.Sum256(c)
		sums[n] = hex.EncodeToString(sum[:])
	}
	return strings.Join(sums, ",")
}

// VerifyDigests checks chunks against Digests made at backup. A chunk
// that differs is ErrCorrupt and one too many or too few ErrMissingChunk,
// named chunk-<n>.
func VerifyDigests(chunks [][]byte, digests string) error {
	want := strings.Split(digests, ",")
	got := strings.Split(Digests(chunks), ",")
	for n := range max(len(want), len(got)) {
		switch {
		case n >= len(got):
			return fmt.Errorf("%w: %s is missing, the backup has %d chunks", ErrMissingChunk, ChunkKey(n), len(want))
		case n >= len(want):
			return fmt.Errorf("%w: %s is one more than the %d of the backup", ErrMissingChunk, ChunkKey(n), len(want))
		case got[n] != want[n]:
			return fmt.Errorf("%w: %s does not match its digest", ErrCorrupt, ChunkKey(n))
		}
	}
	return nil
}

// Size is the number of compressed bytes of chunks.
func Size(chunks [][]byte) int64 {
	var n int64
	for _, c := range chunks {
		n += int64(len(c))
	}
	return n
}

// Check decompresses the whole state of chunks, checks that it is one JSON
// object with a serial and a lineage, and returns them. It is what a
// restore verifies before it pushes anything.
func Check(chunks [][]byte) (Meta, error) {
	r, err := Open(chunks)
	if err != nil {
		return Meta{}, err
	}
	return scanState(r, true)
}

// ReadMeta reads the serial and the lineage of a decompressed state. It
// stops as soon as it has both (terraform and tofu write them before the
// outputs and resources) and decodes no other value.
func ReadMeta(state io.Reader) (Meta, error) { return scanState(state, false) }

// scanState reads the top-level object of a state for its serial and
// lineage; the other members are skipped as raw bytes, never decoded. With
// all it reads to the end of the object and of the stream, so the whole
// state is checked.
func scanState(state io.Reader, all bool) (Meta, error) {
	var m Meta
	var haveSerial, haveLineage bool
	dec := json.NewDecoder(state)
	err := members(dec, func(key string) error {
		switch key {
		case "serial":
			if err := dec.Decode(&m.Serial); err != nil || m.Serial < 0 {
				return fmt.Errorf("%w: serial is not a count", ErrCorrupt)
			}
			haveSerial = true
		case "lineage":
			if err := dec.Decode(&m.Lineage); err != nil {
				return fmt.Errorf("%w: lineage is not a string", ErrCorrupt)
			}
			haveLineage = true
		default:
			if err := skip(dec); err != nil {
				return err
			}
		}
		if haveSerial && haveLineage && !all {
			return errStop
		}
		return nil
	})
	switch {
	case errors.Is(err, errStop):
		return m, nil
	case err != nil:
		return Meta{}, err
	case !haveSerial || !haveLineage:
		return Meta{}, fmt.Errorf("%w: the state has no serial or no lineage", ErrCorrupt)
	}
	if all {
		switch _, err := dec.Token(); {
		case errors.Is(err, io.EOF):
		case errors.Is(err, ErrCorrupt):
			return Meta{}, err
		default:
			return Meta{}, fmt.Errorf("%w: data after the state", ErrCorrupt)
		}
	}
	return m, nil
}

// Output is one root output of a state.
type Output struct {
	// Found: the state has the output.
	Found bool
	// Sensitive: terraform keeps it as sensitive.
	Sensitive bool
	// Value is the output's value as the state holds it.
	Value json.RawMessage
}

// ReadOutputs returns every root output of a decompressed state, by name,
// in one pass; reading stops after the outputs.
func ReadOutputs(state io.Reader) (map[string]Output, error) {
	return readOutputs(state, func(string) bool { return true })
}

// readOutputs returns the root outputs of a decompressed state that
// wanted names, by name; the others are not decoded, and reading stops
// after the outputs.
func readOutputs(state io.Reader, wanted func(name string) bool) (map[string]Output, error) {
	outs := map[string]Output{}
	dec := json.NewDecoder(state)
	err := members(dec, func(key string) error {
		if key != "outputs" {
			return skip(dec)
		}
		err := members(dec, func(name string) error {
			if !wanted(name) {
				return skip(dec)
			}
			out := Output{Found: true}
			err := members(dec, func(field string) error {
				switch field {
				case "value":
					return jsonError(dec.Decode(&out.Value))
				case "sensitive":
					return jsonError(dec.Decode(&out.Sensitive))
				}
				return skip(dec)
			})
			outs[name] = out
			return err
		})
		if err != nil {
			return err
		}
		return errStop
	})
	if err != nil && !errors.Is(err, errStop) {
		return nil, err
	}
	return outs, nil
}

// OutputsOf is a reader of the root outputs of the state of chunks, by
// name, as ReadOutput: the first call reads them all in one pass
// (ReadOutputs), and later calls answer from what it read. Not for use
// by several goroutines at once.
func OutputsOf(chunks [][]byte) func(name string) (Output, error) {
	var (
		outs map[string]Output
		err  error
	)
	return func(name string) (Output, error) {
		if outs == nil && err == nil {
			var state io.Reader
			if state, err = Open(chunks); err == nil {
				outs, err = ReadOutputs(state)
			}
		}
		if err != nil {
			return Output{}, err
		}
		return outs[name], nil
	}
}

// ReadOutput returns the root output name of a decompressed state. Only
// that output is decoded; reading stops after the outputs.
func ReadOutput(state io.Reader, name string) (Output, error) {
	outs, err := readOutputs(state, func(o string) bool { return o == name })
	if err != nil {
		return Output{}, err
	}
	return outs[name], nil
}

// OutputString returns the value of the root output name of a
// decompressed state when it is a string, "" when the state has no such
// output or it is of another type.
func OutputString(state io.Reader, name string) (string, error) {
	out, err := ReadOutput(state, name)
	if err != nil || len(out.Value) == 0 || out.Value[0] != '"' {
		// Any other type is no string.
		return "", err
	}
	var s string
	return s, json.Unmarshal(out.Value, &s)
}

// errStop ends a members walk early.
var errStop = errors.New("stop")

// members walks the object that comes next in dec, calling member with
// each key; member must consume the key's value.
func members(dec *json.Decoder, member func(key string) error) error {
	tok, err := dec.Token()
	if err != nil {
		return jsonError(err)
	}
	if tok != json.Delim('{') {
		return fmt.Errorf("%w: an object was expected", ErrCorrupt)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return jsonError(err)
		}
		key, ok := tok.(string)
		if !ok {
			return fmt.Errorf("%w: an object key was expected", ErrCorrupt)
		}
		if err := member(key); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil {
		return jsonError(err)
	}
	return nil
}

// skip consumes the next value of dec as raw bytes, decoding nothing.
func skip(dec *json.Decoder) error {
	var d discard
	if err := dec.Decode(&d); err != nil {
		return jsonError(err)
	}
	return nil
}

type discard struct{}

func (*discard) UnmarshalJSON([]byte) error { return nil }

// jsonError keeps a decoding error's kind and offset, never the text
// around it: encoding/json quotes the offending character.
func jsonError(err error) error {
	var syn *json.SyntaxError
	switch {
	case errors.Is(err, ErrCorrupt):
		return err
	case errors.As(err, &syn):
		return fmt.Errorf("%w: not JSON at byte %d", ErrCorrupt, syn.Offset)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: the JSON ends early", ErrCorrupt)
	}
	// A read error of the stream (stateReader's) names its chunk already.
	return err
}
