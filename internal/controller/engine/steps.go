package engine

import (
	"context"
)

func (approvalStarted) Apply(ctx context.Context, r *Reconciler, x *StepContext) error {
	return r.approvalStarted(ctx, x.Obj, x.Job)
}
func (s consumeApproval) Apply(ctx context.Context, r *Reconciler, x *StepContext) error {
	return r.consumeApproval(ctx, x.Obj, s.Hash)
}
func (s openPlan) Apply(ctx context.Context, r *Reconciler, x *StepContext) error {
	return r.openPlan(ctx, x.Obj, s)
}
func (s finishPlan) Apply(ctx context.Context, r *Reconciler, x *StepContext) error {
	return r.finishPlan(ctx, x.Obj, s)
}
func (s annotateJob) Apply(ctx context.Context, r *Reconciler, x *StepContext) error {
	return r.annotateJob(ctx, x.Job, s.Key, s.Value)
}
func (markInterrupted) Apply(ctx context.Context, r *Reconciler, x *StepContext) error {
	return r.markInterrupted(ctx, x.Obj)
}
func (clearInterrupted) Apply(ctx context.Context, r *Reconciler, x *StepContext) error {
	return r.clearInterrupted(ctx, x.Obj)
}
