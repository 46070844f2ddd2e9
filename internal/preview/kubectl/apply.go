package kubectl

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/captf/captf/pkg/changeset"
)

// crdResource is the resource of CustomResourceDefinitions.
var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// establishTimeout bounds the wait for a CRD the apply created to be
// served.
const establishTimeout = time.Minute

// apply applies the documents that are not no-ops, in the plan's order:
// the Namespaces and CRDs, then, once every CRD applied or waited for is
// established, a dry run of each of the rest, then their apply. A refused
// dry run there stops the apply before any of the rest is applied.
func (p *planned) apply(ctx context.Context) error {
	var rest []int
	var crds []string
	for i, d := range p.docs {
		if p.objects[i].Action == changeset.ActionNoOp {
			continue
		}
		if applyRank(d.Ref.Group, d.Ref.Kind) == 2 {
			rest = append(rest, i)
			continue
		}
		if err := p.applyOne(ctx, d, false); err != nil {
			return err
		}
		if d.Ref.Kind == "CustomResourceDefinition" {
			crds = append(crds, d.Ref.Name)
		}
	}
	for _, d := range p.docs {
		if d.CRD != nil && !slices.Contains(crds, d.CRD.Name) {
			crds = append(crds, d.CRD.Name)
		}
	}
	for _, name := range crds {
		if err := p.waitEstablished(ctx, name); err != nil {
			return err
		}
	}
	for _, dryRun := range []bool{true, false} {
		for _, i := range rest {
			if err := p.applyOne(ctx, p.docs[i], dryRun); err != nil {
				return err
			}
		}
	}
	return nil
}

// applyOne sends one document's server-side apply, or its dry run. A
// refused dry run names the object and what was applied before it.
func (p *planned) applyOne(ctx context.Context, d resolved, dryRun bool) error {
	p.inSecret = d.Ref.isSecret()
	defer func() { p.inSecret = false }()
	_, err := p.target.resource(d.Mapping, d.Ref.Namespace).Apply(ctx, d.Ref.Name, &unstructured.Unstructured{Object: d.Object}, p.applyOptions(dryRun))
	if err == nil {
		return nil
	}
	msg := p.redact(err.Error(), d.Ref.isSecret())
	if dryRun {
		return fmt.Errorf("apply %s (%s): the API server refused the dry run: %s; the Namespaces and CRDs before it were applied, nothing else", d.Ref.address(), d.Where, msg)
	}
	return fmt.Errorf("apply %s (%s): %w", d.Ref.address(), d.Where, errors.New(msg))
}

// waitEstablished waits until the CRD name is Established (its kind is
// served), and fails when its names are refused or the time runs out.
func (p *planned) waitEstablished(ctx context.Context, name string) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, establishTimeout, true, func(ctx context.Context) (bool, error) {
		crd, err := p.target.dyn.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, c := range conditions {
			m, _ := c.(map[string]any)
			switch {
			case m["type"] == "Established" && m["status"] == "True":
				return true, nil
			case m["type"] == "NamesAccepted" && m["status"] == "False":
				return false, fmt.Errorf("its names are not accepted: %v", m["message"])
			case m["type"] == "Established":
				last, _ = m["message"].(string)
			}
		}
		return false, nil
	})
	if err != nil {
		if last != "" {
			err = fmt.Errorf("%w (last: %s)", err, last)
		}
		return fmt.Errorf("wait for CustomResourceDefinition/%s to be established: %w", name, err)
	}
	return nil
}
