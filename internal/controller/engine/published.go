package engine

import (
	"context"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/tfstate"
)

// Publisher is a Kind whose object publishes IDs that Cluster API binds
// Nodes to (a machine's provider ID, a pool's members). Such an object is
// reported provisioned only once Published finds exactly what it
// publishes in its own state's outputs: an ID that came from anywhere
// else — set when the object was created — reaches no Machine.
type Publisher interface {
	// Published is why obj, whose state records the inputs it renders,
	// may not be reported provisioned, read from that state's outputs;
	// nil when it may.
	Published(obj Object, output func(name string) (tfstate.Output, error)) *Wait
}

// unpublished is why obj, whose state st records its inputs, may not be
// reported provisioned yet (Publisher); nil when it may, or once it was.
func (r *Reconciler) unpublished(ctx context.Context, obj Object, st *stateRead) (*Wait, error) {
	p, ok := r.kind().(Publisher)
	if !ok || IsProvisioned(obj) {
		return nil, nil
	}
	st, err := r.withChunks(ctx, obj, st)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return &Wait{Reason: ReasonApplying, Message: "The state is not there yet."}, nil
	}
	// What the kind publishes from the state is published again first
	// (each step does nothing when it is there): a serial read before a
	// publishing step could run leaves nothing unpublished.
	if err := r.publishState(ctx, obj, st); err != nil {
		return nil, err
	}
	return p.Published(obj, st.output), nil
}

// setUnpublished records that obj's apply succeeded but what it publishes
// is not its state's (wait): a failed apply, not provisioned.
func setUnpublished(obj Object, wait *Wait) {
	setCondition(obj, infrav1.ConditionApplyJobSucceeded, false, wait.Reason, wait.Message)
	setCondition(obj, infrav1.ConditionReady, false, wait.Reason, wait.Message)
}
