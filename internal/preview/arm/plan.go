package arm

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/captf/captf/internal/preview"
	"github.com/captf/captf/pkg/changeset"
)

// op is what the plan decided for one template resource.
type op struct {
	res    *resource
	action string
	// changes are the properties a create declares or an update changes.
	changes []change
	// live is the resource as ARM returned it; nil when it is not there.
	live map[string]any
	// secrets are the secure values of the body, where they are.
	secrets []secretLeaf
	// sealed is the keyed digest of secrets the apply stamps as SecureTag
	// on a top-level resource; empty without secrets.
	sealed string
	// hole says why the resource could not be read; it then has no entry.
	hole string
}

// deletion is a resource prune deletes.
type deletion struct {
	ID, Address, Type, APIVersion string
	hole                          string
}

// planned is one plan and what the apply and the outputs need beside it.
type planned struct {
	in     inputs
	tmpl   *template
	body   []byte
	client *client
	redact *redactor
	group  groupInfo
	// createGroup is true when the group does not exist yet.
	createGroup bool
	ev          *evaluator
	ops         []*op
	deletes     []*deletion
	holes       []changeset.Hole
	entries     []changeset.Entry
	digest      string
}

// load checks the inputs, reads the template and makes the client; it
// calls nothing.
func (c *Capability) load(req preview.Request) (*planned, error) {
	in, err := parseInputs(req.Component, req.Inputs)
	if err != nil {
		return nil, err
	}
	p := &planned{in: in, redact: &redactor{}}
	file := filepath.Join(req.Root, filepath.FromSlash(in.Template))
	info, err := os.Stat(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("input template: %s does not exist in the repository", in.Template)
	case err != nil:
		return nil, fmt.Errorf("input template: %w", err)
	case info.Size() > maxTemplate:
		return nil, fmt.Errorf("template %s: %d bytes, more than the %d ARM takes", in.Template, info.Size(), maxTemplate)
	}
	if p.body, err = os.ReadFile(file); err != nil {
		return nil, fmt.Errorf("input template: %w", err)
	}
	if p.tmpl, err = parseTemplate(p.body); err != nil {
		return nil, fmt.Errorf("template %s: %w", in.Template, err)
	}
	for name, v := range in.Parameters {
		if d := p.tmpl.parameter(name); d != nil && d.secure() {
			p.redact.add(v)
		}
	}
	endpoint, _ := url.Parse(in.Endpoint) // parseInputs checked it
	p.client = &client{http: c.httpClient(), endpoint: endpoint, token: os.Getenv(TokenEnv), redact: p.redact, poll: c.poll()}
	groupID := "/subscriptions/" + in.Subscription + "/resourceGroups/" + in.ResourceGroup
	p.group = groupInfo{Name: in.ResourceGroup, ID: groupID, Location: in.Location}
	return p, nil
}

// plan reads ARM and decides every resource; it changes nothing. Its digest
// binds the secure values under req.Key; a key shorter than
// preview.MinKeySize is refused before ARM is called.
func (c *Capability) plan(ctx context.Context, req preview.Request) (*planned, error) {
	p, err := c.load(req)
	if err != nil {
		return nil, err
	}
	if err := preview.CheckKey(req.Key); err != nil {
		return nil, fmt.Errorf("resource group %s: %w", p.in.ResourceGroup, err)
	}
	missing, waiting := preview.WaitingHoles(req.Missing)
	if len(missing) > 0 {
		p.holes = append(p.holes, waiting...)
		p.digest, err = p.computeDigest(req, missing)
		return p, err
	}
	if err := p.readGroup(ctx); err != nil {
		return nil, err
	}
	if len(p.holes) == 0 {
		if err := p.decide(ctx, req.Key); err != nil {
			return nil, err
		}
	}
	if p.entries, err = p.makeEntries(); err != nil {
		return nil, err
	}
	p.digest, err = p.computeDigest(req, nil)
	return p, err
}

// readGroup reads the resource group. A group that is not there is
// created by the apply, in the step's location; one that is there must be
// in it. A read that fails leaves a hole of the whole member: without the
// group captf knows neither its location nor its resources.
func (p *planned) readGroup(ctx context.Context) error {
	g, err := p.client.get(ctx, p.group.ID, groupAPIVersion)
	if err != nil {
		p.holes = append(p.holes, changeset.Hole{Reason: fmt.Sprintf("read resource group %s: %s", p.in.ResourceGroup, p.redact.text(err.Error()))})
		return nil
	}
	if g == nil {
		if p.in.Location == "" {
			return fmt.Errorf("input location: resource group %s does not exist, and the step gives no location to create it in", p.in.ResourceGroup)
		}
		p.createGroup = true
		return nil
	}
	live, _ := g["location"].(string)
	live = normaliseLocation(live)
	if p.in.Location != "" && p.in.Location != live {
		return fmt.Errorf("input location: resource group %s is in %s, not %s, and ARM cannot move a group", p.in.ResourceGroup, live, p.in.Location)
	}
	p.group.Location = live
	if id, ok := g["id"].(string); ok && strings.EqualFold(id, p.group.ID) {
		p.group.ID = id
	}
	return nil
}

// bind makes the plan's evaluator and gives the parameters their values;
// every secure value, a default's too, is kept out of ARM's messages.
func (p *planned) bind(ctx context.Context, r resolver, partial bool) error {
	p.ev = &evaluator{ctx: ctx, tmpl: p.tmpl, subscription: p.in.Subscription, group: p.group, resolve: r}
	if err := p.ev.bind(p.in.Parameters, p.in.Template, partial); err != nil {
		return err
	}
	for _, v := range p.ev.params {
		if isSecret(v) {
			p.redact.add(v)
		}
	}
	return nil
}

// decide evaluates the template and compares each resource with ARM's.
func (p *planned) decide(ctx context.Context, key []byte) error {
	if err := p.bind(ctx, planning{}, false); err != nil {
		return err
	}
	resources, err := p.ev.declare(false)
	if err != nil {
		return fmt.Errorf("template %s: %w", p.in.Template, err)
	}
	for _, r := range resources {
		body, err := p.ev.body(r)
		if err != nil {
			return fmt.Errorf("template %s: %w", p.in.Template, err)
		}
		o := &op{res: r}
		if !p.createGroup {
			o.live, err = p.client.get(ctx, r.ID, r.APIVersion)
			if err != nil {
				o.hole = fmt.Sprintf("read %s at api-version %s: %s", r.Address, r.APIVersion, p.redact.text(err.Error()))
				p.ops = append(p.ops, o)
				continue
			}
		}
		var changes []change
		want := withoutNoise(body)
		if o.live == nil {
			o.action = changeset.ActionCreate
			declared(nil, want, &changes)
			collectSecrets(nil, want, &o.secrets)
		} else {
			compare(nil, want, withoutNoise(o.live), true, &changes, &o.secrets)
		}
		if len(o.secrets) > 0 {
			if o.sealed, err = seal(key, r.ID, o.secrets); err != nil {
				return err
			}
		}
		if o.live != nil {
			changes = append(changes, secretChanges(o)...)
			o.action = changeset.ActionNoOp
			if len(changes) > 0 {
				o.action = changeset.ActionUpdate
			}
		}
		slices.SortStableFunc(changes, func(a, b change) int { return strings.Compare(a.Path.String(), b.Path.String()) })
		o.changes = changes
		p.ops = append(p.ops, o)
	}
	if _, err := applyOrder(p.ops); err != nil {
		return fmt.Errorf("template %s: %w", p.in.Template, err)
	}
	if p.in.Prune && !p.createGroup {
		return p.planPrune(ctx)
	}
	return nil
}

// collectSecrets finds the secure values of a body.
func collectSecrets(pth path, v any, out *[]secretLeaf) {
	switch x := v.(type) {
	case secretValue:
		*out = append(*out, secretLeaf{Path: pth, Value: x.V})
	case map[string]any:
		for _, k := range sortedKeys(x) {
			collectSecrets(pth.child(k), x[k], out)
		}
	case []any:
		for i, e := range x {
			collectSecrets(pth.child(i), e, out)
		}
	}
}

// seal is the keyed digest of a resource's secure values, the value of
// SecureTag.
func seal(key []byte, id string, secrets []secretLeaf) (string, error) {
	values := make([]map[string]any, len(secrets))
	for i, s := range secrets {
		values[i] = map[string]any{"path": s.Path.String(), "value": s.Value}
	}
	return preview.KeyedDigest(key, Kind+" "+SecureTag, map[string]any{"id": strings.ToLower(id), "values": values})
}

// secretChanges decides the secure values of a resource that is there.
// ARM does not return a secure property, so a top-level resource is
// compared by the keyed digest captf stamped as SecureTag when it PUT
// them: every secure value changed when the tag differs. A child resource
// gets no tags: each secure value is compared with what the server
// returns at its path, and changed when it returns none.
func secretChanges(o *op) []change {
	var out []change
	if o.res.TopLevel {
		tags, _ := o.live["tags"].(map[string]any)
		tag, _ := lookupFold(tags, SecureTag)
		if tag == o.sealed {
			return nil
		}
		for _, s := range o.secrets {
			out = append(out, change{Path: s.Path, Sensitive: true})
		}
		return out
	}
	for _, s := range o.secrets {
		if live, ok := lookupPath(o.live, s.Path); !ok || !equalJSON(reveal(s.Value), live) {
			out = append(out, change{Path: s.Path, Sensitive: true})
		}
	}
	return out
}

// planPrune lists the group's resources and plans a delete for each one
// carrying captf's ownership tag of this component that the template no
// longer declares.
func (p *planned) planPrune(ctx context.Context) error {
	items, err := p.client.list(ctx, p.group.ID)
	if err != nil {
		p.holes = append(p.holes, changeset.Hole{Reason: fmt.Sprintf("prune: list the resources of group %s: %s; no delete is planned", p.in.ResourceGroup, p.redact.text(err.Error()))})
		return nil
	}
	declaredIDs := map[string]bool{}
	versions := map[string]string{}
	for _, o := range p.ops {
		declaredIDs[strings.ToLower(o.res.ID)] = true
		versions[strings.ToLower(o.res.Type)] = o.res.APIVersion
	}
	for _, it := range items {
		owner, _ := lookupFold(it.Tags, OwnerTag)
		if owner != p.in.Owner || declaredIDs[strings.ToLower(it.ID)] {
			continue
		}
		_, address, ok := strings.Cut(it.ID, "/providers/")
		if !ok {
			continue
		}
		d := &deletion{ID: it.ID, Address: address, Type: it.Type, APIVersion: versions[strings.ToLower(it.Type)]}
		if d.APIVersion == "" {
			if d.APIVersion, err = p.client.apiVersionOf(ctx, p.in.Subscription, it.Type); err != nil {
				d.hole = fmt.Sprintf("prune: the api-versions of %s could not be read: %s", it.Type, p.redact.text(err.Error()))
			}
		}
		p.deletes = append(p.deletes, d)
	}
	// Children before their parents, then by address.
	slices.SortFunc(p.deletes, func(a, b *deletion) int {
		if da, db := strings.Count(a.Address, "/"), strings.Count(b.Address, "/"); da != db {
			return db - da
		}
		return strings.Compare(strings.ToLower(a.Address), strings.ToLower(b.Address))
	})
	return nil
}

// groupAddress is the entry address of the resource group.
func (p *planned) groupAddress() string {
	return "Microsoft.Resources/resourceGroups/" + p.in.ResourceGroup
}

// makeEntries makes the document's entries and the holes of resources
// that could not be read.
func (p *planned) makeEntries() ([]changeset.Entry, error) {
	var out []changeset.Entry
	member := p.in.ResourceGroup
	if p.createGroup {
		loc, err := changeset.Canonical(p.group.Location)
		if err != nil {
			return nil, err
		}
		out = append(out, changeset.Entry{Member: member, Address: p.groupAddress(), Action: changeset.ActionCreate,
			Attributes: []changeset.Attribute{{Name: "location", After: loc}}})
	}
	for _, o := range p.ops {
		if o.hole != "" {
			p.holes = append(p.holes, changeset.Hole{Address: o.res.Address, Reason: o.hole})
			continue
		}
		e := changeset.Entry{Member: member, Address: o.res.Address, Action: o.action}
		for _, c := range o.changes {
			a, err := c.attribute()
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", o.res.Address, c.Path, err)
			}
			e.Attributes = append(e.Attributes, a)
		}
		out = append(out, e)
	}
	for _, d := range p.deletes {
		if d.hole != "" {
			p.holes = append(p.holes, changeset.Hole{Address: d.Address, Reason: d.hole})
			continue
		}
		out = append(out, changeset.Entry{Member: member, Address: d.Address, Action: changeset.ActionDelete})
	}
	return out, nil
}
