package terraformcluster

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/runner"
)

// Kind is what the run engine asks of a kind it reconciles (ARCHITECTURE.md,
// "One engine, many kinds"): the engine names no kind; a kind is this
// small adapter.
type Kind interface {
	// Name is the kind's name: in a TerraformPlan's targetRef, the
	// captf.io/owner-kind label, owner references and events.
	Name() string
	// Short is the kind's short name in the names of its Secrets
	// (captf-inputs-<short>-<name>) and its state (captf-<short>-<name>).
	Short() string
	// New is an empty object of the kind.
	New() Object
	// ListReading lists the objects of the kind in namespace whose
	// variable sources the field index indexReads has under key.
	ListReading(ctx context.Context, c client.Reader, namespace, key string) ([]Object, error)
	// CopyStatus makes dst's status, the kind's own fields too, a deep
	// copy of src's.
	CopyStatus(dst, src Object)
	// Applied writes into view's status what a successful apply reported
	// that the kind publishes there, and returns the steps that publish
	// the rest (a spec field of the contract).
	Applied(view Object, msg *runner.Message) []step
	// Signs are the signs of a past apply the kind's object itself
	// carries (a published field an apply wrote).
	Signs(obj Object) []string
}

// kind is the kind this reconciler serves.
func (r *Reconciler) kind() Kind { return cluster{} }

// cluster is the TerraformCluster kind.
type cluster struct{}

var _ Kind = cluster{}

func (cluster) Name() string  { return "TerraformCluster" }
func (cluster) Short() string { return "tfc" }
func (cluster) New() Object   { return &infrav1.TerraformCluster{} }

func (cluster) ListReading(ctx context.Context, c client.Reader, namespace, key string) ([]Object, error) {
	var list infrav1.TerraformClusterList
	if err := c.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{indexReads: key}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	objs := make([]Object, len(list.Items))
	for i := range list.Items {
		objs[i] = &list.Items[i]
	}
	return objs, nil
}

func (cluster) CopyStatus(dst, src Object) {
	dst.(*infrav1.TerraformCluster).Status = *src.(*infrav1.TerraformCluster).Status.DeepCopy()
}

// Applied: the failure domains reach status.failureDomains, and the
// control plane endpoint spec.controlPlaneEndpoint.
func (cluster) Applied(view Object, msg *runner.Message) []step {
	view.(*infrav1.TerraformCluster).Status.FailureDomains = failureDomains(msg.FailureDomains)
	if e := msg.Endpoint; e != nil {
		return []step{publishEndpoint{Host: e.Host, Port: e.Port}}
	}
	return nil
}

func (cluster) Signs(obj Object) []string {
	if e := obj.(*infrav1.TerraformCluster).Spec.ControlPlaneEndpoint; e.Host != "" || e.Port != 0 {
		return []string{"spec.controlPlaneEndpoint, which an apply published"}
	}
	return nil
}

// setEndpoint publishes the module's control plane endpoint in
// spec.controlPlaneEndpoint, the Cluster API contract's field, in a patch
// of its own (the status is written at the end of the reconcile).
func (r *Reconciler) setEndpoint(ctx context.Context, obj Object, e infrav1.APIEndpoint) error {
	if obj.(*infrav1.TerraformCluster).Spec.ControlPlaneEndpoint == e {
		return nil
	}
	if err := r.patchObject(ctx, obj, func(obj Object) { obj.(*infrav1.TerraformCluster).Spec.ControlPlaneEndpoint = e }); err != nil {
		return fmt.Errorf("control plane endpoint: %w", err)
	}
	return nil
}
