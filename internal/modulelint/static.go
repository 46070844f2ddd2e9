package modulelint

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
)

// known are the functions whose result's type the text alone tells: the
// conversions, and a few that always build a string.
var known = map[string]cty.Type{
	"tostring":   cty.String,
	"tonumber":   cty.Number,
	"tobool":     cty.Bool,
	"tolist":     cty.List(cty.DynamicPseudoType),
	"toset":      cty.Set(cty.DynamicPseudoType),
	"tomap":      cty.Map(cty.DynamicPseudoType),
	"format":     cty.String,
	"join":       cty.String,
	"jsonencode": cty.String,
}

// static evaluates expr as far as the module's text tells: every reference
// (var.x, local.x, a resource) is unknown, and so is every function's
// result, of the type above when it is one of those, of any type
// otherwise. So a literal is known, a template is a string, and a list
// or object written out has the shape it is written with. An expression
// the evaluation refuses is unknown: terraform reports it.
//
// In JSON syntax only the references are found: an expression there that
// calls a function is unknown.
func static(expr hcl.Expression) cty.Value {
	ctx := &hcl.EvalContext{Variables: map[string]cty.Value{}, Functions: map[string]function.Function{}}
	for _, t := range expr.Variables() {
		ctx.Variables[t.RootName()] = cty.DynamicVal
	}
	if node, ok := expr.(hclsyntax.Node); ok {
		_ = hclsyntax.VisitAll(node, func(n hclsyntax.Node) hcl.Diagnostics {
			if call, ok := n.(*hclsyntax.FunctionCallExpr); ok {
				t, ok := known[call.Name]
				if !ok {
					t = cty.DynamicPseudoType
				}
				ctx.Functions[call.Name] = unknownOf(t)
			}
			return nil
		})
	}
	v, diags := expr.Value(ctx)
	if diags.HasErrors() {
		return cty.DynamicVal
	}
	return v
}

// unknownOf is a function of any arguments whose result is an unknown
// value of type t.
func unknownOf(t cty.Type) function.Function {
	return function.New(&function.Spec{
		VarParam: &function.Parameter{
			Name:             "args",
			Type:             cty.DynamicPseudoType,
			AllowNull:        true,
			AllowUnknown:     true,
			AllowDynamicType: true,
			AllowMarked:      true,
		},
		Type: function.StaticReturnType(t),
		Impl: func([]cty.Value, cty.Type) (cty.Value, error) { return cty.UnknownVal(t), nil },
	})
}
