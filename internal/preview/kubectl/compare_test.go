package kubectl

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/captf/captf/pkg/changeset"
)

// obj decodes a JSON object literal the way the API machinery does.
func obj(t *testing.T, s string) map[string]any {
	t.Helper()
	if s == "" {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func raw(s string) json.RawMessage { return json.RawMessage(s) }

func TestDecide(t *testing.T) {
	cm := objectRef{Kind: "ConfigMap", Namespace: "ns", Name: "c"}
	dep := objectRef{Group: "apps", Kind: "Deployment", Namespace: "ns", Name: "d"}
	rs := objectRef{Group: "apps", Kind: "ReplicaSet", Namespace: "ns", Name: "r"}
	sec := objectRef{Kind: "Secret", Namespace: "ns", Name: "s"}
	cases := []struct {
		reason         string
		ref            objectRef
		declared, live string
		dry            string
		want           changeset.Entry
	}{{
		reason:   "no live object: a create with every declared leaf, valued as the dry run stores it",
		ref:      cm,
		declared: `{"kind":"ConfigMap","data":{"q":"1000m"},"spec":{"list":[{"a":1},2],"empty":{}}}`,
		dry:      `{"kind":"ConfigMap","data":{"q":"1"},"spec":{"list":[{"a":1,"default":true},2],"empty":{}},"metadata":{"uid":"x"}}`,
		want: changeset.Entry{Member: "m", Address: "ConfigMap/ns/c", Action: "create", Attributes: []changeset.Attribute{
			{Name: "data.q", After: raw(`"1"`)},
			{Name: "kind", After: raw(`"ConfigMap"`)},
			{Name: "spec.empty", After: raw(`{}`)},
			{Name: "spec.list.0.a", After: raw(`1`)},
			{Name: "spec.list.1", After: raw(`2`)},
		}},
	}, {
		reason:   "a create does not list status or bookkeeping the manifest carries",
		ref:      cm,
		declared: `{"metadata":{"name":"c","creationTimestamp":null},"status":{"phase":"x"}}`,
		dry:      `{"metadata":{"name":"c","creationTimestamp":"2026-11-30T00:00:00Z"}}`,
		want: changeset.Entry{Member: "m", Address: "ConfigMap/ns/c", Action: "create", Attributes: []changeset.Attribute{
			{Name: "metadata.name", After: raw(`"c"`)},
		}},
	}, {
		reason:   "only bookkeeping and status differ: a no-op",
		ref:      cm,
		declared: `{"data":{"a":"1"}}`,
		live:     `{"data":{"a":"1"},"status":{"x":1},"metadata":{"name":"c","resourceVersion":"1","uid":"u","generation":1,"creationTimestamp":"t","managedFields":[{"manager":"a"}]}}`,
		dry:      `{"data":{"a":"1"},"status":{"x":2},"metadata":{"name":"c","resourceVersion":"2","uid":"u","generation":2,"creationTimestamp":"t","managedFields":[{"manager":"b"}]}}`,
		want:     changeset.Entry{Member: "m", Address: "ConfigMap/ns/c", Action: "no-op"},
	}, {
		reason: "a key changed, one added, one removed; keys that are not plain words in brackets",
		ref:    cm,
		live:   `{"data":{"a":"1","gone":"x"},"metadata":{"labels":{"app.kubernetes.io/name":"old","1st":"a"}}}`,
		dry:    `{"data":{"a":"2","new":"y"},"metadata":{"labels":{"app.kubernetes.io/name":"new","1st":"a"}}}`,
		want: changeset.Entry{Member: "m", Address: "ConfigMap/ns/c", Action: "update", Attributes: []changeset.Attribute{
			{Name: "data.a", Before: raw(`"1"`), After: raw(`"2"`)},
			{Name: "data.gone", Before: raw(`"x"`)},
			{Name: "data.new", After: raw(`"y"`)},
			{Name: `metadata.labels["app.kubernetes.io/name"]`, Before: raw(`"old"`), After: raw(`"new"`)},
		}},
	}, {
		reason: "a list of the same length differs at an index; a list that grows is one change",
		ref:    cm,
		live:   `{"spec":{"same":[{"p":80},{"p":81}],"grows":[1]}}`,
		dry:    `{"spec":{"same":[{"p":80},{"p":82}],"grows":[1,2]}}`,
		want: changeset.Entry{Member: "m", Address: "ConfigMap/ns/c", Action: "update", Attributes: []changeset.Attribute{
			{Name: "spec.grows", Before: raw(`[1]`), After: raw(`[1,2]`)},
			{Name: "spec.same.1.p", Before: raw(`81`), After: raw(`82`)},
		}},
	}, {
		reason: "a value that changes type is one change",
		ref:    cm,
		live:   `{"spec":{"v":{"a":1}}}`,
		dry:    `{"spec":{"v":"flat"}}`,
		want: changeset.Entry{Member: "m", Address: "ConfigMap/ns/c", Action: "update", Attributes: []changeset.Attribute{
			{Name: "spec.v", Before: raw(`{"a":1}`), After: raw(`"flat"`)},
		}},
	}, {
		reason: "a field added as a subtree lists its leaves",
		ref:    cm,
		live:   `{"spec":{}}`,
		dry:    `{"spec":{"new":{"a":1,"b":[true]}}}`,
		want: changeset.Entry{Member: "m", Address: "ConfigMap/ns/c", Action: "update", Attributes: []changeset.Attribute{
			{Name: "spec.new.a", After: raw(`1`)},
			{Name: "spec.new.b.0", After: raw(`true`)},
		}},
	}, {
		reason: "a Deployment's template change rolls its pods",
		ref:    dep,
		live:   `{"spec":{"replicas":2,"template":{"spec":{"containers":[{"image":"a"}]}}}}`,
		dry:    `{"spec":{"replicas":2,"template":{"spec":{"containers":[{"image":"b"}]}}}}`,
		want: changeset.Entry{Member: "m", Address: "Deployment/ns/d", Action: "update", Disruption: "rolling", Attributes: []changeset.Attribute{
			{Name: "spec.template.spec.containers.0.image", Before: raw(`"a"`), After: raw(`"b"`)},
		}},
	}, {
		reason: "a Deployment's replicas change rolls nothing",
		ref:    dep,
		live:   `{"spec":{"replicas":2,"template":{"spec":{}}}}`,
		dry:    `{"spec":{"replicas":3,"template":{"spec":{}}}}`,
		want: changeset.Entry{Member: "m", Address: "Deployment/ns/d", Action: "update", Attributes: []changeset.Attribute{
			{Name: "spec.replicas", Before: raw(`2`), After: raw(`3`)},
		}},
	}, {
		reason: "a StatefulSet's template change rolls its pods",
		ref:    objectRef{Group: "apps", Kind: "StatefulSet", Namespace: "ns", Name: "s"},
		live:   `{"spec":{"template":{"metadata":{"annotations":{"x":"1"}}}}}`,
		dry:    `{"spec":{"template":{"metadata":{"annotations":{"x":"2"}}}}}`,
		want: changeset.Entry{Member: "m", Address: "StatefulSet/ns/s", Action: "update", Disruption: "rolling", Attributes: []changeset.Attribute{
			{Name: "spec.template.metadata.annotations.x", Before: raw(`"1"`), After: raw(`"2"`)},
		}},
	}, {
		reason: "a DaemonSet's change outside the template rolls nothing",
		ref:    objectRef{Group: "apps", Kind: "DaemonSet", Namespace: "ns", Name: "d"},
		live:   `{"spec":{"minReadySeconds":0,"template":{}}}`,
		dry:    `{"spec":{"minReadySeconds":5,"template":{}}}`,
		want: changeset.Entry{Member: "m", Address: "DaemonSet/ns/d", Action: "update", Attributes: []changeset.Attribute{
			{Name: "spec.minReadySeconds", Before: raw(`0`), After: raw(`5`)},
		}},
	}, {
		reason: "a ReplicaSet's template change keeps its pods",
		ref:    rs,
		live:   `{"spec":{"template":{"spec":{"containers":[{"image":"a"}]}}}}`,
		dry:    `{"spec":{"template":{"spec":{"containers":[{"image":"b"}]}}}}`,
		want: changeset.Entry{Member: "m", Address: "ReplicaSet/ns/r", Action: "update", Attributes: []changeset.Attribute{
			{Name: "spec.template.spec.containers.0.image", Before: raw(`"a"`), After: raw(`"b"`)},
		}},
	}, {
		reason: "a Secret's data, stringData and last-applied copy carry no value",
		ref:    sec,
		live:   `{"data":{"k":"b2xk"},"type":"Opaque","metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{old}"}}}`,
		dry:    `{"data":{"k":"bmV3"},"type":"kubernetes.io/basic-auth","metadata":{"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{new}"}}}`,
		want: changeset.Entry{Member: "m", Address: "Secret/ns/s", Action: "update", Attributes: []changeset.Attribute{
			{Name: "data.k", Sensitive: true},
			{Name: `metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]`, Sensitive: true},
			{Name: "type", Before: raw(`"Opaque"`), After: raw(`"kubernetes.io/basic-auth"`)},
		}},
	}, {
		reason:   "a created Secret lists its keys without values",
		ref:      sec,
		declared: `{"kind":"Secret","stringData":{"password":"p"}}`,
		dry:      `{"kind":"Secret","data":{"password":"cA=="}}`,
		want: changeset.Entry{Member: "m", Address: "Secret/ns/s", Action: "create", Attributes: []changeset.Attribute{
			{Name: "kind", After: raw(`"Secret"`)},
			{Name: "stringData.password", Sensitive: true},
		}},
	}}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			got := decide(tc.ref, obj(t, tc.declared), obj(t, tc.live), obj(t, tc.dry)).entry("m")
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("entry (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRefused(t *testing.T) {
	dep := objectRef{Group: "apps", Kind: "Deployment", Namespace: "ns", Name: "d"}
	cases := []struct {
		reason         string
		declared, live string
		want           changeset.Entry
	}{{
		reason:   "live: an update listing the declared fields the live object does not hold",
		declared: `{"spec":{"replicas":2,"selector":{"matchLabels":{"app":"b"}},"new":"x"}}`,
		live:     `{"spec":{"replicas":2,"selector":{"matchLabels":{"app":"a"}}},"status":{}}`,
		want: changeset.Entry{Member: "m", Address: "Deployment/ns/d", Action: "update", Disruption: "unknown", Attributes: []changeset.Attribute{
			{Name: "spec.new", After: raw(`"x"`)},
			{Name: "spec.selector.matchLabels.app", Before: raw(`"a"`), After: raw(`"b"`)},
		}},
	}, {
		reason:   "nothing live: a create with unknown disruption",
		declared: `{"spec":{"replicas":2}}`,
		want: changeset.Entry{Member: "m", Address: "Deployment/ns/d", Action: "create", Disruption: "unknown", Attributes: []changeset.Attribute{
			{Name: "spec.replicas", After: raw(`2`)},
		}},
	}}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			op := refused(dep, obj(t, tc.declared), obj(t, tc.live), "the message")
			if op.Hole != "the message" {
				t.Errorf("hole: %q", op.Hole)
			}
			if diff := cmp.Diff(tc.want, op.entry("m")); diff != "" {
				t.Errorf("entry (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	cases := []struct {
		reason, msg string
		secrets     []string
		aboutSecret bool
		want        string
	}{
		{"no secret in the message", "field is immutable", []string{"hunter22"}, true, "field is immutable"},
		{"each occurrence replaced, longest value first", `bad "hunter22" and "hunter2233"`, []string{"hunter22", "hunter2233"}, false, `bad "<redacted>" and "<redacted>"`},
		{"a short value withholds a message about a Secret", `bad value "ab"`, []string{"ab"}, true, withheld},
		{"a short value is not looked for in other messages", `apps/v1 Deployment "ab" is invalid`, []string{"ab"}, false, `apps/v1 Deployment "ab" is invalid`},
		{"an empty value is no match", "anything", []string{""}, true, "anything"},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, redact(tc.msg, tc.secrets, tc.aboutSecret)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestSecretValues(t *testing.T) {
	got := secretValues(map[string]any{"data": map[string]any{"k": "aGVsbG8="}, "stringData": map[string]any{"s": "plain"}})
	want := []string{"aGVsbG8=", "hello", "plain", "cGxhaW4="}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
