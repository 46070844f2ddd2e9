package kubectl

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
)

// TestHideSecret: a Secret document enters the digest with every value of
// data and stringData, and the last-applied annotation, standing as
// "(sensitive)"; the values go to the keyed digest with where they are;
// the document itself is left as it was.
func TestHideSecret(t *testing.T) {
	ref := objectRef{Kind: "Secret", Namespace: "ns", Name: "creds"}
	cases := []struct {
		reason     string
		doc        map[string]any
		want       map[string]any
		wantHidden []hiddenValue
	}{
		{
			reason: "data, stringData and the last-applied annotation",
			doc: map[string]any{
				"kind": "Secret",
				"metadata": map[string]any{"name": "creds", "annotations": map[string]any{
					lastApplied: `{"stringData":{"pw":"hunter22"}}`, "note": "plain",
				}},
				"data":       map[string]any{"b": "YmI=", "a": "YWE="},
				"stringData": map[string]any{"pw": "hunter22"},
				"type":       "Opaque",
			},
			want: map[string]any{
				"kind": "Secret",
				"metadata": map[string]any{"name": "creds", "annotations": map[string]any{
					lastApplied: hiddenText, "note": "plain",
				}},
				"data":       map[string]any{"b": hiddenText, "a": hiddenText},
				"stringData": map[string]any{"pw": hiddenText},
				"type":       "Opaque",
			},
			wantHidden: []hiddenValue{
				{Address: "Secret/ns/creds", Path: "data.a", Side: "document", Value: "YWE="},
				{Address: "Secret/ns/creds", Path: "data.b", Side: "document", Value: "YmI="},
				{Address: "Secret/ns/creds", Path: "stringData.pw", Side: "document", Value: "hunter22"},
				{Address: "Secret/ns/creds", Path: `metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]`, Side: "document", Value: `{"stringData":{"pw":"hunter22"}}`},
			},
		},
		{
			reason:     "a Secret without values",
			doc:        map[string]any{"kind": "Secret", "metadata": map[string]any{"name": "creds"}, "type": "Opaque"},
			want:       map[string]any{"kind": "Secret", "metadata": map[string]any{"name": "creds"}, "type": "Opaque"},
			wantHidden: []hiddenValue{},
		},
	}
	for _, c := range cases {
		t.Run(c.reason, func(t *testing.T) {
			before := runtime.DeepCopyJSON(c.doc)
			hidden := []hiddenValue{}
			got := hideSecret(ref, c.doc, &hidden)
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("digest input (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c.wantHidden, hidden); diff != "" {
				t.Errorf("hidden values (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, c.doc); diff != "" {
				t.Errorf("the document changed (-before +after):\n%s", diff)
			}
		})
	}
}
