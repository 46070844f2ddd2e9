package modulelint

import (
	"slices"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/captf/captf/internal/modulecontract"
)

// RuleReplicasNotIgnored: a pool module sets an argument from
// captf_replicas that its lifecycle does not ignore.
const RuleReplicasNotIgnored = "replicas-not-ignored"

// checkReplicas reports, in a pool module, each resource argument set
// from var.captf_replicas that the resource's lifecycle ignore_changes
// does not list. While an autoscaler owns the MachinePool's replicas the
// manager hands the module those of its last apply, so such an argument
// would set the group's size back at every apply. count and for_each are
// not reported: a pool whose members are resources of the module is
// sized by captf alone. Only native syntax is read; a JSON file's bodies
// are not walked.
func (m *module) checkReplicas(role modulecontract.Role) []Finding {
	if role != modulecontract.RolePool {
		return nil
	}
	var out []Finding
	for _, rb := range m.resources {
		body, ok := rb.Body.(*hclsyntax.Body)
		if !ok {
			continue
		}
		ignored, all := ignoredChanges(body)
		if all {
			continue
		}
		for name, r := range replicaArguments(body) {
			if slices.Contains(ignored, name) {
				continue
			}
			out = append(out, at(r, Warning, RuleReplicasNotIgnored,
				"%s.%s sets %s from var.%s: while an autoscaler owns the MachinePool's replicas (cluster.x-k8s.io/replicas-managed-by), the module gets those of its last apply, and every apply sets the size back to them; add %s to lifecycle { ignore_changes }",
				rb.Labels[0], rb.Labels[1], name, modulecontract.VariableReplicas, name))
		}
	}
	return out
}

// replicaArguments are the top-level arguments and blocks of a resource
// body whose value refers to var.captf_replicas, by name, with where.
func replicaArguments(body *hclsyntax.Body) map[string]hcl.Range {
	out := map[string]hcl.Range{}
	for name, a := range body.Attributes {
		switch name {
		case "count", "for_each", "depends_on", "provider":
			continue
		}
		if refersToReplicas(a.Expr) {
			out[name] = a.SrcRange
		}
	}
	for _, b := range body.Blocks {
		switch b.Type {
		case "lifecycle", "provisioner", "connection":
			continue
		}
		name := b.Type
		if b.Type == "dynamic" && len(b.Labels) > 0 {
			name = b.Labels[0]
		}
		if _, seen := out[name]; !seen && blockRefersToReplicas(b.Body) {
			out[name] = b.DefRange()
		}
	}
	return out
}

// blockRefersToReplicas reports whether any expression in body refers to
// var.captf_replicas.
func blockRefersToReplicas(body *hclsyntax.Body) bool {
	found := false
	_ = hclsyntax.VisitAll(body, func(n hclsyntax.Node) hcl.Diagnostics {
		if e, ok := n.(hclsyntax.Expression); ok && refersToReplicas(e) {
			found = true
		}
		return nil
	})
	return found
}

// refersToReplicas reports whether expr refers to var.captf_replicas.
func refersToReplicas(expr hcl.Expression) bool {
	for _, t := range expr.Variables() {
		if len(t) > 1 && t.RootName() == "var" {
			if a, ok := t[1].(hcl.TraverseAttr); ok && a.Name == modulecontract.VariableReplicas {
				return true
			}
		}
	}
	return false
}

// ignoredChanges are the names of the arguments a resource body's
// lifecycle ignore_changes lists (the first step of each), or all.
func ignoredChanges(body *hclsyntax.Body) (names []string, all bool) {
	for _, b := range body.Blocks {
		if b.Type != "lifecycle" {
			continue
		}
		a := b.Body.Attributes["ignore_changes"]
		if a == nil {
			continue
		}
		if t, diags := hcl.AbsTraversalForExpr(a.Expr); !diags.HasErrors() && t.RootName() == "all" {
			return nil, true
		}
		list, _ := hcl.ExprList(a.Expr)
		for _, e := range list {
			if t, diags := hcl.RelTraversalForExpr(e); !diags.HasErrors() && len(t) > 0 {
				if n, ok := t[0].(hcl.TraverseAttr); ok {
					names = append(names, n.Name)
				}
			}
		}
	}
	return names, false
}
