// Package tfplan reads terraform's saved plan file itself and writes the
// parts of the plan document that `terraform show -json` would write for
// it which captf reads: the resource and output changes with their values
// and markers, and the variables. It spares `captf plan` a second
// terraform process that starts every provider again for its schema.
//
// The plan file's inner format is terraform's own, not a public interface.
// This package reads the format version it was built and tested against
// (3, written by terraform 1.x) and returns ErrUnsupported for anything
// else, or for a plan holding what it does not render (deferred changes,
// action invocations, identities): the caller then runs terraform show.
// The values are decoded with the providers' schemas (the JSON of
// `terraform providers schema -json`) and written with go-cty, the
// library terraform writes them with, by the rules of terraform's
// jsonplan: unknown values left out of "after" and listed in
// "after_unknown", sensitive paths from the plan and the schema.
package tfplan

import (
	"archive/zip"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	tfjson "github.com/hashicorp/terraform-json"
	"github.com/zclconf/go-cty/cty"
)

// ErrUnsupported is returned for a plan this package does not render.
var ErrUnsupported = errors.New("plan file not readable here")

// ErrNoSchema is returned when the schemas given lack one the plan needs,
// or do not decode its values: schemas older than the providers.
var ErrNoSchema = errors.New("no schema")

// FormatVersion is the tfplan format version this package reads.
const FormatVersion = 3

// maxPlanBytes bounds the tfplan entry read into memory.
const maxPlanBytes = 1 << 30

// Document is a plan document and what only the plan file tells.
type Document struct {
	// JSON is the plan document: format_version, terraform_version,
	// variables (those set: show -json adds the defaults), planned_values
	// (empty), resource_changes, output_changes and errored.
	JSON []byte
	// Providers maps each resource change's address to the address of
	// the provider configuration it was planned with.
	Providers map[string]string
}

// Read reads the saved plan file at path and renders its plan document,
// decoding values with schemas.
func Read(path string, schemas *tfjson.ProviderSchemas) (*Document, error) {
	raw, err := readEntry(path, "tfplan")
	if err != nil {
		return nil, err
	}
	p, err := decodePlan(raw)
	if err != nil {
		return nil, err
	}
	if p.version != FormatVersion {
		return nil, fmt.Errorf("%w: tfplan format version %d (this captf reads %d)", ErrUnsupported, p.version, FormatVersion)
	}
	if p.unsupported != "" {
		return nil, fmt.Errorf("%w: the plan holds %s", ErrUnsupported, p.unsupported)
	}
	// The document is about twice the size of the encoded plan.
	w := &writer{schemas: schemas, dec: newDecoder(), types: map[string]cty.Type{}, buf: make([]byte, 0, 2*len(raw)+4096)}
	if err := w.plan(p); err != nil {
		return nil, err
	}
	doc := &Document{JSON: w.buf, Providers: make(map[string]string, len(p.resources))}
	for _, rc := range p.resources {
		doc.Providers[rc.addr] = rc.provider
	}
	return doc, nil
}

func readEntry(path, name string) ([]byte, error) {
	z, err := zip.OpenReader(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	defer z.Close()
	for _, f := range z.File {
		if f.Name != name {
			continue
		}
		if f.UncompressedSize64 > maxPlanBytes {
			return nil, fmt.Errorf("%w: %s is %d bytes", ErrUnsupported, name, f.UncompressedSize64)
		}
		r, err := f.Open()
		if err != nil {
			return nil, err
		}
		defer r.Close()
		b := make([]byte, f.UncompressedSize64)
		_, err = io.ReadFull(r, b)
		if err == nil {
			// Read to the end, where the zip reader checks the entry's
			// size and checksum.
			var more []byte
			if more, err = io.ReadAll(io.LimitReader(r, 1)); err == nil && len(more) > 0 {
				err = errors.New("longer than the archive says")
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrUnsupported, name, err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("%w: no %s in the plan file", ErrUnsupported, name)
}

type writer struct {
	schemas *tfjson.ProviderSchemas
	dec     *decoder
	// types are the implied types of the resource types met, by provider,
	// mode and type.
	types map[string]cty.Type
	buf   []byte
}

func (d *writer) plan(p *plan) error {
	d.buf = append(d.buf, `{"format_version":"1.2","terraform_version":`...)
	d.buf = appendJSONString(d.buf, p.terraformVersion)
	if len(p.variables) > 0 {
		d.buf = append(d.buf, `,"variables":{`...)
		names := make([]string, 0, len(p.variables))
		for n := range p.variables {
			names = append(names, n)
		}
		slices.Sort(names)
		for i, n := range names {
			v, err := d.dec.decode(p.variables[n], cty.DynamicPseudoType)
			if err != nil {
				return fmt.Errorf("variable %s: %w", n, err)
			}
			if !v.wholly() {
				return fmt.Errorf("variable %s: an unknown value", n)
			}
			if i > 0 {
				d.buf = append(d.buf, ',')
			}
			d.buf = appendJSONString(d.buf, n)
			d.buf = append(d.buf, `:{"value":`...)
			d.buf = v.appendJSON(d.buf)
			d.buf = append(d.buf, '}')
		}
		d.buf = append(d.buf, '}')
	}
	d.buf = append(d.buf, `,"planned_values":{},"resource_changes":[`...)
	first := true
	for i := range p.resources {
		rc := &p.resources[i]
		data := isData(rc.addr)
		if data && rc.change.action == actionDelete {
			// terraform deletes data sources from the state; show leaves
			// these out.
			continue
		}
		if !first {
			d.buf = append(d.buf, ',')
		}
		first = false
		if err := d.resource(rc, data); err != nil {
			return fmt.Errorf("%s: %w", rc.addr, err)
		}
	}
	d.buf = append(d.buf, `],"output_changes":{`...)
	for i := range p.outputs {
		if i > 0 {
			d.buf = append(d.buf, ',')
		}
		if err := d.output(&p.outputs[i]); err != nil {
			return fmt.Errorf("output %s: %w", p.outputs[i].name, err)
		}
	}
	d.buf = append(d.buf, `},"errored":`...)
	d.buf = strconv.AppendBool(d.buf, p.errored)
	d.buf = append(d.buf, '}')
	return nil
}

// The actions of planfile.proto's Action enum, and show's names for them.
const actionDelete = 5

var actionNames = map[uint64]string{
	0: `["no-op"]`,
	1: `["create"]`,
	2: `["read"]`,
	3: `["update"]`,
	5: `["delete"]`,
	6: `["delete","create"]`,
	7: `["create","delete"]`,
	8: `["forget"]`,
	9: `["create","forget"]`,
}

func (d *writer) resource(rc *resourceChange, data bool) error {
	c := &rc.change
	acts, ok := actionNames[c.action]
	if !ok {
		return fmt.Errorf("%w: action %d", ErrUnsupported, c.action)
	}
	src, err := providerSource(rc.provider)
	if err != nil {
		return err
	}
	typ, err := resourceType(rc.addr)
	if err != nil {
		return err
	}
	schema, err := resourceSchema(d.schemas, src, data, typ)
	if err != nil {
		return err
	}
	tkey := fmt.Sprintf("%s %t %s", src, data, typ)
	ty, ok := d.types[tkey]
	if !ok {
		ty = impliedType(schema.Block)
		d.types[tkey] = ty
	}
	before, after, err := d.values(c, ty)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoSchema, err)
	}
	for _, side := range []struct {
		v     *value
		paths []path
	}{{before, c.beforeSens}, {after, c.afterSens}} {
		if err := d.markPaths(side.v, side.paths); err != nil {
			return err
		}
		markSchema(schema.Block, side.v)
		side.v.hoist()
	}
	b := append(d.buf, `{"address":`...)
	b = appendJSONString(b, rc.addr)
	if rc.prevRunAddr != "" && rc.prevRunAddr != rc.addr {
		b = append(b, `,"previous_address":`...)
		b = appendJSONString(b, rc.prevRunAddr)
	}
	if rc.deposedKey != "" {
		b = append(b, `,"deposed":`...)
		b = appendJSONString(b, rc.deposedKey)
	}
	b = append(b, `,"provider_name":`...)
	b = appendJSONString(b, src)
	b = append(b, `,"change":{"actions":`...)
	b = append(b, acts...)
	b = appendChange(b, before, after, false)
	if c.importing != nil {
		b = append(b, `,"importing":`...)
		switch {
		case c.importing.unknown:
			b = append(b, `{"unknown":true}`...)
		case c.importing.id != "":
			b = append(b, `{"id":`...)
			b = appendJSONString(b, c.importing.id)
			b = append(b, '}')
		case len(c.importing.identity) > 0:
			id, err := d.identity(src, typ, c.importing.identity)
			if err != nil {
				return err
			}
			b = append(b, `{"identity":`...)
			b = id.appendJSON(b)
			b = append(b, '}')
		default:
			b = append(b, "{}"...)
		}
	}
	d.buf = append(b, "}}"...)
	return nil
}

// identity decodes a resource identity by the provider's identity schema
// of the resource type.
func (d *writer) identity(src, typ string, raw []byte) (*value, error) {
	var is *tfjson.IdentitySchema
	if ps := d.schemas.Schemas[src]; ps != nil {
		is = ps.ResourceIdentitySchemas[typ]
	}
	if is == nil {
		return nil, fmt.Errorf("%w: no identity schema for %s in provider %s", ErrNoSchema, typ, src)
	}
	attrs := make(map[string]cty.Type, len(is.Attributes))
	for name, a := range is.Attributes {
		attrs[name] = a.IdentityType
	}
	v, err := d.dec.decode(raw, cty.Object(attrs))
	if err != nil {
		return nil, fmt.Errorf("%w: identity: %w", ErrNoSchema, err)
	}
	if !v.wholly() {
		return nil, errors.New("identity: an unknown value")
	}
	return v, nil
}

func (d *writer) output(oc *outputChange) error {
	c := &oc.change
	acts, ok := actionNames[c.action]
	if !ok {
		return fmt.Errorf("%w: action %d", ErrUnsupported, c.action)
	}
	before, after, err := d.values(c, cty.DynamicPseudoType)
	if err != nil {
		return err
	}
	b := appendJSONString(d.buf, oc.name)
	b = append(b, `:{"actions":`...)
	b = append(b, acts...)
	// An output's sensitivity is one flag for both sides.
	before.sensitive, after.sensitive = oc.sensitive, oc.sensitive
	b = appendChange(b, before, after, true)
	d.buf = append(b, '}')
	return nil
}

// values decodes a change's before and after by the action's layout of
// its values (planfile.proto, Change.values); a side the action has not
// is null, as terraform reads it.
func (d *writer) values(c *change, ty cty.Type) (before, after *value, err error) {
	bi, ai := -1, -1
	switch c.action {
	case 0: // no-op: one value for both sides
		bi, ai = 0, 0
	case 1: // create
		ai = 0
	case 5, 8: // delete, forget
		bi = 0
	default: // read, update, the replacements, create then forget
		bi, ai = 0, 1
	}
	if want := max(bi, ai) + 1; len(c.values) != want {
		return nil, nil, fmt.Errorf("%d values for action %d, want %d", len(c.values), c.action, want)
	}
	before, after = &value{kind: kindNull}, &value{kind: kindNull}
	if bi >= 0 {
		if before, err = d.dec.decode(c.values[bi], ty); err != nil {
			return nil, nil, fmt.Errorf("before: %w", err)
		}
	}
	// A no-op's one value is decoded twice: marks are per side.
	if ai >= 0 {
		if after, err = d.dec.decode(c.values[ai], ty); err != nil {
			return nil, nil, fmt.Errorf("after: %w", err)
		}
	}
	return before, after, nil
}

// appendChange writes before, after, after_unknown and the two
// sensitivity markers. output says it is an output's change, whose
// markers are a single true or false.
func appendChange(b []byte, before, after *value, output bool) []byte {
	b = append(b, `,"before":`...)
	b = before.appendJSON(b)
	if after.kind != kindUnknown {
		// A wholly unknown after is left out, not null.
		b = append(b, `,"after":`...)
		b = after.appendJSON(b)
	}
	b = append(b, `,"after_unknown":`...)
	switch {
	case !after.wholly():
		b = after.appendUnknown(b)
	case output:
		b = append(b, "false"...)
	default:
		b = append(b, "{}"...)
	}
	if output {
		b = append(b, `,"before_sensitive":`...)
		b = strconv.AppendBool(b, before.sensitive)
		b = append(b, `,"after_sensitive":`...)
		return strconv.AppendBool(b, after.sensitive)
	}
	b = append(b, `,"before_sensitive":`...)
	b = before.appendSensitive(b)
	b = append(b, `,"after_sensitive":`...)
	return after.appendSensitive(b)
}

// markPaths marks the values at the plan's sensitive paths.
func (d *writer) markPaths(v *value, paths []path) error {
	for _, p := range paths {
		steps := make([]step, len(p))
		for i, s := range p {
			if s.key == nil {
				steps[i] = step{name: s.attr}
				continue
			}
			// An element key is encoded by its own type: a string
			// (a map key), a number (an index) or a set element.
			steps[i] = d.dec.key(s.key)
		}
		v.mark(steps)
	}
	return nil
}

// isData says whether a resource instance address is a data source's:
// its last module step is followed by "data.".
func isData(addr string) bool {
	_, rest := modulePrefix(addr)
	return strings.HasPrefix(rest, "data.")
}

// resourceType is the resource type in a resource instance address.
func resourceType(addr string) (string, error) {
	_, rest := modulePrefix(addr)
	rest = strings.TrimPrefix(rest, "data.")
	typ, _, ok := strings.Cut(rest, ".")
	if !ok || typ == "" {
		return "", fmt.Errorf("resource address %q", addr)
	}
	return typ, nil
}

// modulePrefix splits module.a["k"].module.b[0]. off an address.
func modulePrefix(addr string) (mod, rest string) {
	rest = addr
	for strings.HasPrefix(rest, "module.") {
		i := len("module.")
		for i < len(rest) && rest[i] != '.' && rest[i] != '[' {
			i++
		}
		if i < len(rest) && rest[i] == '[' {
			// Skip the key, a number or a quoted string with escapes.
			j := i + 1
			if j < len(rest) && rest[j] == '"' {
				j++
				for j < len(rest) && rest[j] != '"' {
					if rest[j] == '\\' {
						j++
					}
					j++
				}
				j++
			}
			for j < len(rest) && rest[j] != ']' {
				j++
			}
			i = j + 1
		}
		if i >= len(rest) || rest[i] != '.' {
			return addr[:len(addr)-len(rest)], rest
		}
		rest = rest[i+1:]
	}
	return addr[:len(addr)-len(rest)], rest
}
