package fingerprint

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

// doc wraps resource change objects (and optionally output changes) into a
// plan document.
func doc(changes ...string) string {
	return `{"format_version":"1.2","planned_values":{},"resource_changes":[` + strings.Join(changes, ",") + `]}`
}

func docWithOutputs(outputs string, changes ...string) string {
	return `{"format_version":"1.2","planned_values":{},"resource_changes":[` + strings.Join(changes, ",") + `],"output_changes":{` + outputs + `}}`
}

// rc is one resource change; extra is spliced into "change".
func rc(addr, actions, extra string) string {
	acts := `"` + strings.ReplaceAll(actions, ",", `","`) + `"`
	if extra != "" {
		extra = "," + extra
	}
	return fmt.Sprintf(`{"address":%q,"mode":"managed","type":"terraform_data","name":"x","change":{"actions":[%s]%s}}`, addr, acts, extra)
}

func hmacSHA256(key, b []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(b)
	return m.Sum(nil)
}

func compute(t *testing.T, key []byte, plan string) *Result {
	t.Helper()
	r, err := Compute(key, strings.NewReader(plan))
	if err != nil {
		t.Fatalf("Compute: %v\nplan: %s", err, plan)
	}
	return r
}

// computeDetail computes with Detail, and checks that Detail changes
// nothing in the report.
func computeDetail(t *testing.T, plan string) *Result {
	t.Helper()
	h, err := New(testKey)
	if err != nil {
		t.Fatal(err)
	}
	h.Detail = true
	r, err := h.Compute(strings.NewReader(plan))
	if err != nil {
		t.Fatalf("Compute: %v\nplan: %s", err, plan)
	}
	if d := cmp.Diff(compute(t, testKey, plan).Report, r.Report); d != "" {
		t.Errorf("Detail changes the report (-without +with):\n%s", d)
	}
	return r
}

func TestHashRules(t *testing.T) {
	upd := func(before, after string, more ...string) string {
		extra := `"before":` + before + `,"after":` + after
		for _, m := range more {
			extra += "," + m
		}
		return doc(rc("terraform_data.x", "update", extra))
	}
	create := func(after string, more ...string) string {
		extra := `"before":null,"after":` + after
		for _, m := range more {
			extra += "," + m
		}
		return doc(rc("terraform_data.x", "create", extra))
	}
	cases := []struct {
		reason string
		a, b   string
		equal  bool
	}{
		{"the two orders of a replacement differ",
			doc(rc("a.x", "delete,create", `"before":{"v":1},"after":{"v":2}`)),
			doc(rc("a.x", "create,delete", `"before":{"v":1},"after":{"v":2}`)), false},
		{"another address is another line",
			doc(rc("a.x", "delete", "")), doc(rc("a.y", "delete", "")), false},
		{"a no-op resource is not a change",
			doc(rc("a.x", "no-op", `"before":{"v":1},"after":{"v":1}`)), doc(), true},
		{"a no-op with an import is a change",
			doc(rc("a.x", "no-op", `"before":{"v":1},"after":{"v":1},"importing":{"id":"i-1"}`)), doc(), false},
		{"a no-op with a move is a change",
			doc(`{"address":"a.x","previous_address":"a.old","change":{"actions":["no-op"],"before":{},"after":{}}}`), doc(), false},
		{"a no-op output is not a change",
			docWithOutputs(`"o":{"actions":["no-op"],"before":1,"after":1}`), doc(), true},
		{"an output that changes is a change",
			docWithOutputs(`"o":{"actions":["update"],"before":1,"after":2}`), doc(), false},
		{"an update binds the new value",
			upd(`{"a":1}`, `{"a":2}`), upd(`{"a":1}`, `{"a":3}`), false},
		{"an update binds the old value",
			upd(`{"a":1}`, `{"a":2}`), upd(`{"a":0}`, `{"a":2}`), false},
		{"attributes the update leaves alone are not bound",
			upd(`{"a":1,"desired":3}`, `{"a":2,"desired":3}`), upd(`{"a":1,"desired":7}`, `{"a":2,"desired":7}`), true},
		{"untouched nested attributes are not bound",
			upd(`{"t":{"a":1,"b":"x"}}`, `{"t":{"a":2,"b":"x"}}`), upd(`{"t":{"a":1,"b":"y"}}`, `{"t":{"a":2,"b":"y"}}`), true},
		{"an untouched list element is not bound",
			upd(`{"l":[1,5]}`, `{"l":[2,5]}`), upd(`{"l":[1,6]}`, `{"l":[2,6]}`), true},
		{"unknown after apply is bound as unknown, not as a value",
			upd(`{"a":1}`, `{}`, `"after_unknown":{"a":true}`), upd(`{"a":1}`, `{"a":1}`), false},
		{"an unknown attribute differs from a known new value",
			upd(`{"a":1}`, `{}`, `"after_unknown":{"a":true}`), upd(`{"a":1}`, `{"a":2}`), false},
		{"a change in sensitivity is bound",
			upd(`{"a":1,"b":1}`, `{"a":1,"b":2}`, `"before_sensitive":{"a":true},"after_sensitive":{}`),
			upd(`{"a":1,"b":1}`, `{"a":1,"b":2}`, `"before_sensitive":{"a":true},"after_sensitive":{"a":true}`), false},
		{"a sensitive value is bound inside the HMAC",
			upd(`{"p":"x"}`, `{"p":"y"}`, `"before_sensitive":{"p":true},"after_sensitive":{"p":true}`),
			upd(`{"p":"x"}`, `{"p":"z"}`, `"before_sensitive":{"p":true},"after_sensitive":{"p":true}`), false},
		{"a whole-container sensitivity flip is bound",
			upd(`{"m":{"k":1}}`, `{"m":{"k":1}}`, `"before_sensitive":{"m":true},"after_sensitive":{}`),
			upd(`{"m":{"k":1}}`, `{"m":{"k":1}}`), false},
		{"absent and null differ",
			upd(`{"a":1}`, `{"a":null}`), upd(`{"a":1}`, `{}`), false},
		{"a list index and a map key differ",
			upd(`{"m":["a"]}`, `{"m":["b"]}`), upd(`{"m":{"0":"a"}}`, `{"m":{"0":"b"}}`), false},
		{"a key holding a slash is not a nested path",
			upd(`{"m":{"a/b":1}}`, `{"m":{"a/b":2}}`), upd(`{"m":{"a":{"b":1}}}`, `{"m":{"a":{"b":2}}}`), false},
		{"a key holding a dot is not a nested path",
			upd(`{"m":{"a.b":1}}`, `{"m":{"a.b":2}}`), upd(`{"m":{"a":{"b":1}}}`, `{"m":{"a":{"b":2}}}`), false},
		{"a replace binds only what differs",
			doc(rc("a.x", "delete,create", `"before":{"v":1,"keep":1},"after":{"v":2,"keep":1}`)),
			doc(rc("a.x", "delete,create", `"before":{"v":1,"keep":9},"after":{"v":2,"keep":9}`)), true},
		{"a create binds the planned object",
			create(`{"a":1}`), create(`{"a":2}`), false},
		{"a create binds its unknown markers",
			create(`{"a":1}`, `"after_unknown":{"id":true}`), create(`{"a":1}`, `"after_unknown":{"arn":true}`), false},
		{"a create binds its sensitive markers",
			create(`{"a":1}`, `"after_sensitive":{"a":true}`), create(`{"a":1}`), false},
		{"a read binds the planned object",
			doc(rc("data.x.y", "read", `"after":{"q":1}`)), doc(rc("data.x.y", "read", `"after":{"q":2}`)), false},
		{"a delete binds nothing about the resource",
			doc(rc("a.x", "delete", `"before":{"v":1}`)), doc(rc("a.x", "delete", `"before":{"v":2}`)), true},
		{"a forget binds nothing about the resource",
			doc(rc("a.x", "forget", `"before":{"v":1}`)), doc(rc("a.x", "forget", `"before":{"v":2}`)), true},
		{"a delete is not a forget",
			doc(rc("a.x", "delete", "")), doc(rc("a.x", "forget", "")), false},
		{"an import binds the id",
			doc(rc("a.x", "no-op", `"importing":{"id":"i-1"}`)), doc(rc("a.x", "no-op", `"importing":{"id":"i-2"}`)), false},
		{"an import binds the identity",
			doc(rc("a.x", "no-op", `"importing":{"identity":{"name":"a"}}`)), doc(rc("a.x", "no-op", `"importing":{"identity":{"name":"b"}}`)), false},
		{"a move binds the from-address",
			doc(`{"address":"a.x","previous_address":"a.old","change":{"actions":["no-op"]}}`),
			doc(`{"address":"a.x","previous_address":"a.older","change":{"actions":["no-op"]}}`), false},
		{"a delete still carries its move",
			doc(`{"address":"a.x","previous_address":"a.old","change":{"actions":["delete"]}}`),
			doc(rc("a.x", "delete", "")), false},
		{"a forget still carries its import",
			doc(rc("a.x", "forget", `"importing":{"id":"1"}`)), doc(rc("a.x", "forget", "")), false},
		{"an update with a move binds the move",
			doc(`{"address":"a.x","previous_address":"a.old","change":{"actions":["update"],"before":{"v":1},"after":{"v":2}}}`),
			doc(rc("a.x", "update", `"before":{"v":1},"after":{"v":2}`)), false},
		{"an output follows the update rules",
			docWithOutputs(`"o":{"actions":["update"],"before":{"a":1,"b":1},"after":{"a":2,"b":1}}`),
			docWithOutputs(`"o":{"actions":["update"],"before":{"a":1,"b":5},"after":{"a":2,"b":5}}`), true},
		{"an output that becomes unknown differs from a known one",
			docWithOutputs(`"o":{"actions":["update"],"before":1,"after_unknown":true}`),
			docWithOutputs(`"o":{"actions":["update"],"before":1,"after":2}`), false},
		{"a sensitive output value is bound",
			docWithOutputs(`"o":{"actions":["create"],"after":"s1","after_sensitive":true}`),
			docWithOutputs(`"o":{"actions":["create"],"after":"s2","after_sensitive":true}`), false},
		{"output and resource names do not collide",
			docWithOutputs(`"x":{"actions":["delete"]}`), doc(rc("output.x", "delete", "")), true},
		{"object key order in the input never matters",
			create(`{"a":1,"b":{"c":2,"d":[1,{"e":3,"f":4}]}}`), create(`{"b":{"d":[1,{"f":4,"e":3}],"c":2},"a":1}`), true},
		{"member order of the change object never matters",
			doc(`{"change":{"after":{"a":1},"before":null,"actions":["create"]},"address":"terraform_data.x"}`),
			create(`{"a":1}`), true},
		{"whitespace never matters",
			create(`{"a": [1, 2],  "b" : "x"}`), create("{\n\"a\":[1,2],\"b\":\"x\"\n}"), true},
		{"string escapes are decoded",
			create(`{"a":"\u0041\/\u00e9"}`), create(`{"a":"A/é"}`), true},
		{"numbers are kept as written: integers float64 cannot tell apart",
			create(`{"n":12345678901234567890}`), create(`{"n":12345678901234567891}`), false},
		{"numbers are kept as written: 1 and 1.0",
			create(`{"n":1}`), create(`{"n":1.0}`), false},
		{"a string is not a number",
			create(`{"n":1}`), create(`{"n":"1"}`), false},
		{"false, {}, [] and absent markers hash alike (sensitive)",
			create(`{"a":[1]}`, `"after_sensitive":false`), create(`{"a":[1]}`, `"after_sensitive":{"a":[false]}`), true},
		{"false, {}, [] and absent markers hash alike (unknown)",
			create(`{"a":[1]}`, `"after_unknown":{"a":[]}`), create(`{"a":[1]}`), true},
		{"array markers keep positions",
			create(`{"a":[1,2]}`, `"after_sensitive":{"a":[true,false]}`), create(`{"a":[1,2]}`, `"after_sensitive":{"a":[false,true]}`), false},
		{"trailing unmarked array positions hash alike",
			create(`{"a":[1,2]}`, `"after_sensitive":{"a":[true,false]}`), create(`{"a":[1,2]}`, `"after_sensitive":{"a":[true]}`), true},
		{"update markers spelled differently hash alike",
			upd(`{"a":1}`, `{"a":2}`, `"before_sensitive":false,"after_sensitive":{"a":false}`), upd(`{"a":1}`, `{"a":2}`, `"after_unknown":{}`), true},
		{"unrelated top-level sections are not bound",
			`{"format_version":"1.2","planned_values":{"x":1},"prior_state":{"values":1},"resource_drift":[{"address":"a.x"}],"timestamp":"t1",` + doc(rc("a.x", "delete", ""))[1:],
			`{"format_version":"1.1","planned_values":{"x":2},"prior_state":{"values":2},"timestamp":"t2",` + doc(rc("a.x", "delete", ""))[1:], true},
		{"other members of a resource change are not bound",
			doc(`{"address":"a.x","provider_name":"p1","action_reason":"r1","change":{"actions":["delete"]}}`),
			doc(`{"address":"a.x","provider_name":"p2","change":{"actions":["delete"],"replace_paths":[["a"]]}}`), true},
	}
	for _, c := range cases {
		t.Run(c.reason, func(t *testing.T) {
			a := compute(t, testKey, c.a).Report.PlanHash
			b := compute(t, testKey, c.b).Report.PlanHash
			if (a == b) != c.equal {
				t.Errorf("hashes equal = %v, want %v\n a: %s\n b: %s", a == b, c.equal, c.a, c.b)
			}
		})
	}
}

func TestLineConstruction(t *testing.T) {
	plan := docWithOutputs(`"o":{"actions":["create"],"after":"v"}`,
		rc("b.x", "delete", ""),
		rc("a.x", "delete,create", `"before":{"v":1},"after":{"v":2}`))
	r := compute(t, testKey, plan)
	mac := func(effect string) string {
		h := hmacSHA256(testKey, []byte(effect))
		return hex.EncodeToString(h)
	}
	lines := []string{
		"a.x delete,create " + mac(`{"changes":[{"after":2,"before":1,"path":["v"]}]}`),
		"b.x delete " + mac(`{}`),
		"output.o create " + mac(`{"after":"v"}`),
	}
	sum := sha256.Sum256([]byte(strings.Join(lines, "\n")))
	if want := "p2:" + hex.EncodeToString(sum[:]); r.Report.PlanHash != want {
		t.Errorf("PlanHash = %s, want %s (spec 000 construction)", r.Report.PlanHash, want)
	}
}

func TestEmptyPlan(t *testing.T) {
	sum := sha256.Sum256(nil)
	if want := "p2:" + hex.EncodeToString(sum[:]); EmptyPlanHash != want {
		t.Fatalf("EmptyPlanHash = %s, want %s", EmptyPlanHash, want)
	}
	for _, plan := range []string{
		doc(),
		`{"format_version":"1.2","planned_values":{"root_module":{}}}`,
		docWithOutputs(`"o":{"actions":["no-op"],"before":1,"after":1}`, rc("a.x", "no-op", `"before":{},"after":{}`)),
	} {
		r := compute(t, testKey, plan)
		if r.Report.PlanHash != EmptyPlanHash || !r.Report.Empty() {
			t.Errorf("hash of %s = %s, want the empty hash", plan, r.Report.PlanHash)
		}
	}
}

func TestKey(t *testing.T) {
	plan := doc(rc("a.x", "delete", ""))
	if _, err := Compute(nil, strings.NewReader(plan)); !errors.Is(err, ErrNoKey) {
		t.Errorf("nil key: err = %v, want ErrNoKey", err)
	}
	if _, err := Compute(testKey[:31], strings.NewReader(plan)); !errors.Is(err, ErrShortKey) {
		t.Errorf("31-byte key: err = %v, want ErrShortKey", err)
	}
	other := bytes.Repeat([]byte{7}, 32)
	if compute(t, testKey, plan).Report.PlanHash == compute(t, other, plan).Report.PlanHash {
		t.Error("the same plan hashes alike under two keys")
	}
	if compute(t, testKey, plan).Report.PlanHash != compute(t, bytes.Clone(testKey), plan).Report.PlanHash {
		t.Error("the same plan and key hash differently")
	}
	// The empty plan has no line to key: its hash is fixed.
	if compute(t, other, doc()).Report.PlanHash != EmptyPlanHash {
		t.Error("the empty plan depends on the key")
	}
}

func TestMatches(t *testing.T) {
	h := compute(t, testKey, doc(rc("a.x", "delete", ""))).Report.PlanHash
	old := "p1:" + strings.TrimPrefix(h, "p2:")
	cases := []struct {
		approved, fresh string
		want            bool
	}{
		{h, h, true},
		{old, old, false},
		{old, h, false},
		{h, h[:len(h)-1], false},
		{"", "", false},
		{EmptyPlanHash, EmptyPlanHash, true},
	}
	for _, c := range cases {
		if got := Matches(c.approved, c.fresh); got != c.want {
			t.Errorf("Matches(%q, %q) = %v, want %v", c.approved, c.fresh, got, c.want)
		}
	}
}

func TestReport(t *testing.T) {
	plan := docWithOutputs(
		`"a":{"actions":["create"],"after":1},"b":{"actions":["no-op"],"before":1,"after":1},"c":{"actions":["delete"],"before":1}`,
		rc("z.new", "create", `"after":{"v":"CANARY-create"}`),
		rc("y.upd", "update", `"before":{"v":"CANARY-before"},"after":{"v":"CANARY-after"}`),
		rc("x.rep", "create,delete", `"before":{"v":1},"after":{"v":2}`),
		rc("w.del", "delete", `"before":{"v":"CANARY-del"}`),
		rc("v.read", "read", `"after":{"v":1}`),
		rc("u.forget", "forget", ""),
		rc("t.imp", "no-op", `"importing":{"id":"CANARY-import"}`),
		`{"address":"s.moved","previous_address":"s.old","change":{"actions":["update"],"before":{"v":1},"after":{"v":2}}}`,
		`{"address":"r.both","previous_address":"r.old","change":{"actions":["no-op"],"importing":{"id":"x"}}}`,
		rc("q.noop", "no-op", `"before":{"v":1},"after":{"v":1}`),
	)
	r := computeDetail(t, plan)
	if r.Changes.Len() != 11 {
		t.Errorf("%d changes, want 11 (9 resources, 2 outputs)", r.Changes.Len())
	}
	want := Report{
		Add: 2, Change: 2, Destroy: 2, Replace: 1, OutputChanges: 2,
		Resources: []string{
			"r.both (import, move)",
			"s.moved (update, move)",
			"t.imp (import)",
			"u.forget (forget)",
			"v.read (read)",
			"w.del (delete)",
			"x.rep (replace)",
			"y.upd (update)",
			"z.new (create)",
		},
		PlanHash: r.Report.PlanHash,
	}
	if d := cmp.Diff(want, r.Report); d != "" {
		t.Errorf("report (-want +got):\n%s", d)
	}
	b, _ := json.Marshal(r)
	if bytes.Contains(b, []byte("CANARY")) {
		t.Errorf("the result holds a value: %s", b)
	}
}

func TestReportTruncated(t *testing.T) {
	for _, n := range []int{MaxResources, MaxResources + 1} {
		var cs []string
		for i := range n {
			cs = append(cs, rc(fmt.Sprintf("a.r[%03d]", n-i), "delete", ""))
		}
		r := compute(t, testKey, doc(cs...))
		if len(r.Report.Resources) != MaxResources || r.Report.Truncated != (n > MaxResources) || r.Report.Destroy != n {
			t.Errorf("%d changes: %d entries, truncated %v, destroy %d", n, len(r.Report.Resources), r.Report.Truncated, r.Report.Destroy)
		}
		first, last := r.Report.Resources[0], r.Report.Resources[MaxResources-1]
		if first != "a.r[001] (delete)" || last != "a.r[050] (delete)" {
			t.Errorf("%d changes: entries run from %q to %q, want the 50 smallest addresses in order", n, first, last)
		}
	}
}

func TestMalformed(t *testing.T) {
	cases := []struct {
		plan, want string
	}{
		{``, "unexpected end of input"},
		{`not json`, `expected '{'`},
		{`[]`, `expected '{'`},
		{`{"format_version":"1.2","planned_values":{},"resource_changes":[`, "unexpected end of input"},
		{`{"format_version":"1.2","planned_values":{},"resource_changes":{}}`, `resource_changes: invalid JSON at byte 63: expected '['`},
		{`{"format_version":"1.2","planned_values":{}} trailing`, "after the plan document"},
		{`{"format_version":"2.0","planned_values":{}}`, `format_version "2.0"`},
		{`{"format_version":"1.0","values":{}}`, "not a plan"},
		{`{"format_version":"1.2","planned_values":{},"errored":true}`, "errored"},
		// A scalar that ends the input, captured whole: the fuzzer's first find.
		{`{"format_version":0`, "format_version: not a string"},
		{`{"planned_values":{},"errored":tru`, "invalid literal of 3 bytes"},
		{doc(`{"change":{"actions":["delete"]}}`), "resource_changes[0]: address: missing"},
		{doc(rc("a.x", "explode", "")), `resource_changes[0]: a.x: change.actions: unsupported actions "explode"`},
		{doc(`{"address":"a.x","change":{"actions":[]}}`), "change.actions: missing, empty"},
		{doc(`{"address":"a.x","change":{"actions":[1]}}`), "not a list of action names"},
		{doc(`{"address":"a.x"}`), "a.x: change: missing"},
		{doc(`{"address":"a.x","change":{"actions":["update"],"before":{"a" 1}}}`), "expected ':'"},
		{doc(`{"address":"a.x","change":{"actions":["update"],"before":[1 2]}}`), "expected ',' or ']'"},
		{doc(`{"address":"a.x","change":{"actions":["update"],"before":{"a":tru}}}`), `invalid literal of 3 bytes`},
		{doc(`{"address":"a.x","change":{"actions":["update"],"before":{"a":01}}}`), `invalid literal of 2 bytes`},
		{doc(`{"address":"a.x","change":{"actions":["update"],"before":"\x"}}`), `invalid escape`},
		{doc(`{"address":"a.x","change":{"actions":["update"],"before":{"a":1]}}`), "expected ',' or '}'"},
		{`{"format_version":"1.2","planned_values":{"a":[}]}`, `unexpected '}'`},
		{doc(rc("a.x", "no-op", `"importing":"i-1"`)), "change.importing: not an object"},
		{doc(strings.Repeat("[", 600) + strings.Repeat("]", 600)), "nesting deeper"},
	}
	for _, c := range cases {
		_, err := Compute(testKey, strings.NewReader(c.plan))
		if !errors.Is(err, ErrMalformedPlan) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("plan %.80q:\n err = %v\nwant ErrMalformedPlan containing %q", c.plan, err, c.want)
		}
	}
}

// TestStreamBoundaries reads plans one byte at a time, so every string,
// escape and literal crosses a refill of the window.
func TestStreamBoundaries(t *testing.T) {
	plans := []string{
		doc(rc("a.x", "create", `"after":{"s":"a\\\"b\\\\","t":"\\\\\\\\","u":"\"","n":-1.5e+10,"z":null,"b":true}`)),
		`{"skip":{"s":"\\\\\"}]","n":[1,2,{"x":"\\"}]},"format_version":"1.2","planned_values":null,"resource_changes":[` +
			rc("a.x", "update", `"before":{"k":"\\"},"after":{"k":"\\\\"}`) + `]}`,
	}
	for _, plan := range plans {
		whole := compute(t, testKey, plan)
		r, err := Compute(testKey, iotest.OneByteReader(strings.NewReader(plan)))
		if err != nil {
			t.Fatalf("one byte at a time: %v", err)
		}
		if r.Report.PlanHash != whole.Report.PlanHash || whole.Report.Empty() {
			t.Errorf("one byte at a time: %s, whole: %s", r.Report.PlanHash, whole.Report.PlanHash)
		}
	}
}

// chunkReader returns its data in reads of the given sizes, in turn.
type chunkReader struct {
	data  []byte
	sizes []int
	i     int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(r.data), r.sizes[r.i%len(r.sizes)])
	r.i++
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

// TestWindowBoundaries puts every part of a plan (member names, strings,
// escapes, numbers, whole changes) across the edge of the scanner's window
// and across reads of odd sizes.
func TestWindowBoundaries(t *testing.T) {
	tail := `,"format_version":"1.2","planned_values":{},"resource_changes":[` +
		rc("a.x", "update", `"before":{"k\\\"q":"\\","n":12345678901234567890},"after":{"k\\\"q":"v\"w","n":1.5e-7}`) + "," +
		rc("a.y", "create", `"after":{"s":"`+strings.Repeat("é", 40)+`"}`) +
		`],"output_changes":{"o\"ut":{"actions":["create"],"after":"x"}}}`
	want := ""
	for shift := 0; shift < len(tail); shift += 3 {
		plan := `{"pad":"` + strings.Repeat("p", scanWindow-8-len(tail)+shift) + `"` + tail
		r, err := Compute(testKey, strings.NewReader(plan))
		if err != nil {
			t.Fatalf("shift %d: %v", shift, err)
		}
		if want == "" {
			want = r.Report.PlanHash
		}
		if r.Report.PlanHash != want || r.Report.Add != 1 || r.Report.OutputChanges != 1 {
			t.Fatalf("shift %d: %+v, want hash %s", shift, r.Report, want)
		}
		if shift%30 == 0 {
			r, err := Compute(testKey, &chunkReader{data: []byte(plan), sizes: []int{4093, 7, 1, 65536, 13}})
			if err != nil || r.Report.PlanHash != want {
				t.Fatalf("shift %d in odd reads: %v %v", shift, r, err)
			}
		}
	}
}

func TestReadError(t *testing.T) {
	boom := errors.New("pipe closed")
	_, err := Compute(testKey, iotest.ErrReader(boom))
	if !errors.Is(err, boom) {
		t.Errorf("err = %v, want the read error", err)
	}
}

func TestDetailAndCompare(t *testing.T) {
	h, err := New(testKey)
	if err != nil {
		t.Fatal(err)
	}
	h.Detail = true
	run := func(plan string) *Detail {
		r, err := h.Compute(strings.NewReader(plan))
		if err != nil {
			t.Fatal(err)
		}
		return r.Changes
	}
	approved := run(doc(
		rc("a.upd", "update", `"before":{"tags":{"env":"SECRET-1","team":"a"},"n":1},"after":{"tags":{"env":"SECRET-2","team":"a"},"n":2}`),
		rc("b.same", "delete", ""),
		rc("c.gone", "create", `"after":{"v":1}`),
		rc("e.sens", "update", `"before":{"m":{"k1":"a"}},"after":{"m":{"k1":"b"}},"before_sensitive":{"m":true},"after_sensitive":{"m":true}`),
	))
	fresh := run(doc(
		rc("a.upd", "update", `"before":{"tags":{"env":"SECRET-1","team":"a"},"n":1},"after":{"tags":{"env":"SECRET-3","team":"a"},"n":2}`),
		rc("b.same", "delete", ""),
		rc("d.new", "delete,create", `"before":{"v":1},"after":{"v":2}`),
		rc("e.sens", "update", `"before":{"m":{"k1":"a"}},"after":{"m":{"k1":"c"}},"before_sensitive":{"m":true},"after_sensitive":{"m":true}`),
	))
	got := Compare(approved, fresh)
	want := []Difference{
		{Address: "a.upd", Kind: Changed, Labels: "update", Paths: []string{"tags.env"}},
		{Address: "c.gone", Kind: Gone, Labels: "create"},
		{Address: "d.new", Kind: Added, Labels: "replace"},
		{Address: "e.sens", Kind: Changed, Labels: "update", Paths: []string{"m"}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Compare (-want +got):\n%s", d)
	}
	b, _ := json.Marshal(slices.Collect(fresh.All()))
	if bytes.Contains(b, []byte("SECRET")) || bytes.Contains(b, []byte("k1")) {
		t.Errorf("detail holds a value or a sensitive key: %s", b)
	}
}
