package modulelint

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// What the runner Job owns or cannot bind, whatever the role.

var (
	terraformSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
		{Type: "backend", LabelNames: []string{"type"}},
		{Type: "cloud"},
		{Type: "required_providers"},
	}}
	resourceSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
		{Type: "provisioner", LabelNames: []string{"type"}},
		{Type: "lifecycle"},
	}}
	lifecycleSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "prevent_destroy"}}}
)

// builtinProvider is terraform's own provider, which has no versions.
const builtinProvider = "terraform.io/builtin/terraform"

// checkTerraform reports backend and cloud blocks, which the runner
// replaces with its own backend (the state lives in a Secret beside the
// object), and providers that the module does not pin: the runner's root
// has no lock file, so every Job's init picks a version anew.
func (m *module) checkTerraform() []Finding {
	var out []Finding
	for _, tb := range m.terraform {
		content, _, _ := tb.Body.PartialContent(terraformSchema)
		for _, b := range content.Blocks {
			switch b.Type {
			case "backend":
				out = append(out, at(b.DefRange, Error, RuleBackend, "backend %q: the runner owns the backend; remove the block", b.Labels[0]))
			case "cloud":
				out = append(out, at(b.DefRange, Error, RuleCloud, "cloud: the runner owns the backend; remove the block"))
			case "required_providers":
				attrs, _ := b.Body.JustAttributes()
				for name, a := range attrs {
					if unpinned(a.Expr) {
						out = append(out, at(a.Range, Warning, RuleProviderVersion,
							"required_providers %q has no version constraint: each runner Job's init installs the newest release, so the plan that is approved and the apply that checks it can run different versions; add version", name))
					}
				}
			}
		}
	}
	return out
}

// unpinned says whether a required_providers entry is known to have no
// version: an object without one. A string is the older form of a
// version constraint.
func unpinned(expr hcl.Expression) bool {
	v := static(expr)
	t := v.Type()
	if !t.IsObjectType() || !v.IsWhollyKnown() || v.IsNull() || t.HasAttribute("version") {
		return false
	}
	if t.HasAttribute("source") {
		if src := v.GetAttr("source"); src.Type() == cty.String && src.AsString() == builtinProvider {
			return false
		}
	}
	return true
}

// checkResources reports provisioners, which run at apply outside the
// plan the approval covers, and prevent_destroy, which fails every
// destroy Job of the object.
func (m *module) checkResources() []Finding {
	var out []Finding
	for _, rb := range append(append([]*hcl.Block{}, m.resources...), m.removed...) {
		owner := "a removed block"
		if rb.Type == "resource" {
			owner = rb.Labels[0] + "." + rb.Labels[1]
		}
		content, _, _ := rb.Body.PartialContent(resourceSchema)
		for _, b := range content.Blocks {
			switch b.Type {
			case "provisioner":
				out = append(out, at(b.DefRange, Warning, RuleProvisioner,
					"provisioner %q of %s runs at apply, outside the plan: the p2: hash does not bind what it does (see docs/fingerprint.md)", b.Labels[0], owner))
			case "lifecycle":
				if rb.Type != "resource" {
					continue
				}
				lc, _, _ := b.Body.PartialContent(lifecycleSchema)
				if a := lc.Attributes["prevent_destroy"]; a != nil && isTrue(static(a.Expr)) {
					out = append(out, at(a.Range, Warning, RulePreventDestroy,
						"%s has prevent_destroy = true: terraform refuses any plan that destroys or replaces it, so deleting the object (deletionPolicy Destroy) fails its destroy Job, and the finalizer stays until the destroy runs a module without it", owner))
				}
			}
		}
	}
	return out
}

// isTrue says whether v is known to be true.
func isTrue(v cty.Value) bool {
	return v.Type() == cty.Bool && v.IsKnown() && !v.IsNull() && v.True()
}
