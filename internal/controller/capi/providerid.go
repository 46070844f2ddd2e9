package capi

import (
	"context"
	"fmt"

	"github.com/captf/captf/internal/controller/engine"
)

// PublishProviderID is the step that writes an object's spec.providerID,
// a field of Cluster API's contracts, once: the ID of a machine or of a
// pool never changes (the API refuses a change).
type PublishProviderID struct {
	ID string
	// Field is the object's spec.providerID.
	Field func(engine.Object) *string
}

func (s PublishProviderID) Apply(ctx context.Context, r *engine.Reconciler, x *engine.StepContext) error {
	if *s.Field(x.Obj) != "" {
		return nil
	}
	if err := r.PatchObject(ctx, x.Obj, func(obj engine.Object) { *s.Field(obj) = s.ID }); err != nil {
		return fmt.Errorf("provider ID: %w", err)
	}
	return nil
}
