// Package providerid is the validating admission webhook of the fields a
// TerraformMachine, a TerraformMachinePool and a pool's member object (a
// TerraformMachinePoolMachine) publish for Cluster API: spec.providerID
// (all three) and spec.providerIDList (a pool) are the
// manager's to set, from the module's provider_id and provider_ids
// outputs in the object's own state, and nobody else may set or change
// them — Cluster API binds a Node to the provider ID a Machine's
// infrastructure names, and deletes the Node of an ID that leaves a
// pool's list. The CRDs' CEL rules (a providerID is set once; a template
// names neither field) hold while the webhook is down; the webhook adds
// who may set them, which CEL cannot see.
//
// A create that carries them is allowed from the manager, and from anyone
// when the object's controlling owner — a Machine or a MachinePool — is
// there with that UID and already holds the same IDs: that is how
// clusterctl move creates an object on its new management cluster (owners
// first, then the object with its owner references pointing at them, its
// spec as it was). Such a create brings Cluster API no ID it did not hold.
package providerid

import (
	"context"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	infrav1 "github.com/captf/captf/api/v1alpha1"
)

// The paths below are controller-runtime's for the types, where
// SetupWithManager registers the webhooks.
// +kubebuilder:webhook:path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-terraformmachine,mutating=false,failurePolicy=fail,sideEffects=None,groups=infrastructure.cluster.x-k8s.io,resources=terraformmachines,verbs=create;update,versions=v1alpha1,name=validation.terraformmachine.infrastructure.cluster.x-k8s.io,admissionReviewVersions=v1,timeoutSeconds=10
// +kubebuilder:webhook:path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-terraformmachinepoolmachine,mutating=false,failurePolicy=fail,sideEffects=None,groups=infrastructure.cluster.x-k8s.io,resources=terraformmachinepoolmachines,verbs=create;update,versions=v1alpha1,name=validation.terraformmachinepoolmachine.infrastructure.cluster.x-k8s.io,admissionReviewVersions=v1,timeoutSeconds=10
// +kubebuilder:webhook:path=/validate-infrastructure-cluster-x-k8s-io-v1alpha1-terraformmachinepool,mutating=false,failurePolicy=fail,sideEffects=None,groups=infrastructure.cluster.x-k8s.io,resources=terraformmachinepools,verbs=create;update,versions=v1alpha1,name=validation.terraformmachinepool.infrastructure.cluster.x-k8s.io,admissionReviewVersions=v1,timeoutSeconds=10

// SetupWithManager registers the webhooks of the three kinds on mgr's webhook
// server. managerUsername is the username the manager's requests carry,
// for a ServiceAccount "system:serviceaccount:<namespace>:<name>": only
// they set the published fields.
func SetupWithManager(mgr ctrl.Manager, managerUsername string) error {
	if managerUsername == "" {
		return errors.New("provider ID webhooks: the manager's username is required")
	}
	reader := mgr.GetAPIReader()
	machines := &validator[*infrav1.TerraformMachine]{kind: "TerraformMachine", manager: managerUsername, reader: reader, changed: machineChanged, created: machineCreated}
	if err := ctrl.NewWebhookManagedBy(mgr, &infrav1.TerraformMachine{}).WithValidator(machines).Complete(); err != nil {
		return err
	}
	pools := &validator[*infrav1.TerraformMachinePool]{kind: "TerraformMachinePool", manager: managerUsername, reader: reader, changed: poolChanged, created: poolCreated}
	if err := ctrl.NewWebhookManagedBy(mgr, &infrav1.TerraformMachinePool{}).WithValidator(pools).Complete(); err != nil {
		return err
	}
	members := &validator[*infrav1.TerraformMachinePoolMachine]{kind: "TerraformMachinePoolMachine", manager: managerUsername, reader: reader, changed: memberChanged, created: memberCreated}
	return ctrl.NewWebhookManagedBy(mgr, &infrav1.TerraformMachinePoolMachine{}).WithValidator(members).Complete()
}

// memberChanged is the published field an update of a pool's member
// object changes (the CRD's CEL rule refuses it too, for everyone).
func memberChanged(old, m *infrav1.TerraformMachinePoolMachine) *field.Error {
	if old.Spec.ProviderID != m.Spec.ProviderID {
		return field.Forbidden(field.NewPath("spec", "providerID"), "it never changes")
	}
	return nil
}

// memberCreated refuses a pool's member object made by anyone but the
// manager, whose provider ID its Machine does not already hold: Cluster
// API's MachinePool controller would make a Machine for it and bind it to
// that Node.
func memberCreated(ctx context.Context, c client.Reader, m *infrav1.TerraformMachinePoolMachine) (*field.Error, error) {
	return heldByMachine(ctx, c, m, m.Spec.ProviderID,
		"only the manager makes a pool's member objects, from the members of the pool's state; a new one may be made by another only when its Machine already holds the same ID (clusterctl move)")
}

// heldByMachine is the error, saying refusal, that refuses the
// spec.providerID id of a new obj unless obj's controlling owner Machine
// is there (by UID) and already holds id; nil when it does.
func heldByMachine(ctx context.Context, c client.Reader, obj client.Object, id, refusal string) (*field.Error, error) {
	path := field.NewPath("spec", "providerID")
	owner, refused, err := controllingOwner(ctx, c, obj, "Machine", path)
	if refused != nil || err != nil {
		return refused, err
	}
	if held, _, _ := unstructured.NestedString(owner.Object, "spec", "providerID"); held != id {
		return field.Forbidden(path, refusal), nil
	}
	return nil, nil
}

// machineChanged is the published field an update of a machine changes.
func machineChanged(old, m *infrav1.TerraformMachine) *field.Error {
	if old.Spec.ProviderID != m.Spec.ProviderID {
		return field.Forbidden(field.NewPath("spec", "providerID"), "only the manager sets it, from the module's provider_id output after the machine's apply")
	}
	return nil
}

// poolChanged is the published field an update of a pool changes.
func poolChanged(old, p *infrav1.TerraformMachinePool) *field.Error {
	if old.Spec.ProviderID != p.Spec.ProviderID {
		return field.Forbidden(field.NewPath("spec", "providerID"), "only the manager sets it, from the module's provider_id output after the pool's apply")
	}
	if !slices.Equal(old.Spec.ProviderIDList, p.Spec.ProviderIDList) {
		return field.Forbidden(field.NewPath("spec", "providerIDList"), "only the manager sets it, from the module's provider_ids output in the pool's state")
	}
	return nil
}

// machineCreated is the published field a new machine sets that its
// owner Machine does not already hold, as the error that refuses it.
func machineCreated(ctx context.Context, c client.Reader, m *infrav1.TerraformMachine) (*field.Error, error) {
	if m.Spec.ProviderID == "" {
		return nil, nil
	}
	return heldByMachine(ctx, c, m, m.Spec.ProviderID,
		"only the manager sets it, from the module's provider_id output in the machine's state; a new machine may carry it only when its Machine already holds the same ID (clusterctl move)")
}

// poolCreated is the published field a new pool sets that its owner
// MachinePool does not already hold, as the error that refuses it.
// MachinePool has no field of the pool's own ID: with its members',
// that ID may come only with an owner that is there.
func poolCreated(ctx context.Context, c client.Reader, p *infrav1.TerraformMachinePool) (*field.Error, error) {
	if p.Spec.ProviderID == "" && len(p.Spec.ProviderIDList) == 0 {
		return nil, nil
	}
	path := field.NewPath("spec", "providerIDList")
	if len(p.Spec.ProviderIDList) == 0 {
		path = field.NewPath("spec", "providerID")
	}
	owner, refused, err := controllingOwner(ctx, c, p, "MachinePool", path)
	if refused != nil || err != nil {
		return refused, err
	}
	held, _, _ := unstructured.NestedStringSlice(owner.Object, "spec", "providerIDList")
	for _, id := range p.Spec.ProviderIDList {
		if !slices.Contains(held, id) {
			return field.Forbidden(path, "only the manager sets it, from the module's provider_ids output in the pool's state; a new pool may carry IDs only that its MachinePool already holds (clusterctl move)"), nil
		}
	}
	return nil, nil
}

// controllingOwner is obj's controlling owner of Cluster API's kind, read
// from the API server, when obj's owner reference names one that is there
// with that UID; else the error that refuses path.
func controllingOwner(ctx context.Context, c client.Reader, obj client.Object, kind string, path *field.Path) (*unstructured.Unstructured, *field.Error, error) {
	refused := field.Forbidden(path, fmt.Sprintf("only the manager sets it; a new object may carry it only with a controlling owner %s that already holds it (clusterctl move)", kind))
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.Kind != kind {
		return nil, refused, nil
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != clusterGroup {
		return nil, refused, nil
	}
	owner := &unstructured.Unstructured{}
	owner.SetGroupVersionKind(gv.WithKind(kind))
	if err := c.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: ref.Name}, owner); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return nil, refused, nil
		}
		return nil, nil, fmt.Errorf("read the owner %s: %w", kind, err)
	}
	if owner.GetUID() != ref.UID {
		return nil, refused, nil
	}
	return owner, nil, nil
}

// clusterGroup is Cluster API's core API group.
const clusterGroup = "cluster.x-k8s.io"

// validator refuses a create or an update that sets a published field,
// by anyone but the manager (a create also by clusterctl move, see the
// package comment).
type validator[T client.Object] struct {
	kind, manager string
	// reader reads owners from the API server.
	reader client.Reader
	// changed is the published field an update from old to new changes,
	// as the error that refuses it; nil when none.
	changed func(old, new T) *field.Error
	// created is the published field a new object sets that its owner
	// does not hold, as the error that refuses it; nil when none.
	created func(ctx context.Context, c client.Reader, obj T) (*field.Error, error)
}

func (v *validator[T]) ValidateCreate(ctx context.Context, obj T) (admission.Warnings, error) {
	if manager, err := v.byManager(ctx); err != nil || manager {
		return nil, err
	}
	refused, err := v.created(ctx, v.reader, obj)
	if err != nil || refused == nil {
		return nil, err
	}
	return nil, apierrors.NewInvalid(schema.GroupKind{Group: infrav1.GroupVersion.Group, Kind: v.kind}, obj.GetName(), field.ErrorList{refused})
}

// byManager reports whether the request comes from the manager.
func (v *validator[T]) byManager(ctx context.Context) (bool, error) {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return false, fmt.Errorf("admission request: %w", err)
	}
	return req.UserInfo.Username == v.manager, nil
}

func (v *validator[T]) ValidateUpdate(ctx context.Context, old, obj T) (admission.Warnings, error) {
	refused := v.changed(old, obj)
	if refused == nil {
		return nil, nil
	}
	if manager, err := v.byManager(ctx); err != nil || manager {
		return nil, err
	}
	return nil, apierrors.NewInvalid(schema.GroupKind{Group: infrav1.GroupVersion.Group, Kind: v.kind}, obj.GetName(), field.ErrorList{refused})
}

// ValidateDelete allows every delete.
func (v *validator[T]) ValidateDelete(context.Context, T) (admission.Warnings, error) {
	return nil, nil
}
