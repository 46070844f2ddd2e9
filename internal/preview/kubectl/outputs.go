package kubectl

import (
	"context"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/captf/captf/internal/preview"
	"github.com/captf/captf/pkg/changeset"
)

// outputDoc finds the document an output names; the object must be one the
// manifest declares.
func (p *planned) outputDoc(name string, o outputRef) (int, error) {
	for i, d := range p.docs {
		if d.Ref.address() == o.Object {
			return i, nil
		}
	}
	return 0, fmt.Errorf("inputs: outputs.%s.object %s is not an object the manifest declares", name, o.Object)
}

// outputNames are the outputs in name order, so errors come out the same way
// each time.
func (p *planned) outputNames() []string {
	names := make([]string, 0, len(p.cfg.Outputs))
	for n := range p.cfg.Outputs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// readOutputs reads each named field from the cluster.
func (p *planned) readOutputs(ctx context.Context) (preview.Outputs, error) {
	out := preview.Outputs{}
	for _, name := range p.outputNames() {
		o := p.cfg.Outputs[name]
		i, err := p.outputDoc(name, o)
		if err != nil {
			return nil, err
		}
		d := p.docs[i]
		got, err := p.target.resource(d.Mapping, d.Ref.Namespace).Get(ctx, d.Ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("output %s: read %s: %w", name, o.Object, err)
		}
		if v, ok := lookup(got.Object, o.Field); ok {
			out[name] = mustJSON(v)
		}
	}
	return out, nil
}

// plannedOutputs are the outputs the plan already knows: a field the
// manifest sets (with the value the dry run gives it), and any field of an
// object the dry run leaves unchanged (read from the live object).
func (p *planned) plannedOutputs() (preview.Outputs, error) {
	out := preview.Outputs{}
	for _, name := range p.outputNames() {
		o := p.cfg.Outputs[name]
		i, err := p.outputDoc(name, o)
		if err != nil {
			return nil, err
		}
		op := p.objects[i]
		if op.Hole != "" {
			continue
		}
		if op.Action == changeset.ActionNoOp {
			if v, ok := lookup(p.live[i], o.Field); ok {
				out[name] = mustJSON(v)
			}
			continue
		}
		if _, declared := lookup(withoutBookkeeping(p.docs[i].Object), o.Field); !declared {
			continue
		}
		v, ok := lookup(p.dry[i], o.Field)
		if !ok {
			v, _ = lookup(p.docs[i].Object, o.Field)
		}
		out[name] = mustJSON(v)
	}
	return out, nil
}
