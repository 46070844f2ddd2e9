package gcp

import (
	"github.com/captf/captf/internal/preview"
	"github.com/captf/captf/internal/preview/manifest"
	"github.com/captf/captf/pkg/changeset"
)

// DigestPrefix starts every gcp-apply plan digest.
const DigestPrefix = "gcp1:"

// digestInput is what a plan digest covers.
type digestInput struct {
	Environment string          `json:"environment"`
	Member      string          `json:"member"`
	Manifest    string          `json:"manifest"`
	Files       []manifest.File `json:"files"`
	Endpoint    string          `json:"endpoint"`
	Project     string          `json:"project"`
	Prune       bool            `json:"prune"`
	Missing     []string        `json:"missing"`
	// Entries hold each resource's address (its project and location
	// among them), action and every changed field with its values.
	Entries []changeset.Entry `json:"entries"`
	Holes   []changeset.Hole  `json:"holes"`
	// Sensitive binds the preview key (preview.KeyedDigest): no field of
	// a mapped kind is secret, but the digests of two keys differ for
	// every member, as for the other capabilities.
	Sensitive string `json:"sensitive"`
}

// computeDigest is the member's plan digest: the environment, the member,
// the manifest's path and the bytes of each of its files, the endpoint and
// the project override, prune, the upstreams whose outputs are missing,
// and every entry and hole.
func (p *planned) computeDigest(req preview.Request, missing []string) (string, error) {
	in := digestInput{
		Environment: req.Environment,
		Member:      p.in.Stack,
		Manifest:    p.in.Manifest,
		Files:       p.files,
		Endpoint:    p.in.Endpoint,
		Project:     p.in.Project,
		Prune:       p.in.Prune,
		Missing:     missing,
		Entries:     p.entries,
		Holes:       p.holes,
	}
	if in.Missing == nil {
		in.Missing = []string{}
	}
	var err error
	if in.Sensitive, err = preview.KeyedDigest(req.Key, Kind, map[string]any{}); err != nil {
		return "", err
	}
	return changeset.Digest(DigestPrefix, in)
}
