package changeset

import (
	"encoding/json"
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
