package terraform

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	tfjson "github.com/hashicorp/terraform-json"

	"github.com/captf/captf/internal/preview"
	"github.com/captf/captf/internal/preview/previewtest"
	"github.com/captf/captf/pkg/changeset"
)

// decodePlan decodes a plan document the way Plan does.
func decodePlan(t *testing.T, doc string) *tfjson.Plan {
	t.Helper()
	var p tfjson.Plan
	p.UseJSONNumber(true)
	if err := json.Unmarshal([]byte(doc), &p); err != nil {
		t.Fatalf("decode plan: %v", err)
	}
	return &p
}

// planDoc wraps resource changes (and more top-level members) into a plan
// document of format 1.2.
func planDoc(members string) string {
	return `{"format_version":"1.2","terraform_version":"1.14.0",` + members + `}`
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

func TestReadChanges(t *testing.T) {
	cases := []struct {
		reason  string
		doc     string
		entries []changeset.Entry
		effects []changeset.SideEffect
		outputs []changeset.Entry
	}{
		{
			reason: "a create lists what it sets, numbers as written, unknown without a value, no null it leaves alone",
			doc: planDoc(`"resource_changes":[{"address":"terraform_data.a","change":{"actions":["create"],"before":null,
				"after":{"input":{"n":12345678901234567891,"f":1.50},"triggers_replace":null},
				"after_unknown":{"id":true,"output":true,"input":{}},"before_sensitive":false,"after_sensitive":{"input":{}}}}]`),
			entries: []changeset.Entry{{Member: "m", Address: "terraform_data.a", Action: "create", Attributes: []changeset.Attribute{
				{Name: "id", Unknown: true},
				{Name: "input", After: raw(`{"f":1.50,"n":12345678901234567891}`)},
				{Name: "output", Unknown: true},
			}}},
		},
		{
			reason: "an update lists only the attributes that differ, with both values",
			doc: planDoc(`"resource_changes":[{"address":"x.b","change":{"actions":["update"],
				"before":{"id":"1","tags":{"a":"1"},"size":1,"gone":"g","same":[1,2]},
				"after":{"id":"1","tags":{"a":"2"},"size":1,"same":[1,2]},
				"after_unknown":{},"before_sensitive":{},"after_sensitive":{}}}]`),
			entries: []changeset.Entry{{Member: "m", Address: "x.b", Action: "update", Attributes: []changeset.Attribute{
				{Name: "gone", Before: raw(`"g"`)},
				{Name: "tags", Before: raw(`{"a":"1"}`), After: raw(`{"a":"2"}`)},
			}}},
		},
		{
			reason: "a part sensitive anywhere inside hides the whole attribute, before and after",
			doc: planDoc(`"resource_changes":[{"address":"x.c","change":{"actions":["update"],
				"before":{"conn":{"user":"u","password":"old-secret"},"plain":"p1"},
				"after":{"conn":{"user":"u","password":"new-secret"},"plain":"p2"},
				"after_unknown":{},"before_sensitive":{"conn":{"password":true}},"after_sensitive":{"conn":{"password":true}}}}]`),
			entries: []changeset.Entry{{Member: "m", Address: "x.c", Action: "update", Attributes: []changeset.Attribute{
				{Name: "conn", Sensitive: true},
				{Name: "plain", Before: raw(`"p1"`), After: raw(`"p2"`)},
			}}},
		},
		{
			reason: "an unmarked copy of a sensitive value is hidden too",
			doc: planDoc(`"resource_changes":[{"address":"terraform_data.s","change":{"actions":["update"],
				"before":{"input":{"token":"canary-123"},"output":{"token":"canary-123"},"note":"has canary-123 inside"},
				"after":{"input":{"token":"canary-456"},"note":"plain"},
				"after_unknown":{"output":true},"before_sensitive":{"input":{"token":true}},"after_sensitive":{"input":{"token":true}}}}]`),
			entries: []changeset.Entry{{Member: "m", Address: "terraform_data.s", Action: "update", Attributes: []changeset.Attribute{
				{Name: "input", Sensitive: true},
				{Name: "note", Sensitive: true},
				{Name: "output", Unknown: true, Sensitive: true},
			}}},
		},
		{
			reason: "a sensitive variable's value is hidden wherever it turns up",
			doc: planDoc(`"variables":{"pw":{"value":"hunter22"},"name":{"value":"web"}},
				"configuration":{"root_module":{"variables":{"pw":{"sensitive":true},"name":{}}}},
				"resource_changes":[{"address":"x.v","change":{"actions":["create"],"before":null,
				"after":{"name":"web","cmd":"login hunter22"},"after_unknown":{},"before_sensitive":false,"after_sensitive":{}}}]`),
			entries: []changeset.Entry{{Member: "m", Address: "x.v", Action: "create", Attributes: []changeset.Attribute{
				{Name: "cmd", Sensitive: true},
				{Name: "name", After: raw(`"web"`)},
			}}},
		},
		{
			reason: "a replace marks what forces it; destroy-first and create-first are both replace",
			doc: planDoc(`"resource_changes":[
				{"address":"terraform_data.r","change":{"actions":["delete","create"],
				"before":{"id":"i1","input":"x","triggers_replace":["a"]},"after":{"input":"x","triggers_replace":["b"]},
				"after_unknown":{"id":true,"triggers_replace":[false]},"before_sensitive":{},"after_sensitive":{},
				"replace_paths":[["triggers_replace"]]}},
				{"address":"terraform_data.q","change":{"actions":["create","delete"],
				"before":{"id":"i2"},"after":{},"after_unknown":{"id":true},"before_sensitive":{},"after_sensitive":{}}}]`),
			entries: []changeset.Entry{
				{Member: "m", Address: "terraform_data.r", Action: "replace", Attributes: []changeset.Attribute{
					{Name: "id", Before: raw(`"i1"`), Unknown: true},
					{Name: "triggers_replace", Before: raw(`["a"]`), After: raw(`["b"]`), ForcesReplacement: true},
				}},
				{Member: "m", Address: "terraform_data.q", Action: "replace", Attributes: []changeset.Attribute{
					{Name: "id", Before: raw(`"i2"`), Unknown: true},
				}},
			},
		},
		{
			reason: "a value known in part shows its known part and says it is unknown",
			doc: planDoc(`"resource_changes":[{"address":"x.p","change":{"actions":["update"],
				"before":{"list":["a","b"]},"after":{"list":["a",null]},
				"after_unknown":{"list":[false,true]},"before_sensitive":{},"after_sensitive":{}}}]`),
			entries: []changeset.Entry{{Member: "m", Address: "x.p", Action: "update", Attributes: []changeset.Attribute{
				{Name: "list", Before: raw(`["a","b"]`), After: raw(`["a",null]`), Unknown: true},
			}}},
		},
		{
			reason: "delete, forget, no-op and read, a deposed object, an import and a move",
			doc: planDoc(`"resource_changes":[
				{"address":"x.del","change":{"actions":["delete"],"before":{"id":"1"},"after":null}},
				{"address":"x.fgt","change":{"actions":["forget"],"before":{"id":"2"},"after":null}},
				{"address":"x.cbd","deposed":"00ab12cd","change":{"actions":["delete"],"before":{"id":"3"},"after":null}},
				{"address":"x.imp","change":{"actions":["no-op"],"before":{"id":"4"},"after":{"id":"4"},"importing":{"id":"imp-4"}}},
				{"address":"x.new","previous_address":"x.old","change":{"actions":["no-op"],"before":{"id":"5"},"after":{"id":"5"}}},
				{"address":"data.x.r","change":{"actions":["read"],"before":null,"after":{"v":"1"},"after_unknown":{"w":true}}}]`),
			entries: []changeset.Entry{
				{Member: "m", Address: "x.del", Action: "delete"},
				{Member: "m", Address: "x.fgt", Action: "forget"},
				{Member: "m", Address: "x.cbd (deposed object 00ab12cd)", Action: "delete"},
				{Member: "m", Address: "x.imp", Action: "no-op", Importing: true},
				{Member: "m", Address: "x.new", Action: "no-op"},
				{Member: "m", Address: "data.x.r", Action: "read", Attributes: []changeset.Attribute{
					{Name: "v", After: raw(`"1"`)},
					{Name: "w", Unknown: true},
				}},
			},
			effects: []changeset.SideEffect{
				{Member: "m", Kind: "forget", Address: "x.fgt", Detail: "removed from state, left in place"},
				{Member: "m", Kind: "deposed", Address: "x.cbd", Detail: "deposed object 00ab12cd: delete"},
				{Member: "m", Kind: "import", Address: "x.imp", Detail: "id imp-4"},
				{Member: "m", Kind: "move", Address: "x.new", Detail: "moved from x.old"},
			},
		},
		{
			reason: "output changes: values as written, unknown without a value, sensitive without one",
			doc: planDoc(`"output_changes":{
				"size":{"actions":["update"],"before":1,"after":2.50,"after_unknown":false,"before_sensitive":false,"after_sensitive":false},
				"id":{"actions":["create"],"before":null,"after_unknown":true,"before_sensitive":false,"after_sensitive":false},
				"pw":{"actions":["update"],"before":"old-pw-1","after":"new-pw-2","after_unknown":false,"before_sensitive":true,"after_sensitive":true},
				"same":{"actions":["no-op"],"before":"s","after":"s","after_unknown":false,"before_sensitive":false,"after_sensitive":false},
				"old":{"actions":["delete"],"before":"o","after":null,"after_unknown":false,"before_sensitive":false,"after_sensitive":false}}`),
			outputs: []changeset.Entry{
				{Member: "m", Address: "output.id", Action: "create", Attributes: []changeset.Attribute{{Name: "value", Unknown: true}}},
				{Member: "m", Address: "output.old", Action: "delete", Attributes: []changeset.Attribute{{Name: "value", Before: raw(`"o"`)}}},
				{Member: "m", Address: "output.pw", Action: "update", Attributes: []changeset.Attribute{{Name: "value", Sensitive: true}}},
				{Member: "m", Address: "output.same", Action: "no-op", Attributes: []changeset.Attribute{{Name: "value"}}},
				{Member: "m", Address: "output.size", Action: "update", Attributes: []changeset.Attribute{{Name: "value", Before: raw(`1`), After: raw(`2.50`)}}},
			},
		},
		{
			// terraform 1.14's action_invocations; the machine's terraform
			// (1.11.4) and tofu (1.12.6) have no actions, so this shape is
			// written from terraform's JSON format, not recorded.
			reason: "action invocations are side effects; their config is digested like attributes",
			doc: planDoc(`"action_invocations":[
				{"address":"action.aws_lambda_invoke.notify","type":"aws_lambda_invoke","name":"notify",
				 "config_values":{"function_name":"notify","payload":"tok-secret-9"},"config_sensitive":{"payload":true},"config_unknown":{},
				 "provider_name":"registry.terraform.io/hashicorp/aws",
				 "lifecycle_action_trigger":{"triggering_resource_address":"aws_instance.web","action_trigger_event":"after_create","action_trigger_block_index":0,"actions_list_index":0}},
				{"address":"action.local_command.run","type":"local_command","name":"run","config_values":{},"invoke_action_trigger":{}}]`),
			effects: []changeset.SideEffect{
				{Member: "m", Kind: "action", Address: "action.aws_lambda_invoke.notify", Detail: "after_create of aws_instance.web"},
				{Member: "m", Kind: "action", Address: "action.local_command.run", Detail: "invoked"},
			},
		},
	}
	for _, c := range cases {
		t.Run(c.reason, func(t *testing.T) {
			plan := decodePlan(t, c.doc)
			got, err := readChanges(plan, "m", plannedSecrets(plan))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(orEmpty(c.entries), got.Entries); diff != "" {
				t.Errorf("entries (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(orEmpty(c.effects), got.SideEffects); diff != "" {
				t.Errorf("side effects (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(orEmpty(c.outputs), got.Outputs); diff != "" {
				t.Errorf("outputs (-want +got):\n%s", diff)
			}
			for _, secret := range []string{"secret", "canary", "hunter22", "pw-"} {
				b, _ := json.Marshal(got)
				if strings.Contains(string(b), secret) {
					t.Errorf("changes hold %q: %s", secret, b)
				}
			}
		})
	}
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func TestReadChangesRefusesWhatItCannotName(t *testing.T) {
	cases := []struct {
		reason string
		doc    string
		want   string
	}{
		{"an unknown action", planDoc(`"resource_changes":[{"address":"x.a","change":{"actions":["explode"]}}]`), `resource_changes[0] x.a: unknown action "explode"`},
		{"no actions", planDoc(`"resource_changes":[{"address":"x.a","change":{"actions":[]}}]`), `resource_changes[0] x.a: unknown actions []`},
		{"no address", planDoc(`"resource_changes":[{"change":{"actions":["create"]}}]`), `resource_changes[0]: no address or change`},
		{"an output with two actions", planDoc(`"output_changes":{"o":{"actions":["update","read"]}}`), `output_changes "o": unknown actions ["update" "read"]`},
	}
	for _, c := range cases {
		t.Run(c.reason, func(t *testing.T) {
			plan := decodePlan(t, c.doc)
			_, err := readChanges(plan, "m", plannedSecrets(plan))
			got := "<nil>"
			if err != nil {
				got = err.Error()
			}
			if got != c.want {
				t.Errorf("error %q, want %q", got, c.want)
			}
		})
	}
}

func TestDigestLeavesOutTimestampsVersionsAndPriorState(t *testing.T) {
	changesJSON := `"resource_changes":[{"address":"terraform_data.a","change":{"actions":["update"],"before":{"input":"1"},"after":{"input":"2"},"after_unknown":{},"before_sensitive":{},"after_sensitive":{}}}],
		"output_changes":{"o":{"actions":["update"],"before":"1","after":"2","after_unknown":false,"before_sensitive":false,"after_sensitive":false}}`
	monday := `{"format_version":"1.2","terraform_version":"1.11.4","timestamp":"2026-11-30T00:00:00Z",` + changesJSON + `,
		"prior_state":{"format_version":"1.0","terraform_version":"1.11.4","values":{"root_module":{"resources":[{"address":"terraform_data.a","values":{"input":"1"}}]}}}}`
	tuesday := `{"format_version":"1.2","terraform_version":"1.11.5","timestamp":"2026-12-01T09:30:00Z",` + changesJSON + `,
		"prior_state":{"format_version":"1.0","terraform_version":"1.11.5","values":{"root_module":{"resources":[{"address":"terraform_data.a","values":{"input":"1","extra":"state only"}}]}}}}`
	moved := strings.Replace(monday, `"after":"2"`, `"after":"3"`, 1)
	digest := func(doc string) string {
		p, err := summarize(decodePlan(t, doc), "m", previewtest.Key(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return p.digest
	}
	a, b, c := digest(monday), digest(tuesday), digest(moved)
	if a != b {
		t.Errorf("the same changes on another day and patch version digest %s and %s", a, b)
	}
	if a == c {
		t.Errorf("an output change left the digest at %s", a)
	}
	if !strings.HasPrefix(a, DigestPrefix) {
		t.Errorf("digest %s lacks the prefix %s", a, DigestPrefix)
	}
}

func TestPlannedOutputs(t *testing.T) {
	doc := planDoc(`"planned_values":{"outputs":{
			"name":{"sensitive":false,"value":"web"},
			"big":{"sensitive":false,"value":12345678901234567891},
			"later":{"sensitive":false},
			"partly":{"sensitive":false,"value":["a",null]},
			"pw":{"sensitive":true,"value":"pw-value-1"},
			"copy":{"sensitive":false,"value":"url with pw-value-1"}}},
		"output_changes":{
			"name":{"actions":["no-op"],"before":"web","after":"web","after_unknown":false},
			"big":{"actions":["create"],"after":12345678901234567891,"after_unknown":false},
			"later":{"actions":["create"],"after_unknown":true},
			"partly":{"actions":["create"],"after":["a",null],"after_unknown":[false,true]},
			"pw":{"actions":["create"],"after":"pw-value-1","after_unknown":false,"after_sensitive":true},
			"copy":{"actions":["create"],"after":"url with pw-value-1","after_unknown":false}}`)
	plan := decodePlan(t, doc)
	got := plannedOutputs(plan, plannedSecrets(plan))
	want := map[string]string{"name": `"web"`, "big": `12345678901234567891`}
	gotText := map[string]string{}
	for k, v := range got {
		gotText[k] = string(v)
	}
	if diff := cmp.Diff(want, gotText); diff != "" {
		t.Errorf("planned outputs (-want +got):\n%s", diff)
	}
}

// TestHiddenValues: every value the entries leave out as sensitive is kept
// for the keyed digest with where it is, and only those.
func TestHiddenValues(t *testing.T) {
	cases := []struct {
		reason string
		doc    string
		want   []hiddenValue
	}{
		{
			reason: "a create's sensitive attribute, after only; its plain attributes are not kept",
			doc: planDoc(`"resource_changes":[{"address":"x.a","change":{"actions":["create"],"before":null,
				"after":{"input":{"token":"hunter22","plain":"p"},"name":"n"},"after_unknown":{"id":true},
				"before_sensitive":false,"after_sensitive":{"input":{"token":true}}}}]`),
			want: []hiddenValue{{Address: "x.a", Name: "input", After: map[string]any{"token": "hunter22", "plain": "p"}, HasAfter: true}},
		},
		{
			reason: "an update's sensitive attribute before and after; one it leaves alone is not kept",
			doc: planDoc(`"resource_changes":[{"address":"x.b","change":{"actions":["update"],
				"before":{"pw":"old-pw-1","same":"kept-pw-9","output":"old-pw-1"},"after":{"pw":"new-pw-2","same":"kept-pw-9"},
				"after_unknown":{"output":true},"before_sensitive":{"pw":true,"same":true},"after_sensitive":{"pw":true,"same":true}}}]`),
			want: []hiddenValue{
				{Address: "x.b", Name: "output", Before: "old-pw-1", HasBefore: true},
				{Address: "x.b", Name: "pw", Before: "old-pw-1", After: "new-pw-2", HasBefore: true, HasAfter: true},
			},
		},
		{
			reason: "a sensitive output, and a plain one that copies it",
			doc: planDoc(`"output_changes":{
				"pw":{"actions":["update"],"before":"old-pw-1","after":"new-pw-2","after_unknown":false,"before_sensitive":true,"after_sensitive":true},
				"url":{"actions":["create"],"after":"https://u:new-pw-2@h","after_unknown":false}}`),
			want: []hiddenValue{
				{Address: "output.pw", Name: "value", Before: "old-pw-1", After: "new-pw-2", HasBefore: true, HasAfter: true},
				{Address: "output.url", Name: "value", After: "https://u:new-pw-2@h", HasAfter: true},
			},
		},
		{
			reason: "an import of a sensitive id",
			doc: planDoc(`"variables":{"id":{"value":"secret-id-7"}},"configuration":{"root_module":{"variables":{"id":{"sensitive":true}}}},
				"resource_changes":[{"address":"x.i","change":{"actions":["no-op"],"before":{},"after":{},"importing":{"id":"secret-id-7"}}}]`),
			want: []hiddenValue{{Address: "x.i", Name: "import id", After: "secret-id-7", HasAfter: true}},
		},
		{
			reason: "nothing sensitive",
			doc: planDoc(`"resource_changes":[{"address":"x.p","change":{"actions":["update"],"before":{"a":"1"},"after":{"a":"2"},
				"after_unknown":{},"before_sensitive":{},"after_sensitive":{}}}]`),
			want: []hiddenValue{},
		},
	}
	for _, c := range cases {
		t.Run(c.reason, func(t *testing.T) {
			plan := decodePlan(t, c.doc)
			got, err := readChanges(plan, "m", plannedSecrets(plan))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, got.hidden); diff != "" {
				t.Errorf("hidden values (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDigestBindsHiddenValues: a plan that differs from another only in a
// sensitive value, which no entry shows, digests apart under one key; the
// same plan digests apart under two keys, and alike under one.
func TestDigestBindsHiddenValues(t *testing.T) {
	doc := planDoc(`"resource_changes":[{"address":"x.b","change":{"actions":["update"],
		"before":{"pw":"old-pw-1","n":1},"after":{"pw":"new-pw-2","n":2},
		"after_unknown":{},"before_sensitive":{"pw":true},"after_sensitive":{"pw":true}}}],
		"output_changes":{"pw":{"actions":["update"],"before":"old-pw-1","after":"new-pw-2","after_unknown":false,"before_sensitive":true,"after_sensitive":true}}`)
	digest := func(doc string, key []byte) (string, []changeset.Entry) {
		t.Helper()
		p, err := summarize(decodePlan(t, doc), "m", key, nil)
		if err != nil {
			t.Fatal(err)
		}
		return p.digest, p.changes.Entries
	}
	base, entries := digest(doc, previewtest.Key())
	if again, _ := digest(doc, previewtest.Key()); again != base {
		t.Errorf("one plan, one key: %s and %s", base, again)
	}
	if other, _ := digest(doc, previewtest.OtherKey()); other == base {
		t.Errorf("two keys, one digest %s", base)
	}
	for _, moved := range []struct{ reason, doc string }{
		{"the value after", strings.Replace(doc, `"after":{"pw":"new-pw-2"`, `"after":{"pw":"new-pw-3"`, 1)},
		{"the value before", strings.Replace(doc, `"before":{"pw":"old-pw-1"`, `"before":{"pw":"old-pw-0"`, 1)},
		{"the output", strings.Replace(doc, `"after":"new-pw-2"`, `"after":"new-pw-3"`, 1)},
	} {
		got, gotEntries := digest(moved.doc, previewtest.Key())
		if got == base {
			t.Errorf("%s moved, the digest did not: %s", moved.reason, base)
		}
		if diff := cmp.Diff(entries, gotEntries); diff != "" {
			t.Errorf("%s: the entries show the change (-before +after):\n%s", moved.reason, diff)
		}
	}
	if _, err := summarize(decodePlan(t, doc), "m", []byte("short"), nil); !errors.Is(err, preview.ErrShortKey) {
		t.Errorf("a 5-byte key: %v, want ErrShortKey", err)
	}
}
