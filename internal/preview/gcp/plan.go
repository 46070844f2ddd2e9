package gcp

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/captf/captf/internal/preview"
	"github.com/captf/captf/internal/preview/manifest"
	"github.com/captf/captf/pkg/changeset"
)

// resource is one object of the manifest, resolved to its REST resource.
type resource struct {
	Doc manifest.Document
	// Map is its kind's mapping; nil for a kind gcp-apply does not map.
	Map      *mapping
	Project  string
	Location string
	// Name is the resource's name in Google: spec.resourceID, else
	// metadata.name.
	Name string
	// Address is the entry's address: Kind/project[/location]/name.
	Address string
	// Want is the body the manifest sets, references resolved.
	Want map[string]any
	// deps are the resources of the manifest its references name: the
	// apply writes them first.
	deps []*resource
}

// op is what the plan decided for one resource.
type op struct {
	res    *resource
	action string
	// fields are the top-level fields a create sets or an update changes.
	fields []string
	// live is the resource as the API returned it; nil when it is not
	// there.
	live map[string]any
	// hole says why the resource gets no entry and is left alone.
	hole string
}

// deletion is a live resource prune deletes.
type deletion struct {
	m                       *mapping
	project, location, name string
	address                 string
}

// planned is one plan and what the apply and the outputs need beside it.
type planned struct {
	in      inputs
	files   []manifest.File
	client  *client
	ops     []*op
	deletes []*deletion
	holes   []changeset.Hole
	entries []changeset.Entry
	digest  string
}

// load checks the inputs, reads the manifest and resolves each object,
// its references among them; it calls nothing. The resources come in the
// order the apply takes: what a resource references before it.
func (c *Capability) load(req preview.Request) (*planned, []*resource, error) {
	in, err := parseInputs(req.Component, req.Inputs)
	if err != nil {
		return nil, nil, err
	}
	docs, files, err := manifest.ReadFiles(req.Root, in.Manifest)
	if err != nil {
		return nil, nil, err
	}
	p := &planned{in: in, files: files, client: &client{http: c.httpClient(), endpoint: in.Endpoint, token: os.Getenv(TokenEnv), poll: c.poll()}}
	var out []*resource
	seen := map[string]string{}
	byName := map[string]*resource{}
	for _, d := range docs {
		r, err := place(d, in)
		if err != nil && len(req.Missing) > 0 {
			// The project or the endpoint may be an input still missing:
			// the plan reads nothing, and declares the outputs.
			r, err = &resource{Doc: d, Map: lookupKind(d.APIVersion, d.Kind), Name: d.Name, Address: d.Kind + "/" + d.Name}, nil
		}
		if err != nil {
			return nil, nil, err
		}
		if where, dup := seen[r.Address]; dup {
			return nil, nil, fmt.Errorf("%s: %s is declared again (first in %s)", d.Where, r.Address, where)
		}
		seen[r.Address] = d.Where
		byName[d.Kind+"/"+d.Name] = r
		out = append(out, r)
	}
	if len(req.Missing) > 0 {
		return p, out, nil
	}
	for _, r := range out {
		if r.Map == nil {
			continue
		}
		if r.Want, r.deps, err = r.body(in.Stack, byName); err != nil {
			return nil, nil, fmt.Errorf("%s: %s %s: %w", r.Doc.Where, r.Doc.Kind, r.Doc.Name, err)
		}
	}
	if out, err = applyOrder(out); err != nil {
		return nil, nil, err
	}
	return p, out, nil
}

// place finds an object's project, location and name, and its address.
func place(d manifest.Document, in inputs) (*resource, error) {
	r := &resource{Doc: d, Map: lookupKind(d.APIVersion, d.Kind), Name: d.Name}
	spec, _ := d.Object["spec"].(map[string]any)
	if id, ok := spec["resourceID"].(string); ok && id != "" {
		r.Name = id
	}
	if r.Map == nil {
		// A kind gcp-apply does not write may still be named by a
		// reference: its project and location place it.
		r.Address = d.Kind + "/" + d.Name
		r.Project = resolveProject(in.Project, d.Object)
		field := refKinds[d.Kind].LocationField
		if field == "" {
			field = "location"
		}
		r.Location, _ = spec[field].(string)
		return r, nil
	}
	r.Project = resolveProject(in.Project, d.Object)
	if r.Project == "" {
		return nil, fmt.Errorf("%s: %s %s has no project: set the step's project, spec.projectRef.external, the annotation %s, %s or %s",
			d.Where, d.Kind, d.Name, ProjectAnnotation, ProjectEnv, CloudProjectEnv)
	}
	r.Address = d.Kind + "/" + r.Project + "/"
	r.Location, _ = spec["location"].(string)
	if r.Map.Location {
		if r.Location == "" {
			return nil, fmt.Errorf("%s: %s %s: spec.location is required (the region or location in its URL)", d.Where, d.Kind, d.Name)
		}
		r.Address += r.Location + "/"
	}
	r.Address += r.Name
	for _, part := range []string{r.Project, r.Location, r.Name} {
		if strings.ContainsAny(part, "/?#") {
			return nil, fmt.Errorf("%s: %s %s: %q cannot be part of a URL path", d.Where, d.Kind, d.Name, part)
		}
	}
	return r, nil
}

// body is what the manifest sets, as the REST API names it: the spec's
// fields (camelCase as in the API) but resourceID and projectRef, the
// location where the URL holds it, each reference, at any depth, as the
// field it sets, and metadata.labels with captf's labels as labels. deps
// are the objects of the manifest its references name.
func (r *resource) body(stack string, byName map[string]*resource) (map[string]any, []*resource, error) {
	spec, _ := r.Doc.Object["spec"].(map[string]any)
	out, _ := deepCopy(spec).(map[string]any)
	if out == nil {
		out = map[string]any{}
	}
	delete(out, "resourceID")
	delete(out, "projectRef")
	if r.Map.Location {
		delete(out, "location")
	}
	deps, err := r.resolveRefs(out, byName)
	if err != nil {
		return nil, nil, err
	}
	for from, to := range r.Map.Renames {
		if v, ok := out[from]; ok {
			delete(out, from)
			out[to] = v
		}
	}
	labels := map[string]any{}
	md, _ := r.Doc.Object["metadata"].(map[string]any)
	if l, ok := md["labels"].(map[string]any); ok {
		for k, v := range l {
			labels[k] = v
		}
	}
	labels[ManagedByLabel] = ManagedByValue
	labels[StackLabel] = stack
	out["labels"] = labels
	return out, deps, nil
}

// deepCopy copies a decoded JSON value, so that resolving references
// leaves the manifest as read.
func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, c := range x {
			out[k] = deepCopy(c)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, c := range x {
			out[i] = deepCopy(c)
		}
		return out
	}
	return v
}

// path is the resource's URL path, each part escaped.
func (r *resource) path() string {
	return fill(r.Map.Path, url.PathEscape(r.Project), url.PathEscape(r.Location), url.PathEscape(r.Name))
}

func (r *resource) collection() string {
	return fill(r.Map.Collection, url.PathEscape(r.Project), url.PathEscape(r.Location), "")
}

// plan reads the API and decides every resource; it writes nothing. A key
// shorter than preview.MinKeySize is refused before the API is called.
func (c *Capability) plan(ctx context.Context, req preview.Request) (*planned, []*resource, error) {
	p, resources, err := c.load(req)
	if err != nil {
		return nil, nil, err
	}
	if err := preview.CheckKey(req.Key); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", p.in.Stack, err)
	}
	missing, waiting := preview.WaitingHoles(req.Missing)
	if len(missing) > 0 {
		p.holes = append(p.holes, waiting...)
		p.digest, err = p.computeDigest(req, missing)
		return p, resources, err
	}
	for _, r := range resources {
		p.ops = append(p.ops, p.decide(ctx, r))
	}
	if p.in.Prune {
		p.planPrune(ctx, resources)
	}
	if p.entries, err = p.makeEntries(); err != nil {
		return nil, nil, err
	}
	p.digest, err = p.computeDigest(req, nil)
	return p, resources, err
}

// decide reads one resource and decides what the apply does with it.
func (p *planned) decide(ctx context.Context, r *resource) *op {
	o := &op{res: r}
	if r.Map == nil {
		o.hole = fmt.Sprintf("%s has no REST mapping in captf (%s); the apply skips it", r.Doc.Kind, r.Doc.APIVersion)
		return o
	}
	live, err := p.client.get(ctx, r.Map, r.path())
	if err != nil {
		o.hole = fmt.Sprintf("read %s: %s; it cannot say whether the resource is there, and the apply leaves it alone", r.Address, err)
		return o
	}
	if live == nil {
		o.action = changeset.ActionCreate
		o.fields = sortedKeys(r.Want)
		return o
	}
	o.live = live
	var differ, fixed []string
	for _, k := range sortedKeys(r.Want) {
		if !holds(live[k], r.Want[k]) {
			differ = append(differ, k)
			// setLabels changes nothing but labels.
			if slices.Contains(r.Map.Immutable, k) || r.Map.Update == updateSetLabels && k != "labels" {
				fixed = append(fixed, k)
			}
		}
	}
	switch {
	case len(differ) == 0:
		o.action = changeset.ActionNoOp
	case len(fixed) > 0:
		o.hole = fmt.Sprintf("replace required: %s cannot change in place; the apply leaves the resource alone", strings.Join(fixed, ", "))
	case r.Map.Update == updateNone:
		// The kind has no in-place update: what differs stays as it is.
		o.action = changeset.ActionNoOp
	default:
		o.action = changeset.ActionUpdate
		o.fields = differ
	}
	return o
}

// planPrune lists, for each kind, project and location the manifest
// declares, the live resources captf created for this stack and plans a
// delete for each one the manifest no longer declares. A list that fails
// is a hole, and nothing of that collection is deleted.
func (p *planned) planPrune(ctx context.Context, resources []*resource) {
	declared := map[string]bool{}
	type scope struct {
		m                 *mapping
		project, location string
	}
	var scopes []scope
	for _, r := range resources {
		if r.Map == nil {
			continue
		}
		declared[r.Address] = true
		s := scope{r.Map, r.Project, r.Location}
		if !slices.Contains(scopes, s) {
			scopes = append(scopes, s)
		}
	}
	// Deletes go in the reverse of the table's order.
	slices.SortStableFunc(scopes, func(a, b scope) int {
		return slices.Index(mappings, b.m) - slices.Index(mappings, a.m)
	})
	for _, s := range scopes {
		probe := &resource{Map: s.m, Project: s.project, Location: s.location}
		items, err := p.client.list(ctx, s.m, probe.collection())
		if err != nil {
			p.holes = append(p.holes, changeset.Hole{Reason: fmt.Sprintf("prune: list %s of project %s: %s; no delete of that kind is planned", s.m.Kind, s.project, err)})
			continue
		}
		for _, it := range items {
			labels, _ := it["labels"].(map[string]any)
			owner := labels[ManagedByLabel]
			if owner != ManagedByValue && owner != LegacyManagedByValue || labels[StackLabel] != p.in.Stack {
				continue
			}
			full, _ := it["name"].(string)
			name := full[strings.LastIndex(full, "/")+1:]
			address := s.m.Kind + "/" + s.project + "/"
			if s.m.Location {
				address += s.location + "/"
			}
			address += name
			if name == "" || declared[address] {
				continue
			}
			p.deletes = append(p.deletes, &deletion{m: s.m, project: s.project, location: s.location, name: name, address: address})
		}
	}
}

// makeEntries makes the document's entries and the holes of the
// resources the apply leaves alone.
func (p *planned) makeEntries() ([]changeset.Entry, error) {
	var out []changeset.Entry
	for _, o := range p.ops {
		if o.hole != "" {
			p.holes = append(p.holes, changeset.Hole{Address: o.res.Address, Reason: o.hole})
			continue
		}
		e := changeset.Entry{Member: p.in.Stack, Address: o.res.Address, Action: o.action}
		for _, f := range o.fields {
			a := changeset.Attribute{Name: f}
			var err error
			if a.After, err = changeset.Canonical(o.res.Want[f]); err != nil {
				return nil, fmt.Errorf("%s: %s: %w", o.res.Address, f, err)
			}
			if before, ok := o.live[f]; ok && o.live != nil {
				if a.Before, err = changeset.Canonical(before); err != nil {
					return nil, fmt.Errorf("%s: %s: %w", o.res.Address, f, err)
				}
			}
			e.Attributes = append(e.Attributes, a)
		}
		out = append(out, e)
	}
	for _, d := range p.deletes {
		out = append(out, changeset.Entry{Member: p.in.Stack, Address: d.address, Action: changeset.ActionDelete})
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
