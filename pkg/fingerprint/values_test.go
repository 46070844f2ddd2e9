package fingerprint

import (
	"errors"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReadValues(t *testing.T) {
	plan := `{"format_version":"1.2","variables":{"token":{"value":"var-secret"},"size":{"value":"plain"}},
	"planned_values":{"root_module":{"resources":[{"values":{"input":"planned"}}]}},
	"resource_drift":[{"address":"a.d","change":{"before":{"pw":"drift-old"},"after":{"pw":"drift-new"},"before_sensitive":{"pw":true},"after_sensitive":false}}],
	"resource_changes":[
	  {"address":"a.x","change":{"actions":["update"],"before":{"id":"i-1","input":{"size":"a","token":"old-secret"},"output":{"size":"a","token":"old-secret"},"list":["l0","l1"]},
	   "after":{"id":"i-1","input":{"size":"b","token":"new-secret"},"list":["l0","l1-secret"]},"after_unknown":{"output":true},
	   "before_sensitive":{"input":{"token":true},"output":{},"list":[false,false]},"after_sensitive":{"input":{"token":true},"list":[false,true]}}},
	  {"address":"a.y","change":{"actions":["create"],"before":null,"after":{"whole":{"k":1}},"after_unknown":{},"before_sensitive":false,"after_sensitive":{"whole":true}}},
	  {"address":"a.r","mode":"managed","change":{"actions":["delete","create"],"before":{"k":1.0,"t":"a"},"after":{"k":1.0,"t":"b"},"after_unknown":{"k":false}}},
	  {"address":"data.a.d","mode":"data","change":{"actions":["read"],"before":null,"after":{"v":1},"after_unknown":{"v":true}}},
	  {"address":"a.z","change":{"actions":["delete"],"before":{"v":"gone"},"after":null,"before_sensitive":{},"after_sensitive":false}}],
	"output_changes":{"o":{"actions":["update"],"before":"out-old","after":"out-new","before_sensitive":true,"after_sensitive":true},
	  "p":{"actions":["no-op"],"before":"plain-out","after":"plain-out","before_sensitive":false,"after_sensitive":false}},
	"prior_state":{"values":{"outputs":{"o":{"sensitive":true,"value":"out-old"}}}},
	"configuration":{"root_module":{"variables":{"token":{"sensitive":true},"size":{}}}},
	"timestamp":"2026-01-01T00:00:00Z","errored":false}`
	v, err := ReadValues(strings.NewReader(plan))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, raw := range v.Sensitive {
		got = append(got, string(raw))
	}
	sort.Strings(got)
	want := []string{`"drift-old"`, `"l1-secret"`, `"new-secret"`, `"old-secret"`, `"out-new"`, `"out-old"`, `"var-secret"`, `{"k":1}`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sensitive values (-want +got):\n%s", diff)
	}

	wantChanged := []Attributes{
		{Address: "a.x", Action: "update", Names: []string{"input", "list", "output"}},
		{Address: "a.y", Action: "create", Names: []string{"whole"}},
		{Address: "a.r", Action: "replace", Names: []string{"t"}},
	}
	if diff := cmp.Diff(wantChanged, v.Changed); diff != "" {
		t.Errorf("changed attributes (-want +got):\n%s", diff)
	}

	for _, bad := range []string{``, `[]`, `{"resource_changes":{}}`, `{"variables":`, `{"resource_changes":[{"change":[1]}]}`} {
		if _, err := ReadValues(strings.NewReader(bad)); !errors.Is(err, ErrMalformedPlan) {
			t.Errorf("ReadValues(%q): %v, want ErrMalformedPlan", bad, err)
		}
	}
}
