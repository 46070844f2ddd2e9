package tfplan

import (
	"fmt"
	"strings"

	tfjson "github.com/hashicorp/terraform-json"
	"github.com/zclconf/go-cty/cty"
)

// The schema rules below are terraform's (internal/configs/configschema):
// the type a block's values are encoded with, and the paths its schema
// marks sensitive.

// impliedType is the object type of a block's values.
func impliedType(b *tfjson.SchemaBlock) cty.Type {
	attrs := make(map[string]cty.Type, len(b.Attributes)+len(b.NestedBlocks))
	for name, a := range b.Attributes {
		attrs[name] = attributeType(a)
	}
	for name, nb := range b.NestedBlocks {
		attrs[name] = blockType(nb)
	}
	return cty.Object(attrs)
}

func attributeType(a *tfjson.SchemaAttribute) cty.Type {
	if a.AttributeNestedType == nil {
		return a.AttributeType
	}
	n := a.AttributeNestedType
	attrs := make(map[string]cty.Type, len(n.Attributes))
	for name, na := range n.Attributes {
		attrs[name] = attributeType(na)
	}
	obj := cty.Object(attrs)
	switch n.NestingMode {
	case tfjson.SchemaNestingModeList:
		return cty.List(obj)
	case tfjson.SchemaNestingModeSet:
		return cty.Set(obj)
	case tfjson.SchemaNestingModeMap:
		return cty.Map(obj)
	}
	return obj
}

func blockType(nb *tfjson.SchemaBlockType) cty.Type {
	obj := cty.EmptyObject
	if nb.Block != nil {
		obj = impliedType(nb.Block)
	}
	switch nb.NestingMode {
	case tfjson.SchemaNestingModeList:
		if obj.HasDynamicTypes() {
			return cty.DynamicPseudoType
		}
		return cty.List(obj)
	case tfjson.SchemaNestingModeSet:
		return cty.Set(obj)
	case tfjson.SchemaNestingModeMap:
		if obj.HasDynamicTypes() {
			return cty.DynamicPseudoType
		}
		return cty.Map(obj)
	}
	return obj
}

// markSchema marks the values of v, an object of block b, that b's schema
// says are sensitive, whether null or not.
func markSchema(b *tfjson.SchemaBlock, v *value) {
	if b == nil || v.kind != kindObject {
		return
	}
	markAttributes(b.Attributes, v)
	for name, nb := range b.NestedBlocks {
		e := v.member(name)
		if e == nil || nb.Block == nil {
			continue
		}
		switch nb.NestingMode {
		case tfjson.SchemaNestingModeSingle, tfjson.SchemaNestingModeGroup:
			markSchema(nb.Block, e)
		default:
			for _, el := range e.elems {
				markSchema(nb.Block, el)
			}
		}
	}
}

// markAttributes marks the sensitive attributes of obj, and those of
// their nested attributes.
func markAttributes(attrs map[string]*tfjson.SchemaAttribute, obj *value) {
	if obj.kind != kindObject {
		return
	}
	for name, a := range attrs {
		e := obj.member(name)
		if e == nil {
			continue
		}
		if a.Sensitive {
			e.sensitive = true
		}
		n := a.AttributeNestedType
		if n == nil {
			continue
		}
		switch n.NestingMode {
		case tfjson.SchemaNestingModeList, tfjson.SchemaNestingModeSet, tfjson.SchemaNestingModeMap:
			for _, el := range e.elems {
				markAttributes(n.Attributes, el)
			}
		default:
			markAttributes(n.Attributes, e)
		}
	}
}

// resourceSchema finds the schema of a resource type in a provider.
func resourceSchema(s *tfjson.ProviderSchemas, provider string, data bool, typ string) (*tfjson.Schema, error) {
	ps := s.Schemas[provider]
	if ps == nil {
		return nil, fmt.Errorf("%w for provider %s", ErrNoSchema, provider)
	}
	m := ps.ResourceSchemas
	if data {
		m = ps.DataSourceSchemas
	}
	if rs := m[typ]; rs != nil && rs.Block != nil {
		return rs, nil
	}
	return nil, fmt.Errorf("%w for %s in provider %s", ErrNoSchema, typ, provider)
}

// providerSource returns the provider's source address in an absolute
// provider configuration address such as
// module.a.provider["registry.terraform.io/hashicorp/aws"].west.
func providerSource(addr string) (string, error) {
	_, rest, ok := strings.Cut(addr, `provider["`)
	if !ok {
		return "", fmt.Errorf("provider configuration address %q", addr)
	}
	src, _, ok := strings.Cut(rest, `"]`)
	if !ok || src == "" {
		return "", fmt.Errorf("provider configuration address %q", addr)
	}
	return src, nil
}
