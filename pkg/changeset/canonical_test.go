package changeset

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCanonical(t *testing.T) {
	cases := []struct {
		name string
		in   any
		want string
	}{
		{"keys sorted at every depth", json.RawMessage(`{"b":1,"a":{"d":2,"c":[3,{"f":4,"e":5}]}}`), `{"a":{"c":[3,{"e":5,"f":4}],"d":2},"b":1}`},
		{"numbers as written", json.RawMessage(`{"big":9007199254740993,"f":1.50}`), `{"big":9007199254740993,"f":1.50}`},
		{"no html escaping", map[string]string{"v": "<known after apply> & more"}, `{"v":"<known after apply> & more"}`},
		{"struct fields by name", Hole{Reason: "r", Address: "a"}, `{"address":"a","reason":"r"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Canonical(c.in)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Errorf("got %s, want %s", got, c.want)
			}
		})
	}
	a, _ := Digest("x1:", json.RawMessage(`{"n":9007199254740993}`))
	b, _ := Digest("x1:", json.RawMessage(`{"n":9007199254740992}`))
	if a == b {
		t.Error("two integers float64 cannot tell apart digest alike")
	}
}

// TestCanonicalRefusesInvalidUTF8: encoding/json writes any byte that is
// not UTF-8 as U+FFFD, so two distinct strings would digest alike. Each
// place such a string can hide is refused, naming where, never the value.
func TestCanonicalRefusesInvalidUTF8(t *testing.T) {
	a, b := "secret-canary\xff", "secret-canary\xfe"
	cases := []struct {
		name  string
		in    func(s string) any
		where string
	}{
		{"struct field", func(s string) any { return Hole{Reason: s} }, "$.reason"},
		{"map value", func(s string) any { return map[string]any{"k": []any{s}} }, `$["k"][0]`},
		{"map key", func(s string) any { return map[string]int{s: 1} }, "a key under $"},
		{"pointer", func(s string) any { return &Entry{Address: s} }, "$.address"},
		{"raw JSON", func(s string) any { return json.RawMessage(`{"v":"` + s + `"}`) }, "raw JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			da, errA := Digest("x1:", c.in(a))
			db, errB := Digest("x1:", c.in(b))
			if errA == nil || errB == nil {
				t.Fatalf("digests %q and %q of distinct strings, want an error", da, db)
			}
			if !strings.Contains(errA.Error(), c.where) || strings.Contains(errA.Error(), "canary") {
				t.Errorf("error %q: want it to name %s and never the value", errA, c.where)
			}
		})
	}
	// U+FFFD itself is a valid character, and bytes go out as base64.
	for _, v := range []any{Hole{Reason: "a\uFFFD"}, []byte("a\xff")} {
		if _, err := Canonical(v); err != nil {
			t.Errorf("Canonical(%#v): %v", v, err)
		}
	}
}
