// Package arm is the arm-deploy capability of pull-request plan previews:
// it deploys an Azure Resource Manager JSON template into one resource
// group. ARM has no change set, so the plan evaluates the template, GETs
// each resource by its id at the template's apiVersion and compares the
// answer with the body the apply would PUT; the apply plans again and PUTs
// only when the fresh plan has the approved digest. See docs/preview-arm.md.
package arm

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/captf/captf/internal/preview"
	"github.com/captf/captf/pkg/changeset"
)

// Kind is the step kind the capability serves.
const Kind = "arm-deploy"

// Capability plans and applies arm-deploy steps. The zero value is ready to
// use; it keeps nothing between calls (Plan.Private stays nil: Apply plans
// again and needs only the approved digest).
type Capability struct {
	// HTTP is the client ARM is called with; nil is http.DefaultClient.
	HTTP *http.Client
	// Poll is the wait between two reads of a resource being provisioned
	// or deleted; 0 is 2 seconds.
	Poll time.Duration
}

var _ preview.Capability = (*Capability)(nil)

// Kind returns "arm-deploy".
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

// Plan evaluates the template and compares each resource with what ARM
// holds. It GETs and lists; it never PUTs, DELETEs or calls listKeys.
func (c *Capability) Plan(ctx context.Context, req preview.Request) (*preview.Plan, error) {
	p, err := c.plan(ctx, req)
	if err != nil {
		return nil, err
	}
	out := &preview.Plan{
		Member: changeset.Member{
			Name:       p.in.ResourceGroup,
			Component:  req.Component,
			Capability: Kind,
			Status:     changeset.StatusPlanned,
			PlanDigest: p.digest,
			Holes:      p.holes,
		},
		Entries:         p.entries,
		DeclaredOutputs: p.tmpl.outputNames(),
	}
	if p.ev != nil {
		if out.PlannedOutputs, err = p.plannedOutputs(ctx); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Apply plans again and applies only when the fresh digest is the approved
// one: it creates the group when it is not there, PUTs each resource to
// create or update (with captf's tags) in dependency order, waits for each
// to be provisioned, then DELETEs the resources prune found. It returns the
// template's outputs read afterwards.
func (c *Capability) Apply(ctx context.Context, req preview.Request, approved *preview.Plan) (preview.Outputs, error) {
	if approved == nil || approved.Member.PlanDigest == "" {
		return nil, fmt.Errorf("apply: no approved plan digest; nothing was applied")
	}
	if len(req.Missing) > 0 {
		return nil, fmt.Errorf("apply: inputs from %v have no value yet; nothing was applied", req.Missing)
	}
	p, err := c.plan(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("plan before apply: %w", err)
	}
	if p.digest != approved.Member.PlanDigest {
		return nil, fmt.Errorf("resource group %s: refusing to apply: approved %s, planned now %s; nothing was applied: %w", p.in.ResourceGroup, approved.Member.PlanDigest, p.digest, preview.ErrMoved)
	}
	if len(p.holes) > 0 {
		h := p.holes[0]
		where := p.in.ResourceGroup
		if h.Address != "" {
			where = h.Address
		}
		return nil, fmt.Errorf("resource group %s: refusing to apply: %s: %s; nothing was applied", p.in.ResourceGroup, where, h.Reason)
	}
	if err := p.apply(ctx); err != nil {
		return nil, fmt.Errorf("resource group %s: %w", p.in.ResourceGroup, err)
	}
	return p.liveOutputs(ctx)
}

// Outputs evaluates the template's outputs against live reads of its
// resources; none when the group or every resource of the template is not
// there (the step never ran). An output that comes to nothing (a resource
// that is not there, a parameter without a value) is left out.
func (c *Capability) Outputs(ctx context.Context, req preview.Request) (preview.Outputs, error) {
	p, err := c.load(req)
	if err != nil {
		return nil, err
	}
	g, err := p.client.get(ctx, p.group.ID, groupAPIVersion)
	if err != nil {
		return nil, fmt.Errorf("resource group %s: read: %w", p.in.ResourceGroup, err)
	}
	if g == nil {
		return nil, nil
	}
	p.group.Location = normaliseLocation(fmt.Sprint(g["location"]))
	if err := p.bind(ctx, planning{}, true); err != nil {
		return nil, err
	}
	resources, err := p.ev.declare(true)
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", p.in.Template, err)
	}
	deployed := len(resources) == 0
	for _, r := range resources {
		live, err := p.client.get(ctx, r.ID, r.APIVersion)
		if err != nil {
			return nil, fmt.Errorf("resource group %s: read %s: %w", p.in.ResourceGroup, r.Address, err)
		}
		if live != nil {
			deployed = true
			break
		}
	}
	if !deployed {
		return nil, nil
	}
	return p.liveOutputs(ctx)
}
