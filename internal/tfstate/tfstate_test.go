package tfstate

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// canary is in every test state's values: no error may hold it.
const canary = "CANARY-TFSTATE-VALUE-77c1"

// stateJSON is a state as terraform writes it (indented; tofu writes it
// compact), whose one resource holds blob random bytes as base64.
func stateJSON(serial int64, compact bool, blob int, outputs string) []byte {
	key := fmt.Sprint(serial, compact, blob, outputs)
	if b, ok := states[key]; ok {
		return b
	}
	b := makeState(serial, compact, blob, outputs)
	states[key] = b
	return b
}

var states = map[string][]byte{}

func makeState(serial int64, compact bool, blob int, outputs string) []byte {
	rnd := rand.NewChaCha8([32]byte{byte(blob), 7})
	raw := make([]byte, blob)
	rnd.Read(raw)
	s := fmt.Sprintf(`{
  "version": 4,
  "terraform_version": "1.11.4",
  "serial": %d,
  "lineage": "387d0f28-47fb-02ef-4b63-1609917a81ab",
  "outputs": {%s},
  "resources": [{"mode": "managed", "type": "terraform_data", "name": "a",
    "instances": [{"attributes": {"input": {"value": "%s%s", "type": "string"}}}]}],
  "check_results": null
}
`, serial, outputs, canary, base64.StdEncoding.EncodeToString(raw))
	if compact {
		s = strings.NewReplacer("\n", "", "  ", "", ": ", ":").Replace(s)
	}
	return []byte(s)
}

func gz(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// split cuts compressed bytes as terraform does: 1 MiB chunks.
func split(b []byte) [][]byte {
	var chunks [][]byte
	for len(b) > ChunkSize {
		chunks = append(chunks, b[:ChunkSize])
		b = b[ChunkSize:]
	}
	return append(chunks, b)
}

func secretsOf(suffix string, chunks [][]byte) []Secret {
	var out []Secret
	for n, c := range chunks {
		out = append(out, Secret{Name: PartName(suffix, n), Labels: Selector(suffix),
			Annotations: map[string]string{"encoding": "gzip"}, Data: map[string][]byte{DataKey: c}})
	}
	return out
}

func concat(chunks [][]byte) []byte { return bytes.Join(chunks, nil) }

func noValue(t *testing.T, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), canary) {
		t.Fatalf("the error holds a value: %v", err)
	}
}

func TestChunks(t *testing.T) {
	big := split(gz(t, stateJSON(9, false, 2_500_000, "")))
	if len(big) != 3 {
		t.Fatalf("the big test state makes %d chunks, want 3", len(big))
	}
	three := secretsOf("a", big)
	cases := map[string]struct {
		reason  string
		secrets []Secret
		want    [][]byte
		wantErr error
	}{
		"one": {
			reason:  "a small state is chunk 0 alone",
			secrets: secretsOf("a", [][]byte{[]byte("x")}),
			want:    [][]byte{[]byte("x")},
		},
		"ordered by name": {
			reason:  "the order comes from the -part-<n> names, not from the list",
			secrets: []Secret{three[2], three[0], three[1]},
			want:    big,
		},
		"others ignored": {
			reason: "Secrets of other suffixes or names are not chunks",
			secrets: append([]Secret{
				{Name: "tfstate-default-a-b", Data: map[string][]byte{DataKey: []byte("no")}},
				{Name: "tfstate-default-a-part-x", Data: map[string][]byte{DataKey: []byte("no")}},
				{Name: "tfstate-default-a-part-0", Data: map[string][]byte{DataKey: []byte("no")}},
				{Name: "tfstate-default-ab", Data: map[string][]byte{DataKey: []byte("no")}},
			}, three...),
			want: big,
		},
		"none": {
			reason:  "no Secret is no state",
			secrets: []Secret{{Name: "tfstate-default-b"}},
			wantErr: ErrNoState,
		},
		"gap": {
			reason:  "part-2 without part-1",
			secrets: []Secret{three[0], three[2]},
			wantErr: ErrMissingChunk,
		},
		"no chunk 0": {
			reason:  "parts without the main Secret",
			secrets: []Secret{three[1], three[2]},
			wantErr: ErrMissingChunk,
		},
		"no data key": {
			reason:  "a Secret whose tfstate key is gone",
			secrets: []Secret{three[0], {Name: three[1].Name}, three[2]},
			wantErr: ErrMissingChunk,
		},
		"duplicate": {
			reason:  "part-01 and part-1 are both chunk 1 to terraform",
			secrets: append([]Secret{{Name: "tfstate-default-a-part-01", Data: three[1].Data}}, three...),
			wantErr: ErrDuplicateChunk,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Chunks("a", tc.secrets)
			noValue(t, err)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("%s: error %v, want %v", tc.reason, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got, byteEqual); diff != "" {
				t.Errorf("%s: chunks (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	state := stateJSON(42, false, 2_500_000, "")
	big := split(gz(t, state))
	flipped := split(gz(t, state))
	flipped[1] = bytes.Clone(flipped[1])
	for i := 1000; i < 1100; i++ {
		flipped[1][i] ^= 0xff
	}
	truncated := split(gz(t, state))
	truncated[2] = truncated[2][:len(truncated[2])-10]
	cases := map[string]struct {
		reason  string
		chunks  [][]byte
		want    Meta
		wantErr error
		names   string // the chunk the error names
	}{
		"chunked": {
			reason: "three chunks make the state",
			chunks: big,
			want:   Meta{Serial: 42, Lineage: "387d0f28-47fb-02ef-4b63-1609917a81ab"},
		},
		"compact": {
			reason: "tofu's compact JSON",
			chunks: [][]byte{gz(t, stateJSON(3, true, 1000, ""))},
			want:   Meta{Serial: 3, Lineage: "387d0f28-47fb-02ef-4b63-1609917a81ab"},
		},
		"no chunk":    {reason: "nothing", wantErr: ErrNoState},
		"not gzip":    {reason: "chunk 0 is no gzip", chunks: [][]byte{[]byte(canary)}, wantErr: ErrCorrupt, names: "chunk-0"},
		"wrong order": {reason: "chunks 1 and 2 swapped", chunks: [][]byte{big[0], big[2], big[1]}, wantErr: ErrCorrupt},
		// Changed bytes inside a chunk still inflate; the checksum at the
		// end finds them. VerifyDigests names the chunk.
		"flipped":      {reason: "bytes of chunk 1 changed", chunks: flipped, wantErr: ErrCorrupt},
		"truncated":    {reason: "the last chunk cut short", chunks: truncated, wantErr: ErrCorrupt, names: "chunk-2"},
		"chunk lost":   {reason: "the last chunk left out", chunks: big[:2], wantErr: ErrCorrupt, names: "chunk-1"},
		"trailing":     {reason: "bytes after the gzip stream", chunks: [][]byte{big[0], big[1], big[2], []byte("xx")}, wantErr: ErrCorrupt, names: "chunk-3"},
		"not JSON":     {reason: "gzip of no JSON", chunks: [][]byte{gz(t, []byte(canary))}, wantErr: ErrCorrupt},
		"no serial":    {reason: "no serial", chunks: [][]byte{gz(t, []byte(`{"lineage":"l","outputs":{"x":{"value":"`+canary+`"}}}`))}, wantErr: ErrCorrupt},
		"bad serial":   {reason: "a serial that is no count", chunks: [][]byte{gz(t, []byte(`{"serial":"`+canary+`","lineage":"l"}`))}, wantErr: ErrCorrupt},
		"cut JSON":     {reason: "the JSON ends early", chunks: [][]byte{gz(t, state[:len(state)/2])}, wantErr: ErrCorrupt},
		"two objects":  {reason: "data after the state", chunks: [][]byte{gz(t, append(stateJSON(1, true, 10, ""), `{}`...))}, wantErr: ErrCorrupt},
		"syntax error": {reason: "a bad byte in a value", chunks: [][]byte{gz(t, bytes.Replace(state, []byte(`"`+canary), []byte(`"\q`+canary), 1))}, wantErr: ErrCorrupt},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Check(tc.chunks)
			noValue(t, err)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("%s: error %v, want %v", tc.reason, err, tc.wantErr)
			}
			if tc.names != "" && !strings.Contains(err.Error(), tc.names+":") {
				t.Errorf("%s: error %q does not name %s", tc.reason, err, tc.names)
			}
			if diff := cmp.Diff(tc.want, got, byteEqual); diff != "" {
				t.Errorf("%s: meta (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestReadMetaStops: the serial of a large state is read from its first
// bytes; the rest is never read.
func TestReadMetaStops(t *testing.T) {
	state := stateJSON(7, false, 3_000_000, "")
	head := state[:bytes.Index(state, []byte(`"outputs"`))]
	// A reader that fails past the head proves nothing more is read.
	r := io.MultiReader(bytes.NewReader(head), failing{})
	got, err := ReadMeta(r)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Meta{Serial: 7, Lineage: "387d0f28-47fb-02ef-4b63-1609917a81ab"}); got != want {
		t.Errorf("meta %+v, want %+v", got, want)
	}
}

func TestOutputString(t *testing.T) {
	cases := map[string]struct {
		reason string
		state  []byte
		want   string
	}{
		"string":  {reason: "the output's string", state: stateJSON(1, false, 100, `"h": {"value": "h2:abc", "type": "string"}, "other": {"value": "`+canary+`"}`), want: "h2:abc"},
		"compact": {reason: "tofu's compact JSON", state: stateJSON(1, true, 100, `"other": {"value": "x"}, "h": {"type": "string", "value": "h2:abc"}`), want: "h2:abc"},
		"absent":  {reason: "no such output", state: stateJSON(1, false, 100, `"other": {"value": "`+canary+`"}`)},
		"number":  {reason: "an output of another type is no string", state: stateJSON(1, false, 100, `"h": {"value": 12}`)},
		"object":  {reason: "an object is no string", state: stateJSON(1, false, 100, `"h": {"value": {"a": "`+canary+`"}}`)},
		"after resources": {
			reason: "outputs after the resources are found too",
			state:  []byte(`{"serial":1,"resources":[{"x":"` + canary + `"}],"outputs":{"h":{"value":"h2:z"}}}`),
			want:   "h2:z",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := OutputString(bytes.NewReader(tc.state), "h")
			if err != nil {
				t.Fatalf("%s: %v", tc.reason, err)
			}
			if got != tc.want {
				t.Errorf("%s: %q, want %q", tc.reason, got, tc.want)
			}
		})
	}
	// A corrupt state is an error without its value.
	_, err := OutputString(strings.NewReader(`{"outputs":{"h":{"value":`+canary+`}}}`), "h")
	noValue(t, err)
	if !errors.Is(err, ErrCorrupt) {
		t.Errorf("not JSON: %v", err)
	}
}

func TestReadOutput(t *testing.T) {
	cases := map[string]struct {
		reason string
		state  []byte
		want   Output
	}{
		"object": {reason: "the value as the state holds it", state: stateJSON(1, false, 100, `"e": {"value": {"b": 1, "a": "x"}, "type": ["object", {}]}, "other": {"value": "`+canary+`"}`),
			want: Output{Found: true, Value: json.RawMessage(`{"b": 1, "a": "x"}`)}},
		"sensitive": {reason: "terraform's sensitive mark", state: stateJSON(1, true, 100, `"e": {"sensitive": true, "value": {"a": "x"}}`),
			want: Output{Found: true, Sensitive: true, Value: json.RawMessage(`{"a": "x"}`)}},
		"absent": {reason: "no such output", state: stateJSON(1, false, 100, `"other": {"value": "`+canary+`"}`)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ReadOutput(bytes.NewReader(tc.state), "e")
			if err != nil {
				t.Fatalf("%s: %v", tc.reason, err)
			}
			if got.Found != tc.want.Found || got.Sensitive != tc.want.Sensitive || !bytes.Equal(compactJSON(t, got.Value), compactJSON(t, tc.want.Value)) {
				t.Errorf("%s: %+v, want %+v", tc.reason, got, tc.want)
			}
		})
	}
	_, err := ReadOutput(strings.NewReader(`{"outputs":{"e":{"sensitive":"`+canary+`"}}}`), "e")
	noValue(t, err)
	if err == nil {
		t.Error("a sensitive mark that is no bool read as one")
	}
}

// compactJSON is b without its spaces, nil for nil.
func compactJSON(t *testing.T, b []byte) []byte {
	t.Helper()
	if b == nil {
		return nil
	}
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func TestReadChunkDir(t *testing.T) {
	chunks := [][]byte{[]byte("zero"), []byte("one"), []byte("two")}
	// A mounted Secret: the files link into ..data.
	mounted := func(t *testing.T, names ...string) string {
		dir := t.TempDir()
		data := filepath.Join(dir, "..2026_12_01_15_00_00.000")
		if err := os.Mkdir(data, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Base(data), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			var i int
			fmt.Sscanf(n, "chunk-%d", &i)
			if err := os.WriteFile(filepath.Join(data, n), chunks[i%3], 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join("..data", n), filepath.Join(dir, n)); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	cases := map[string]struct {
		reason  string
		names   []string
		want    [][]byte
		wantErr error
		msg     string
	}{
		"all":     {reason: "three chunks in order", names: []string{"chunk-2", "chunk-0", "chunk-1"}, want: chunks},
		"empty":   {reason: "no chunk file", wantErr: ErrNoState},
		"gap":     {reason: "chunk-1 missing", names: []string{"chunk-0", "chunk-2"}, wantErr: ErrMissingChunk, msg: "chunk-1 is missing"},
		"no 0":    {reason: "chunk-0 missing", names: []string{"chunk-1"}, wantErr: ErrMissingChunk, msg: "chunk-0 is missing"},
		"leading": {reason: "chunk-01 is refused", names: []string{"chunk-0", "chunk-01"}, wantErr: ErrCorrupt, msg: `"chunk-01"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ReadChunkDir(mounted(t, tc.names...))
			if !errors.Is(err, tc.wantErr) || (tc.msg != "" && !strings.Contains(err.Error(), tc.msg)) {
				t.Fatalf("%s: error %v, want %v naming %s", tc.reason, err, tc.wantErr, tc.msg)
			}
			if diff := cmp.Diff(tc.want, got, byteEqual); diff != "" {
				t.Errorf("%s: chunks (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
	if _, err := ReadChunkDir(filepath.Join(t.TempDir(), "nowhere")); !errors.Is(err, ErrNoState) {
		t.Errorf("no folder: %v", err)
	}
}

func TestParseLockInfo(t *testing.T) {
	// As terraform 1.11.4 wrote it on the Lease.
	got, err := ParseLockInfo(`{"ID":"6a826c08-2542-1723-cd8b-30902e92b8d0","Operation":"OperationTypeApply","Info":"","Who":"root@vm","Version":"1.11.4","Created":"2026-12-01T15:37:58.221166617Z","Path":""}`)
	if err != nil {
		t.Fatal(err)
	}
	want := LockInfo{ID: "6a826c08-2542-1723-cd8b-30902e92b8d0", Operation: "OperationTypeApply", Who: "root@vm",
		Version: "1.11.4", Created: time.Date(2026, 12, 1, 15, 37, 58, 221166617, time.UTC)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lock info (-want +got):\n%s", diff)
	}
}

// failing fails every read.
type failing struct{}

func (failing) Read([]byte) (int, error) { return 0, errors.New("read past the serial and lineage") }

func TestVerifyDigests(t *testing.T) {
	chunks := [][]byte{[]byte("zero"), []byte("one"), []byte("two")}
	digests := Digests(chunks)
	cases := map[string]struct {
		reason  string
		chunks  [][]byte
		wantErr error
		msg     string
	}{
		"same":    {reason: "the chunks backed up", chunks: chunks},
		"changed": {reason: "chunk 1 changed", chunks: [][]byte{chunks[0], []byte("One"), chunks[2]}, wantErr: ErrCorrupt, msg: "chunk-1 does not match"},
		"swapped": {reason: "chunks 1 and 2 swapped", chunks: [][]byte{chunks[0], chunks[2], chunks[1]}, wantErr: ErrCorrupt, msg: "chunk-1 does not match"},
		"fewer":   {reason: "chunk 2 lost", chunks: chunks[:2], wantErr: ErrMissingChunk, msg: "chunk-2 is missing"},
		"more":    {reason: "a chunk added", chunks: append(slices.Clone(chunks), []byte("x")), wantErr: ErrMissingChunk, msg: "chunk-3 is one more"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := VerifyDigests(tc.chunks, digests)
			if !errors.Is(err, tc.wantErr) || (tc.msg != "" && !strings.Contains(err.Error(), tc.msg)) {
				t.Errorf("%s: error %v, want %v naming %q", tc.reason, err, tc.wantErr, tc.msg)
			}
		})
	}
}

// byteEqual compares chunks whole: cmp would walk megabytes byte by byte.
var byteEqual = cmp.Comparer(func(a, b []byte) bool { return bytes.Equal(a, b) })

// TestOutputsOf: every output, read in one pass, answers as ReadOutput
// does, a missing one included; a corrupt state is an error each time.
func TestOutputsOf(t *testing.T) {
	state := `{"version":4,"serial":1,"lineage":"l","outputs":{"a":{"value":"x","type":"string"},"b":{"value":[1,2],"type":["list","number"],"sensitive":true}},"resources":[]}`
	chunks := split(gz(t, []byte(state)))
	read := OutputsOf(chunks)
	for _, name := range []string{"a", "b", "missing", "a"} {
		got, err := read(name)
		if err != nil {
			t.Fatal(err)
		}
		st, err := Open(chunks)
		if err != nil {
			t.Fatal(err)
		}
		want, err := ReadOutput(st, name)
		if err != nil {
			t.Fatal(err)
		}
		if got.Found != want.Found || got.Sensitive != want.Sensitive || string(got.Value) != string(want.Value) {
			t.Errorf("%s: %+v, want %+v", name, got, want)
		}
	}
	bad := OutputsOf([][]byte{[]byte("not gzip")})
	for range 2 {
		if _, err := bad("a"); err == nil {
			t.Error("a corrupt state read without an error")
		}
	}
}
