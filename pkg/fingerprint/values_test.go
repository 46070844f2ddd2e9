package fingerprint

import (
	"errors"
	"fmt"
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
	"prior_state":{"format_version":"1.0","values":{"outputs":{"o":{"sensitive":true,"value":"out-old"}},
	  "root_module":{"resources":[{"address":"data.a.s","values":{"pw":"state-secret","n":1},"sensitive_values":{"pw":true}}],
	    "child_modules":[{"resources":[{"values":{"k":["c0","child-secret"]},"sensitive_values":{"k":[false,true]}}]}]}}},
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
	want := []string{`"child-secret"`, `"drift-old"`, `"l1-secret"`, `"new-secret"`, `"old-secret"`, `"out-new"`, `"out-old"`, `"out-old"`, `"state-secret"`, `"var-secret"`, `{"k":1}`}
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

	// A state document, as show -json prints it without a plan.
	state := `{"format_version":"1.0","values":{"outputs":{"s":{"sensitive":true,"value":{"a":"out-secret"}},"p":{"sensitive":false,"value":"plain"}},` +
		`"root_module":{"resources":[{"values":{"input":{"token":"tok-secret","size":"s"}},"sensitive_values":{"input":{"token":true}}}]}}}`
	if v, err := ReadValues(strings.NewReader(state)); err != nil {
		t.Fatal(err)
	} else if got := fmt.Sprintf("%s", v.Sensitive); got != `[{"a":"out-secret"} "tok-secret"]` {
		t.Errorf("a state's sensitive values: %s", got)
	}

	for _, bad := range []string{``, `[]`, `{"resource_changes":{}}`, `{"variables":`, `{"resource_changes":[{"change":[1]}]}`} {
		if _, err := ReadValues(strings.NewReader(bad)); !errors.Is(err, ErrMalformedPlan) {
			t.Errorf("ReadValues(%q): %v, want ErrMalformedPlan", bad, err)
		}
	}
}
