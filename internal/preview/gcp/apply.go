package gcp

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/captf/captf/pkg/changeset"
)

// apply writes what the plan decided: each create and update in the
// plan's order (what a resource references before it), then each delete. A resource with a hole is left alone. It stops
// at the first error; what was written before it stays.
func (p *planned) apply(ctx context.Context) error {
	for _, o := range p.ops {
		if o.hole != "" {
			continue
		}
		var err error
		switch o.action {
		case changeset.ActionCreate:
			err = p.create(ctx, o.res)
		case changeset.ActionUpdate:
			err = p.update(ctx, o)
		default:
			continue
		}
		if err != nil {
			return fmt.Errorf("%s %s: %w", o.action, o.res.Address, err)
		}
	}
	for _, d := range p.deletes {
		r := &resource{Map: d.m, Project: d.project, Location: d.location, Name: d.name}
		status, answer, err := p.client.do(ctx, http.MethodDelete, d.m, r.path(), nil)
		if status == http.StatusNotFound {
			continue
		}
		if err == nil {
			err = p.client.wait(ctx, d.m, r, answer)
		}
		if err != nil {
			return fmt.Errorf("delete %s: %w", d.address, err)
		}
	}
	return nil
}

// create sends the kind's create call with the whole body.
func (p *planned) create(ctx context.Context, r *resource) error {
	m := r.Map
	body := copyMap(r.Want)
	var method, path string
	var send any = body
	switch m.Create {
	case createPut:
		body["name"] = strings.TrimPrefix(r.path(), "v1/")
		method, path = http.MethodPut, r.path()
	case createPost:
		body["name"] = r.Name
		method, path = http.MethodPost, r.collection()
	case createPostID:
		method, path = http.MethodPost, r.collection()+"?"+m.IDParam+"="+url.QueryEscape(r.Name)
	case createPostWrapped:
		body["name"] = strings.TrimPrefix(r.path(), "v1/")
		method, path = http.MethodPost, r.collection()
		send = map[string]any{m.IDParam: r.Name, m.Wrap: body}
	default:
		return fmt.Errorf("%s: no create call", m.Kind)
	}
	_, answer, err := p.client.do(ctx, method, m, path, send)
	if err != nil {
		return err
	}
	return p.client.wait(ctx, m, r, answer)
}

// update sends the kind's update call with the fields that differ.
func (p *planned) update(ctx context.Context, o *op) error {
	r, m := o.res, o.res.Map
	fields := map[string]any{}
	for _, f := range o.fields {
		fields[f] = r.Want[f]
	}
	var method, path string
	var send any
	switch m.Update {
	case updatePatch:
		method, path, send = http.MethodPatch, r.path(), fields
	case updatePatchMask:
		fields["name"] = strings.TrimPrefix(r.path(), "v1/")
		method, path = http.MethodPatch, r.path()
		send = map[string]any{m.Wrap: fields, m.MaskParam: strings.Join(o.fields, ",")}
	case updatePatchWhole:
		method, path, send = http.MethodPatch, r.path(), r.Want
	case updateSetLabels:
		// decide made labels the only field that differs.
		method, path = http.MethodPost, r.path()+"/setLabels"
		send = map[string]any{"labels": r.Want["labels"], "labelFingerprint": o.live["labelFingerprint"]}
	default:
		return fmt.Errorf("%s: no update call", m.Kind)
	}
	_, answer, err := p.client.do(ctx, method, m, path, send)
	if err != nil {
		return err
	}
	return p.client.wait(ctx, m, r, answer)
}

func copyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}
