package arm

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/captf/captf/pkg/changeset"
)

// applyOrder returns the resources in the order the apply PUTs them: each
// after those it dependsOn, otherwise in template order. A cycle is an
// error.
func applyOrder(ops []*op) ([]*op, error) {
	index := map[string]int{}
	for i, o := range ops {
		index[strings.ToLower(o.res.ID)] = i
	}
	done := make([]bool, len(ops))
	var out []*op
	for len(out) < len(ops) {
		progressed := false
		for i, o := range ops {
			if done[i] {
				continue
			}
			ready := true
			for _, dep := range o.res.DependsOn {
				if j, ok := index[strings.ToLower(dep)]; ok && !done[j] {
					ready = false
					break
				}
			}
			if ready {
				done[i] = true
				out = append(out, o)
				progressed = true
				break // start again from the top: template order first
			}
		}
		if !progressed {
			var cycle []string
			for i, o := range ops {
				if !done[i] {
					cycle = append(cycle, o.res.Address)
				}
			}
			return nil, fmt.Errorf("dependsOn makes a cycle among %s", strings.Join(cycle, ", "))
		}
	}
	return out, nil
}

// apply makes the changes the plan decided. It stops at the first error;
// what was PUT before it stays (ARM has no transaction over several
// resources).
func (p *planned) apply(ctx context.Context) error {
	if p.createGroup {
		body := map[string]any{"location": p.group.Location}
		if _, _, err := p.client.do(ctx, http.MethodPut, p.group.ID, groupAPIVersion, body); err != nil {
			return fmt.Errorf("create the resource group: %w", err)
		}
	}
	ordered, err := applyOrder(p.ops)
	if err != nil {
		return err
	}
	ev := &evaluator{ctx: ctx, tmpl: p.tmpl, subscription: p.in.Subscription, group: p.group,
		params: p.ev.params, resources: p.ev.resources, resolve: &reading{client: p.client, apply: true}}
	for _, o := range ordered {
		if o.action != changeset.ActionCreate && o.action != changeset.ActionUpdate {
			continue
		}
		body, err := ev.body(o.res)
		if err != nil {
			return err
		}
		if containsUnknown(body) {
			return fmt.Errorf("%s: a value is still unknown at apply", o.res.Address)
		}
		put := reveal(body).(map[string]any)
		if o.res.TopLevel {
			put = stampTags(put, p.in.Owner, o.sealed)
		}
		if err := p.client.put(ctx, o.res.ID, o.res.APIVersion, put); err != nil {
			return fmt.Errorf("PUT %s: %w", o.res.Address, err)
		}
	}
	for _, d := range p.deletes {
		if err := p.client.delete(ctx, d.ID, d.APIVersion); err != nil {
			return fmt.Errorf("DELETE %s: %w", d.Address, err)
		}
	}
	return nil
}

// stampTags returns body with captf's tags added to its own: OwnerTag, and
// SecureTag when the resource has secure values.
func stampTags(body map[string]any, owner, sealed string) map[string]any {
	out := make(map[string]any, len(body)+1)
	for k, v := range body {
		out[k] = v
	}
	tags := map[string]any{}
	if have, ok := body["tags"].(map[string]any); ok {
		for k, v := range have {
			tags[k] = v
		}
	}
	tags[OwnerTag] = owner
	if sealed != "" {
		tags[SecureTag] = sealed
	}
	out["tags"] = tags
	return out
}

// reading is the resolver of the apply and of the outputs: reference()
// GETs the resource. listKeys() is called only by the apply, to PUT a
// resource whose body needs the keys; the outputs never call it.
type reading struct {
	client *client
	apply  bool
}

func (r *reading) reference(ctx context.Context, id, apiVersion string, full bool) (any, error) {
	got, err := r.client.get(ctx, id, apiVersion)
	if err != nil {
		return nil, fmt.Errorf("reference(%s): %w", id, err)
	}
	if got == nil {
		return nil, fmt.Errorf("%w: reference(%s): the resource is not there", errNothing, id)
	}
	if full {
		return got, nil
	}
	if props, ok := got["properties"]; ok {
		return props, nil
	}
	return map[string]any{}, nil
}

func (r *reading) listKeys(ctx context.Context, id, apiVersion string) (any, error) {
	if !r.apply {
		return nil, fmt.Errorf("%w: listKeys() is called only to PUT a resource that needs the keys", errNothing)
	}
	_, answer, err := r.client.do(ctx, http.MethodPost, id+"/listKeys", apiVersion, nil)
	if err != nil {
		return nil, fmt.Errorf("listKeys(%s): %w", id, err)
	}
	// The keys are secrets: keep them out of every later message.
	r.client.redact.add(answer)
	return answer, nil
}

// plannedReads is the resolver of the planned outputs: reference() of a
// template resource the plan leaves alone (no-op) reads the plan's GET of
// it; any other is known only after apply.
type plannedReads struct{ ops []*op }

func (r plannedReads) reference(_ context.Context, id, apiVersion string, full bool) (any, error) {
	i := slices.IndexFunc(r.ops, func(o *op) bool {
		return strings.EqualFold(o.res.ID, id) && o.res.APIVersion == apiVersion && o.action == changeset.ActionNoOp && o.hole == ""
	})
	if i < 0 {
		return unknownValue{}, nil
	}
	live := r.ops[i].live
	if full {
		return live, nil
	}
	if props, ok := live["properties"]; ok {
		return props, nil
	}
	return map[string]any{}, nil
}

func (plannedReads) listKeys(context.Context, string, string) (any, error) {
	return unknownValue{Sensitive: true}, nil
}
