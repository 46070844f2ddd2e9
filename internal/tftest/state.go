package tftest

import (
	"bytes"
	"io"
	"regexp"
	"strconv"
	"testing"

	"github.com/captf/captf/internal/tfstate"
)

// StateJSON is the state JSON that chunks, as terraform's kubernetes
// backend stores them, hold.
func StateJSON(t testing.TB, chunks [][]byte) []byte {
	t.Helper()
	r, err := tfstate.Open(chunks)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// serialPattern is a state's serial member, as terraform (indented) and
// tofu (compact) write it; the first is the top-level one, written before
// the outputs and resources.
var serialPattern = regexp.MustCompile(`"serial": ?[0-9]+`)

// WithSerial is state with its serial set to serial, every other byte
// kept: what terraform's state push -force makes of a pushed state.
func WithSerial(t testing.TB, state []byte, serial int64) []byte {
	t.Helper()
	loc := serialPattern.FindIndex(state)
	if loc == nil {
		t.Fatal("the state has no serial")
	}
	member := state[loc[0]:loc[1]]
	colon := bytes.IndexByte(member, ':')
	number := bytes.TrimLeft(member[colon+1:], " ")
	head := member[:len(member)-len(number)]
	return bytes.Join([][]byte{state[:loc[0]], head, []byte(strconv.FormatInt(serial, 10)), state[loc[1]:]}, nil)
}
