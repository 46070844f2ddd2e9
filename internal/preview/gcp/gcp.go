// Package gcp is the gcp-apply capability of pull-request plan previews:
// it applies a Config Connector manifest through Google's REST APIs. The
// plan resolves each reference at any depth, orders the resources so that
// what one references comes first, GETs each resource at its REST URL and
// compares the answer with what the manifest sets, as a subset at every
// depth; it writes nothing. The apply plans again and writes, in that
// order, only when the fresh plan has the approved digest. See
// docs/preview-gcp.md.
//
// The plan is spec 003's planGcpApply and decideResource: a 404 is a
// create, a live body that holds every field the manifest sets is a
// no-op, as is one of a kind without an in-place update, any other an
// update of the top-level fields that differ; a kind without a mapping, a
// read neither 200 nor 404, and a Compute Engine field that cannot change
// in place are holes.
package gcp

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/captf/captf/internal/preview"
	"github.com/captf/captf/pkg/changeset"
)

// Kind is the step kind the capability serves.
const Kind = "gcp-apply"

// Capability plans and applies gcp-apply steps. The zero value is ready
// to use; it keeps nothing between calls.
type Capability struct {
	// HTTP is the client the APIs are called with; nil is
	// http.DefaultClient.
	HTTP *http.Client
	// Poll is the wait between two reads of a long-running operation; 0
	// is 2 seconds.
	Poll time.Duration
}

var _ preview.Capability = (*Capability)(nil)

// Kind returns "gcp-apply".
func (c *Capability) Kind() string { return Kind }

func (c *Capability) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

func (c *Capability) poll() time.Duration {
	if c.Poll > 0 {
		return c.Poll
	}
	return 2 * time.Second
}

// Plan reads each resource of the manifest and decides it; with prune it
// lists the collections the manifest writes to. It never writes.
func (c *Capability) Plan(ctx context.Context, req preview.Request) (*preview.Plan, error) {
	p, resources, err := c.plan(ctx, req)
	if err != nil {
		return nil, err
	}
	return &preview.Plan{
		Member: changeset.Member{
			Name:       p.in.Stack,
			Component:  req.Component,
			Capability: Kind,
			Status:     changeset.StatusPlanned,
			PlanDigest: p.digest,
			Holes:      p.holes,
		},
		Entries:         p.entries,
		PlannedOutputs:  p.plannedOutputs(),
		DeclaredOutputs: declaredOutputs(resources),
	}, nil
}

// Apply plans again and writes only when the fresh digest is the approved
// one: it creates and updates the resources the plan decided, then deletes
// what prune found, and returns the outputs read afterwards. A resource
// with a hole is left alone.
func (c *Capability) Apply(ctx context.Context, req preview.Request, approved *preview.Plan) (preview.Outputs, error) {
	if approved == nil || approved.Member.PlanDigest == "" {
		return nil, fmt.Errorf("apply: no approved plan digest; nothing was applied")
	}
	if len(req.Missing) > 0 {
		return nil, fmt.Errorf("apply: inputs from %v have no value yet; nothing was applied", req.Missing)
	}
	p, _, err := c.plan(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("plan before apply: %w", err)
	}
	if p.digest != approved.Member.PlanDigest {
		return nil, fmt.Errorf("%s: refusing to apply: approved %s, planned now %s; nothing was applied: %w", p.in.Stack, approved.Member.PlanDigest, p.digest, preview.ErrMoved)
	}
	if err := p.apply(ctx); err != nil {
		return nil, fmt.Errorf("%s: %w", p.in.Stack, err)
	}
	// A resource with a hole was left alone, and its read may fail again.
	var read []*resource
	for _, o := range p.ops {
		if o.hole == "" {
			read = append(read, o.res)
		}
	}
	return p.liveOutputs(ctx, read)
}

// Outputs reads the outputs of the manifest's resources as the API
// reports them; none for a resource that is not there. It needs no
// preview key.
func (c *Capability) Outputs(ctx context.Context, req preview.Request) (preview.Outputs, error) {
	p, resources, err := c.load(req)
	if err != nil {
		return nil, err
	}
	return p.liveOutputs(ctx, resources)
}
