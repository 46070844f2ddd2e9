package kubectl

import (
	"github.com/captf/captf/internal/preview"
	"github.com/captf/captf/pkg/changeset"
)

// DigestPrefix starts every kubectl-apply plan digest.
const DigestPrefix = "k8s1:"

// hiddenText stands in the digest input for a sensitive value, whose value
// is bound by the keyed digest instead.
const hiddenText = "(sensitive)"

// digestInput is what a plan digest covers. It lives in memory only: it
// holds the documents as sent, so it is never written anywhere.
type digestInput struct {
	Server    string         `json:"server"`
	Context   string         `json:"context"`
	Stack     string         `json:"stack"`
	Delete    string         `json:"delete"`
	Documents []any          `json:"documents"`
	Objects   []digestObject `json:"objects"`
	// Sensitive is the keyed digest (preview.KeyedDigest) of the Secret
	// values the documents and changes hold, which stand as hiddenText
	// above.
	Sensitive string `json:"sensitive"`
}

type digestObject struct {
	Group      string         `json:"group"`
	Address    string         `json:"address"`
	Action     string         `json:"action"`
	Disruption string         `json:"disruption,omitempty"`
	Refused    bool           `json:"refused,omitempty"`
	Waits      []string       `json:"waits,omitempty"`
	Changes    []digestChange `json:"changes,omitempty"`
}

// digestChange binds a changed field's value before and after, so that the
// digest moves when the live object drifts under a field the plan changes,
// not only when the manifest does.
type digestChange struct {
	Path   string `json:"path"`
	Before any    `json:"before,omitempty"`
	After  any    `json:"after,omitempty"`
	// HasBefore and HasAfter tell an absent side from a null one.
	HasBefore bool `json:"hasBefore"`
	HasAfter  bool `json:"hasAfter"`
}

// hiddenValue is a sensitive value with where it is: the object, the
// field, and which side of a change ("document" for the manifest as sent).
type hiddenValue struct {
	Group   string `json:"group"`
	Address string `json:"address"`
	Path    string `json:"path"`
	Side    string `json:"side"`
	Value   any    `json:"value"`
}

// computeDigest is the plan's member digest; key binds the sensitive
// values.
func (p *planned) computeDigest(key []byte) (string, error) {
	in := digestInput{Server: p.target.Server, Context: p.target.Context, Stack: p.cfg.Stack, Delete: p.cfg.Delete}
	hidden := []hiddenValue{}
	for _, d := range p.docs {
		doc := d.Object
		if d.Ref.isSecret() {
			doc = hideSecret(d.Ref, doc, &hidden)
		}
		in.Documents = append(in.Documents, doc)
	}
	for _, op := range p.objects {
		o := digestObject{Group: op.Ref.Group, Address: op.Ref.address(), Action: op.Action, Disruption: op.Disruption, Refused: op.Hole != "", Waits: op.Waits}
		for _, c := range op.Changes {
			dc := digestChange{Path: c.Path.String(), HasBefore: c.HasBefore, HasAfter: c.HasAfter, Before: c.Before, After: c.After}
			if op.Ref.sensitive(c.Path) {
				dc.Before = hide(op.Ref, c.Path, "before", c.Before, c.HasBefore, &hidden)
				dc.After = hide(op.Ref, c.Path, "after", c.After, c.HasAfter, &hidden)
			}
			o.Changes = append(o.Changes, dc)
		}
		in.Objects = append(in.Objects, o)
	}
	var err error
	if in.Sensitive, err = preview.KeyedDigest(key, Kind, hidden); err != nil {
		return "", err
	}
	return changeset.Digest(DigestPrefix, in)
}

// missingDigest is the digest of a step that waits on upstream outputs: it
// binds what the step would read, not the cluster. It has no sensitive
// value, and binds the key all the same, so that two keys digest every
// member apart.
func missingDigest(cfg config, missing []string, key []byte) (string, error) {
	sensitive, err := preview.KeyedDigest(key, Kind, []hiddenValue{})
	if err != nil {
		return "", err
	}
	return changeset.Digest(DigestPrefix, map[string]any{
		"manifest": cfg.Manifest, "stack": cfg.Stack, "delete": cfg.Delete,
		"kubeconfig": cfg.Kubeconfig, "context": cfg.Context, "namespace": cfg.Namespace, "missing": missing,
		"sensitive": sensitive,
	})
}

// hideSecret returns a copy of a Secret document with each value of data
// and stringData, and the last-applied annotation, replaced by hiddenText;
// the values go to hidden.
func hideSecret(ref objectRef, obj map[string]any, hidden *[]hiddenValue) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		out[k] = v
	}
	for _, field := range []string{"data", "stringData"} {
		m, ok := obj[field].(map[string]any)
		if !ok {
			continue
		}
		replaced := make(map[string]any, len(m))
		for _, k := range sortedKeys(m) {
			replaced[k] = hide(ref, path{field, k}, "document", m[k], true, hidden)
		}
		out[field] = replaced
	}
	md, _ := obj["metadata"].(map[string]any)
	annotations, _ := md["annotations"].(map[string]any)
	if v, ok := annotations[lastApplied]; ok {
		a := make(map[string]any, len(annotations))
		for k, v := range annotations {
			a[k] = v
		}
		a[lastApplied] = hide(ref, path{"metadata", "annotations", lastApplied}, "document", v, true, hidden)
		m := make(map[string]any, len(md))
		for k, v := range md {
			m[k] = v
		}
		m["annotations"] = a
		out["metadata"] = m
	}
	return out
}

// hide keeps a present sensitive value in hidden and returns what stands
// for it in the digest input: hiddenText, or nil when the side is absent.
func hide(ref objectRef, p path, side string, v any, present bool, hidden *[]hiddenValue) any {
	if !present {
		return nil
	}
	*hidden = append(*hidden, hiddenValue{Group: ref.Group, Address: ref.address(), Path: p.String(), Side: side, Value: v})
	return hiddenText
}
