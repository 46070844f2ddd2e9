// Package tfplan reads terraform's saved plan file itself and writes the
// parts of the plan document that `terraform show -json` would write for
// it which captf reads: the resource and output changes with their values
// and markers, and the variables set. It spares `captf plan` a second
// terraform process that loads the configuration again and starts every
// provider again for its schema.
//
// The plan file's inner format is terraform's own, not a public interface.
// This package reads the format version it was built and tested against
// (3, written by terraform 1.x and OpenTofu) and returns ErrUnsupported
// for anything else, or for a plan holding what it does not render
// (deferred changes, action invocations, ephemeral resources): the caller
// then runs terraform show. The values are
// decoded with the providers' schemas (the JSON of `terraform providers
// schema -json`) and written by the rules of terraform's show -json, which
// the tests hold it to: unknown values left out of "after" and listed in
// "after_unknown", sensitive paths from the plan and the schema.
package tfplan

import (
	"archive/zip"
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	tfjson "github.com/hashicorp/terraform-json"
	"github.com/zclconf/go-cty/cty"
	"google.golang.org/protobuf/encoding/protowire"
)

// ErrUnsupported is returned for a plan this package does not render.
var ErrUnsupported = errors.New("plan file not readable here")

// ErrNoSchema is returned when the schemas given lack one the plan needs,
// or do not decode its values: schemas older than the providers.
var ErrNoSchema = errors.New("no schema")

// FormatVersion is the tfplan format version this package reads.
const FormatVersion = 3

// Write reads the saved plan file at path and writes its plan document
// to w as it reads, decoding values with schemas: format_version,
// resource_changes, output_changes, variables (those set: show -json adds
// the defaults), an empty planned_values, terraform_version and errored.
// The plan is never whole in memory. It returns the address of the
// provider configuration each resource change was planned with.
//
// On an error, what was written is not a plan document: ErrUnsupported
// for a plan this package does not read, ErrNoSchema when schemas lack a
// schema the plan needs or do not decode its values.
func Write(w io.Writer, path string, schemas *tfjson.ProviderSchemas) (map[string]string, error) {
	z, err := zip.OpenReader(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	defer z.Close()
	i := slices.IndexFunc(z.File, func(f *zip.File) bool { return f.Name == "tfplan" })
	if i < 0 {
		return nil, fmt.Errorf("%w: no tfplan in the plan file", ErrUnsupported)
	}
	rc, err := z.File[i].Open()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	defer rc.Close()
	d := &writer{out: w, schemas: schemas, dec: newDecoder(), types: map[typeKey]cty.Type{}, providers: map[string]string{}}
	d.buf = append(make([]byte, 0, flushBytes*2), `{"format_version":"1.2"`...)
	// The zip reader checks the entry's size and checksum at its end,
	// which topFields reads to.
	if err := topFields(bufio.NewReaderSize(rc, 64<<10), d.field); err != nil {
		if errors.Is(err, ErrUnsupported) || errors.Is(err, ErrNoSchema) {
			return nil, err
		}
		return nil, fmt.Errorf("tfplan: %w", err)
	}
	if err := d.end(); err != nil {
		return nil, err
	}
	return d.providers, nil
}

// flushBytes is how much of the document the writer holds before it
// writes it out.
const flushBytes = 64 << 10

// The sections of the document, in the order of the fields that fill
// them.
const (
	noSection = iota
	variablesSection
	resourcesSection
	outputsSection
)

var sectionOpen = [...]string{variablesSection: `,"variables":{`, resourcesSection: `,"resource_changes":[`, outputsSection: `,"output_changes":{`}
var sectionClose = [...]byte{variablesSection: '}', resourcesSection: ']', outputsSection: '}'}

// typeKey names a resource type: its provider, whether it is a data
// source's, and the type.
type typeKey struct {
	provider string
	data     bool
	typ      string
}

type writer struct {
	out     io.Writer
	schemas *tfjson.ProviderSchemas
	dec     *decoder
	// types are the implied types of the resource types met.
	types     map[typeKey]cty.Type
	providers map[string]string
	buf       []byte

	// section is the section open, done the sections closed.
	section int
	done    [outputsSection + 1]bool

	version          uint64
	terraformVersion string
	errored          bool
}

// field renders one field of the Plan message (planfile.proto).
func (d *writer) field(num protowire.Number, _ protowire.Type, v []byte, n uint64) error {
	switch num {
	case 1:
		if d.version = n; n != FormatVersion {
			return fmt.Errorf("%w: tfplan format version %d (this captf reads %d)", ErrUnsupported, n, FormatVersion)
		}
	case 2:
		name, raw, err := decodeVariable(v)
		if err != nil {
			return err
		}
		if err := d.variable(name, raw); err != nil {
			return fmt.Errorf("variable %s: %w", name, err)
		}
	case 3:
		rc, err := decodeResourceChange(v)
		if err != nil {
			return err
		}
		mode, typ, err := resourceOf(rc.addr)
		switch {
		case err != nil:
			return err
		case mode == "ephemeral":
			// show writes an ephemeral resource without its values.
			return fmt.Errorf("%w: ephemeral resource %s", ErrUnsupported, rc.addr)
		case mode == "data" && rc.change.action == actionDelete:
			// terraform deletes data sources from the state; show leaves
			// these out.
			return nil
		}
		if err := d.resource(&rc, mode == "data", typ); err != nil {
			return fmt.Errorf("%s: %w", rc.addr, err)
		}
	case 4:
		oc, err := decodeOutputChange(v)
		if err != nil {
			return err
		}
		if err := d.output(&oc); err != nil {
			return fmt.Errorf("output %s: %w", oc.name, err)
		}
	case 14:
		d.terraformVersion = string(v)
	case 20:
		d.errored = n != 0
	case 27, 31:
		return fmt.Errorf("%w: the plan holds deferred changes", ErrUnsupported)
	case 30:
		return fmt.Errorf("%w: the plan holds action invocations", ErrUnsupported)
	}
	if len(d.buf) >= flushBytes {
		return d.flush()
	}
	return nil
}

// member starts a member of section s, opening it, or closing the open
// one first. A section cannot open twice: the fields must come in the
// order of their numbers, as terraform writes them.
func (d *writer) member(s int) error {
	if d.section == s {
		d.buf = append(d.buf, ',')
		return nil
	}
	d.closeSection()
	if d.done[s] {
		return fmt.Errorf("%w: the plan's fields are not in order", ErrUnsupported)
	}
	d.buf = append(d.buf, sectionOpen[s]...)
	d.section = s
	return nil
}

func (d *writer) closeSection() {
	if d.section != noSection {
		d.buf = append(d.buf, sectionClose[d.section])
		d.done[d.section] = true
		d.section = noSection
	}
}

// end writes the document's last members and what is left of it.
func (d *writer) end() error {
	if d.version != FormatVersion {
		return fmt.Errorf("%w: no tfplan format version", ErrUnsupported)
	}
	d.closeSection()
	d.buf = append(d.buf, `,"planned_values":{},"terraform_version":`...)
	d.buf = appendJSONString(d.buf, d.terraformVersion)
	d.buf = append(d.buf, `,"errored":`...)
	d.buf = strconv.AppendBool(d.buf, d.errored)
	d.buf = append(d.buf, '}')
	return d.flush()
}

func (d *writer) flush() error {
	_, err := d.out.Write(d.buf)
	d.buf = d.buf[:0]
	return err
}

func (d *writer) variable(name string, raw []byte) error {
	v, err := d.dec.decode(raw, cty.DynamicPseudoType)
	if err != nil {
		return err
	}
	if !v.wholly() {
		return errors.New("an unknown value")
	}
	if err := d.member(variablesSection); err != nil {
		return err
	}
	d.buf = appendJSONString(d.buf, name)
	d.buf = append(d.buf, `:{"value":`...)
	d.buf = v.appendJSON(d.buf)
	d.buf = append(d.buf, '}')
	return nil
}

// The actions of planfile.proto's Action enum, and show's names for them.
const actionDelete = 5

var actionNames = map[uint64]string{
	0:  `["no-op"]`,
	1:  `["create"]`,
	2:  `["read"]`,
	3:  `["update"]`,
	5:  `["delete"]`,
	6:  `["delete","create"]`,
	7:  `["create","delete"]`,
	8:  `["forget"]`,
	9:  `["create","forget"]`, // terraform's only
	10: `["forget","create"]`, // OpenTofu's only
}

// resource renders a resource change of type typ, a data source's or a
// managed resource's.
func (d *writer) resource(rc *resourceChange, data bool, typ string) error {
	c := &rc.change
	acts, ok := actionNames[c.action]
	if !ok {
		return fmt.Errorf("%w: action %d", ErrUnsupported, c.action)
	}
	src, err := providerSource(rc.provider)
	if err != nil {
		return err
	}
	schema, err := resourceSchema(d.schemas, src, data, typ)
	if err != nil {
		return err
	}
	tkey := typeKey{src, data, typ}
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
	if err := d.member(resourcesSection); err != nil {
		return err
	}
	d.providers[rc.addr] = rc.provider
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
	if err := d.member(outputsSection); err != nil {
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

// resourceOf returns the mode (managed, data or ephemeral) and the type of
// a resource instance address such as module.a["k"].data.t.n[0].
func resourceOf(addr string) (mode, typ string, err error) {
	rest := afterModules(addr)
	mode = "managed"
	for _, m := range []string{"data", "ephemeral"} {
		if r, ok := strings.CutPrefix(rest, m+"."); ok {
			mode, rest = m, r
			break
		}
	}
	typ, _, ok := strings.Cut(rest, ".")
	if !ok || typ == "" {
		return "", "", fmt.Errorf("resource address %q", addr)
	}
	return mode, typ, nil
}

// afterModules is an address without its module steps,
// module.a["k"].module.b[0].
func afterModules(addr string) string {
	rest := addr
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
			return rest
		}
		rest = rest[i+1:]
	}
	return rest
}
