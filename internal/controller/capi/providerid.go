package capi

import (
	"context"
	"encoding/json"
	"fmt"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/modulecontract"
	"github.com/captf/captf/internal/tfstate"
)

// PublishProviderID is the step that writes an object's spec.providerID,
// a field of Cluster API's contracts, once, from the provider_id output
// of the object's state: the ID of a machine or of a pool never changes
// (the API refuses a change).
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

// StateProviderID reads the provider_id output of an object's state: the
// ID, or why there is none to publish. required: a machine's module must
// declare it; a pool's may not. A message never shows the value.
func StateProviderID(output func(string) (tfstate.Output, error), required bool) (string, *engine.Wait) {
	name := modulecontract.OutputProviderID
	out, err := output(name)
	switch {
	case err != nil:
		return "", &engine.Wait{Reason: infrav1.ReasonProviderIDInvalid, Message: fmt.Sprintf("The state's %s output could not be read: %v. The apply counts as failed; the object is not reported provisioned.", name, err)}
	case !out.Found && required:
		return "", &engine.Wait{Reason: infrav1.ReasonProviderIDMissing, Message: fmt.Sprintf("The apply succeeded, but the state has no %s output (or it is null): a machine module must declare it, with the ID the workload cluster's Node has (captf lint --role machine). The apply counts as failed; the machine is not reported provisioned and its Machine gets no provider ID.", name)}
	case !out.Found:
		return "", nil
	case out.Sensitive:
		return "", &engine.Wait{Reason: infrav1.ReasonProviderIDInvalid, Message: fmt.Sprintf("The state's %s output is sensitive, and the ID is published in spec.providerID: declare it without sensitive. The apply counts as failed; the object is not reported provisioned.", name)}
	}
	var id string
	if json.Unmarshal(out.Value, &id) != nil || id == "" || len(id) > maxProviderID {
		return "", &engine.Wait{Reason: infrav1.ReasonProviderIDInvalid, Message: fmt.Sprintf("The state's %s output is not a string of 1 to %d characters. The apply counts as failed; the object is not reported provisioned.", name, maxProviderID)}
	}
	return id, nil
}

// maxProviderID bounds spec.providerID (the API's).
const maxProviderID = 512

// SameProviderID is why spec.providerID (spec) may not be reported with
// the state's provider_id output (state, "" for none): a Wait when they
// differ, nil when they agree. The IDs are not shown: a Node's provider
// ID says where it runs.
func SameProviderID(spec, state string) *engine.Wait {
	if spec == state {
		return nil
	}
	if state == "" {
		return &engine.Wait{Reason: infrav1.ReasonProviderIDMismatch, Message: fmt.Sprintf(
			"spec.providerID is set, but the state has no %s output: the ID came with the object's creation, not from its apply. The object is not reported provisioned, and Cluster API reads no provider ID of it.", modulecontract.OutputProviderID)}
	}
	if spec == "" {
		return &engine.Wait{Reason: infrav1.ReasonProviderIDMismatch, Message: "spec.providerID is not published yet."}
	}
	return &engine.Wait{Reason: infrav1.ReasonProviderIDMismatch, Message: fmt.Sprintf(
		"spec.providerID is not the %s output of the object's own state: the ID came with the object's creation, not from its apply. The object is not reported provisioned, and Cluster API reads no provider ID of it; delete it (its Machine) to start again.", modulecontract.OutputProviderID)}
}
