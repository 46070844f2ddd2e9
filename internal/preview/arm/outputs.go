package arm

import (
	"context"
	"errors"
	"fmt"

	"github.com/captf/captf/internal/preview"
	"github.com/captf/captf/pkg/changeset"
)

// liveOutputs evaluates the template's outputs against live reads.
func (p *planned) liveOutputs(ctx context.Context) (preview.Outputs, error) {
	return p.outputs(p.evaluatorWith(ctx, &reading{client: p.client}))
}

// plannedOutputs are the outputs the plan already knows: those that read
// no resource, and those whose every resource read is planned no-op.
func (p *planned) plannedOutputs(ctx context.Context) (preview.Outputs, error) {
	return p.outputs(p.evaluatorWith(ctx, plannedReads{ops: p.ops}))
}

func (p *planned) evaluatorWith(ctx context.Context, r resolver) *evaluator {
	return &evaluator{ctx: ctx, tmpl: p.tmpl, subscription: p.in.Subscription, group: p.group,
		params: p.ev.params, resources: p.ev.resources, resolve: r}
}

// outputs evaluates each output. One that comes to nothing, is known only
// after apply, is secure or reads a secure value is left out.
func (p *planned) outputs(ev *evaluator) (preview.Outputs, error) {
	out := preview.Outputs{}
	for _, name := range p.tmpl.outputNames() {
		o := p.tmpl.Outputs[name]
		if o.HasCondition {
			v, err := ev.tree(o.Condition)
			if errors.Is(err, errNothing) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("template %s: outputs.%s.condition: %w", p.in.Template, name, err)
			}
			if containsUnknown(v) {
				continue
			}
			b, ok := reveal(v).(bool)
			if !ok {
				return nil, fmt.Errorf("template %s: outputs.%s.condition: must be a boolean, not %s", p.in.Template, name, kindOf(v))
			}
			if !b {
				continue
			}
		}
		v, err := ev.tree(o.Value)
		if errors.Is(err, errNothing) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("template %s: outputs.%s: %w", p.in.Template, name, p.scrub(err))
		}
		if containsUnknown(v) || containsSecret(v) {
			continue
		}
		b, err := changeset.Canonical(v)
		if err != nil {
			return nil, fmt.Errorf("template %s: outputs.%s: %w", p.in.Template, name, err)
		}
		out[name] = b
	}
	return out, nil
}

// scrub returns err with its text redacted (it may quote a server's
// message).
func (p *planned) scrub(err error) error {
	return errors.New(p.redact.text(err.Error()))
}
