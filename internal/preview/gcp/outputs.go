package gcp

import (
	"context"
	"fmt"
	"slices"

	"github.com/captf/captf/internal/preview"
	"github.com/captf/captf/pkg/changeset"
)

// outputName is the output a resource has, "" for a kind without one.
func outputName(r *resource) string {
	if r.Map == nil || r.Map.Output == "" {
		return ""
	}
	return r.Doc.Name + r.Map.Output
}

// declaredOutputs names every output the manifest's resources will have.
func declaredOutputs(resources []*resource) []string {
	out := []string{}
	for _, r := range resources {
		if n := outputName(r); n != "" {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// outputValue is a resource's output read from its live body.
func outputValue(r *resource, live map[string]any) (json []byte, ok bool) {
	v, present := live[r.Map.OutputField]
	if !present || v == nil || v == "" {
		return nil, false
	}
	b, err := changeset.Canonical(v)
	return b, err == nil
}

// plannedOutputs are the outputs of the resources that stay (no-op or
// update), read from the plan's GET; a created resource's is known only
// after apply.
func (p *planned) plannedOutputs() preview.Outputs {
	out := preview.Outputs{}
	for _, o := range p.ops {
		name := outputName(o.res)
		if name == "" || o.hole != "" || o.live == nil {
			continue
		}
		if b, ok := outputValue(o.res, o.live); ok {
			out[name] = b
		}
	}
	return out
}

// liveOutputs reads each resource that has an output; one that is not
// there has none.
func (p *planned) liveOutputs(ctx context.Context, resources []*resource) (preview.Outputs, error) {
	out := preview.Outputs{}
	for _, r := range resources {
		name := outputName(r)
		if name == "" || r.Project == "" {
			continue
		}
		live, err := p.client.get(ctx, r.Map, r.path())
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", r.Address, err)
		}
		if b, ok := outputValue(r, live); ok {
			out[name] = b
		}
	}
	return out, nil
}
