package arm

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/captf/captf/internal/preview"
	"github.com/captf/captf/pkg/changeset"
)

// DigestPrefix starts every arm-deploy plan digest.
const DigestPrefix = "arm1:"

// digestInput is what a plan digest covers. It lives in memory only.
type digestInput struct {
	Environment  string            `json:"environment"`
	Template     templateRef       `json:"template"`
	Group        string            `json:"group"`
	Location     string            `json:"location"`
	Endpoint     string            `json:"endpoint"`
	Subscription string            `json:"subscription"`
	Owner        string            `json:"owner"`
	Prune        bool              `json:"prune"`
	Parameters   map[string]string `json:"parameters"`
	Missing      []string          `json:"missing"`
	Entries      []changeset.Entry `json:"entries"`
	Holes        []changeset.Hole  `json:"holes"`
	// Sensitive is the keyed digest (preview.KeyedDigest) of the secure
	// parameters' values, which stand as "sensitive" in Parameters.
	Sensitive string `json:"sensitive"`
}

type templateRef struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// computeDigest is the member's plan digest: the environment, the
// template's path and bytes, where it deploys (group, location, endpoint,
// subscription), the owner and prune, the parameters given (each by the
// SHA-256 of its canonical JSON; a secure one by the keyed digest of every
// secure value under the preview key), the upstreams whose outputs are
// missing, and every entry with its attributes and values.
func (p *planned) computeDigest(req preview.Request, missing []string) (string, error) {
	sum := sha256.Sum256(p.body)
	in := digestInput{
		Environment:  req.Environment,
		Template:     templateRef{Path: p.in.Template, SHA256: hex.EncodeToString(sum[:])},
		Group:        strings.ToLower(p.in.ResourceGroup),
		Location:     p.group.Location,
		Endpoint:     p.in.Endpoint,
		Subscription: p.in.Subscription,
		Owner:        p.in.Owner,
		Prune:        p.in.Prune,
		Parameters:   map[string]string{},
		Missing:      missing,
		Entries:      p.entries,
		Holes:        p.holes,
	}
	if in.Missing == nil {
		in.Missing = []string{}
	}
	hidden := map[string]any{}
	for name, v := range p.in.Parameters {
		if d := p.tmpl.parameter(name); d != nil && d.secure() {
			in.Parameters[name] = "sensitive"
			hidden[name] = v
			continue
		}
		b, err := changeset.Canonical(v)
		if err != nil {
			return "", err
		}
		h := sha256.Sum256(b)
		in.Parameters[name] = hex.EncodeToString(h[:])
	}
	var err error
	if in.Sensitive, err = preview.KeyedDigest(req.Key, Kind, hidden); err != nil {
		return "", err
	}
	return changeset.Digest(DigestPrefix, in)
}
