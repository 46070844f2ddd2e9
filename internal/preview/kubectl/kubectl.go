// Package kubectl is the kubectl-apply capability of pull-request plan
// previews (spec 003): it plans a manifest as a server-side apply with
// dryRun=All compared with each live object, and applies it only when a
// fresh dry run gives the approved digest. See docs/preview-kubectl.md.
package kubectl

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/captf/captf/internal/preview"
	"github.com/captf/captf/pkg/changeset"
)

// Kind is the step kind the capability serves.
const Kind = "kubectl-apply"

// Capability plans and applies kubectl-apply steps. The zero value is ready
// to use; it keeps nothing between calls (Plan.Private stays nil: Apply
// needs only the approved digest).
type Capability struct{}

var _ preview.Capability = Capability{}

// Kind returns "kubectl-apply".
func (Capability) Kind() string { return Kind }

// Plan dry-runs every document of the manifest and compares the answers with
// the live objects. It changes nothing in the cluster.
func (Capability) Plan(ctx context.Context, req preview.Request) (*preview.Plan, error) {
	p, err := plan(ctx, req)
	if err != nil {
		return nil, err
	}
	out := &preview.Plan{
		Member: changeset.Member{
			Name:       p.cfg.Stack,
			Component:  req.Component,
			Capability: Kind,
			Status:     changeset.StatusPlanned,
			PlanDigest: p.digest,
			Holes:      p.holes,
		},
	}
	if len(req.Missing) > 0 {
		return out, nil
	}
	out.Entries = p.entries()
	out.PlannedOutputs, err = p.plannedOutputs()
	if err != nil {
		return nil, err
	}
	out.DeclaredOutputs = p.outputNames()
	return out, nil
}

// Apply plans again and applies only when the fresh digest is the approved
// one: each document that is not a no-op as a server-side apply, in the
// plan's order (Namespaces and CRDs first, then the rest once the CRDs are
// established and the rest's dry runs pass), then the deletes of delete:
// owned-only. It returns the outputs read afterwards.
func (Capability) Apply(ctx context.Context, req preview.Request, approved *preview.Plan) (preview.Outputs, error) {
	if approved == nil || approved.Member.PlanDigest == "" {
		return nil, fmt.Errorf("apply: no approved plan digest; nothing was applied")
	}
	if len(req.Missing) > 0 {
		return nil, fmt.Errorf("apply: inputs from %v have no value yet; nothing was applied", req.Missing)
	}
	p, err := plan(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("plan before apply: %w", err)
	}
	if p.digest != approved.Member.PlanDigest {
		return nil, fmt.Errorf("member %s: approved %s, planned now %s; nothing was applied: %w", p.cfg.Stack, approved.Member.PlanDigest, p.digest, preview.ErrMoved)
	}
	if len(p.holes) > 0 {
		h := p.holes[0]
		return nil, fmt.Errorf("apply: %s: %s; nothing was applied", h.Address, h.Reason)
	}
	if err := p.apply(ctx); err != nil {
		return nil, err
	}
	for _, d := range p.deletes {
		uid := types.UID(d.UID)
		err := p.target.resource(d.Mapping, d.Ref.Namespace).Delete(ctx, d.Ref.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("delete %s: %w", d.Ref.address(), errors.New(p.redact(err.Error(), d.Ref.isSecret())))
		}
	}
	return p.readOutputs(ctx)
}

// Outputs reads the named fields from the cluster; an object or field that
// is not there is left out.
func (Capability) Outputs(ctx context.Context, req preview.Request) (preview.Outputs, error) {
	cfg, err := parseInputs(req.Component, req.Inputs)
	if err != nil {
		return nil, err
	}
	if len(cfg.Outputs) == 0 {
		return nil, nil
	}
	docs, err := readManifest(req.Root, cfg.Manifest)
	if err != nil {
		return nil, err
	}
	p := &planned{cfg: cfg}
	if p.target, err = connect(req.Root, cfg, p.redactWarning); err != nil {
		return nil, err
	}
	if p.docs, err = p.resolve(docs); err != nil {
		return nil, err
	}
	return p.readOutputs(ctx)
}
