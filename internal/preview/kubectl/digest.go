package kubectl

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/captf/captf/pkg/changeset"
)

// DigestPrefix starts every kubectl-apply plan digest.
const DigestPrefix = "k8s1:"

// digestInput is what a plan digest covers. It lives in memory only: it
// holds the documents as sent, so it is never written anywhere.
type digestInput struct {
	Server    string         `json:"server"`
	Context   string         `json:"context"`
	Stack     string         `json:"stack"`
	Delete    string         `json:"delete"`
	Documents []any          `json:"documents"`
	Objects   []digestObject `json:"objects"`
}

type digestObject struct {
	Group      string         `json:"group"`
	Address    string         `json:"address"`
	Action     string         `json:"action"`
	Disruption string         `json:"disruption,omitempty"`
	Refused    bool           `json:"refused,omitempty"`
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

// computeDigest is the plan's member digest.
func (p *planned) computeDigest() (string, error) {
	in := digestInput{Server: p.target.Server, Context: p.target.Context, Stack: p.cfg.Stack, Delete: p.cfg.Delete}
	for _, d := range p.docs {
		doc := d.Object
		if d.Ref.isSecret() {
			doc = hashSecretData(d.Ref, doc)
		}
		in.Documents = append(in.Documents, doc)
	}
	for _, op := range p.objects {
		o := digestObject{Group: op.Ref.Group, Address: op.Ref.address(), Action: op.Action, Disruption: op.Disruption, Refused: op.Hole != ""}
		for _, c := range op.Changes {
			dc := digestChange{Path: c.Path.String(), HasBefore: c.HasBefore, HasAfter: c.HasAfter, Before: c.Before, After: c.After}
			if op.Ref.sensitive(c.Path) {
				dc.Before = hashValue(op.Ref, c.Path, c.Before, c.HasBefore)
				dc.After = hashValue(op.Ref, c.Path, c.After, c.HasAfter)
			}
			o.Changes = append(o.Changes, dc)
		}
		in.Objects = append(in.Objects, o)
	}
	return changeset.Digest(DigestPrefix, in)
}

// missingDigest is the digest of a step that waits on upstream outputs: it
// binds what the step would read, not the cluster.
func missingDigest(cfg config, missing []string) (string, error) {
	return changeset.Digest(DigestPrefix, map[string]any{
		"manifest": cfg.Manifest, "stack": cfg.Stack, "delete": cfg.Delete,
		"kubeconfig": cfg.Kubeconfig, "context": cfg.Context, "namespace": cfg.Namespace, "missing": missing,
	})
}

// hashSecretData returns a copy of a Secret with each value of data and
// stringData replaced by its hash.
func hashSecretData(ref objectRef, obj map[string]any) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		out[k] = v
	}
	for _, field := range []string{"data", "stringData"} {
		m, ok := obj[field].(map[string]any)
		if !ok {
			continue
		}
		hashed := make(map[string]any, len(m))
		for k, v := range m {
			hashed[k] = hashValue(ref, path{field, k}, v, true)
		}
		out[field] = hashed
	}
	return out
}

// hashValue is the SHA-256 of a sensitive value, salted with the object and
// the field so that two equal values hash apart; nil when the side is
// absent.
func hashValue(ref objectRef, p path, v any, present bool) any {
	if !present {
		return nil
	}
	b, _ := json.Marshal([]any{ref.Group, ref.address(), p.String(), v})
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}
