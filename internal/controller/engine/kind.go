package engine

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/captf/captf/internal/render"
	"github.com/captf/captf/internal/runner"
	"github.com/captf/captf/internal/tfstate"
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
	// NewList is an empty list of the kind's objects.
	NewList() client.ObjectList
	// IndexedLabels are the labels the kind's objects are listed by, one
	// value at a time (a machine's cluster name: a cluster's watches and
	// deletion list its machines by it). The manager's cache indexes them
	// (NewCache), so such a list reads those objects only.
	IndexedLabels() []string
	// ListReading lists the objects of the kind in namespace whose
	// variable sources the field index IndexReads has under key. The
	// objects are the cache's own: read only.
	ListReading(ctx context.Context, c client.Reader, namespace, key string) ([]Object, error)
	// CopyStatus makes dst's status, the kind's own fields too, a deep
	// copy of src's.
	CopyStatus(dst, src Object)
	// Applied writes into view's status what a successful apply reported
	// that the kind publishes there, and returns the steps that publish
	// the rest (a spec field of the contract).
	Applied(view Object, msg *runner.Message) []Step
	// FromState writes into obj's status what the kind publishes from the
	// root outputs of its state (read through output), each time the state
	// has a new serial, and returns the steps that publish the rest (a
	// spec field of the contract: a pool's providerIDList). The serial
	// counts as read only once the steps succeeded.
	FromState(obj Object, output func(name string) (tfstate.Output, error)) []Step
	// Refresh is how refresh Jobs of a provisioned obj run, refresh-only
	// applies of what was last applied (a pool's members change outside
	// any apply); a zero Interval: never. One is also due right after
	// every successful apply. It reads what it needs through c (the
	// manager's cache).
	Refresh(ctx context.Context, c client.Reader, obj Object) (RefreshSchedule, error)
	// Refreshed records in view's status that a refresh Job finished at
	// now.
	Refreshed(view Object, now metav1.Time)
	// Signs are the signs of a past apply the kind's object itself
	// carries (a published field an apply wrote).
	Signs(obj Object) []string
	// DeletionWaits says what obj's deletion waits for before anything is
	// destroyed or released (a cluster: its machines), as the reason and
	// message of Ready=False; nil when nothing.
	DeletionWaits(ctx context.Context, c client.Reader, obj Object) (*Wait, error)
	// Held is the name of the kind's own variable whose change, when its
	// plan deletes or replaces, waits as an ExportsChange plan that binds
	// the approval hash, while the object keeps applying with the value
	// the last apply ran (a pool: its cluster's exports); "" for none.
	Held() string
	// Frozen reports whether the kind's objects are never rendered again
	// once their state records an apply (a machine: spec 004): every run
	// after that, an apply retried too, runs the inputs the durable inputs
	// Secret saved.
	Frozen() bool
	// Plans reports whether a plan of the kind that waits for approval is
	// published as a TerraformPlan (spec 002: clusters and pools); when
	// not, only the approval annotations on the object approve it.
	Plans() bool
	// Inputs are the kind's own variables of obj's inputs (a machine's
	// captf_* variables), read each time obj is rendered; or what obj
	// waits for before they can be had (its owner, its cluster's
	// infrastructure, bootstrap data), as the reason and message of
	// Ready=False. A frozen object is not rendered once applied.
	Inputs(ctx context.Context, c client.Reader, obj Object) (map[string]render.Variable, *Wait, error)
	// Replace are the parts of obj whose resources its next run replaces
	// on request (a pool's members whose Machines were deleted), read
	// each time obj is rendered: bound by the inputs hash, so they plan
	// and wait for approval as any change. Basics has none.
	Replace(ctx context.Context, c client.Reader, obj Object) ([]render.Replacement, error)
	// Gate says what a Job of obj waits for before it starts, a destroy
	// too (a Job of related state that runs: a machine's cluster's apply);
	// nil when nothing. c is the cache; jobs are the Jobs of obj's
	// cluster (their captf.io/cluster label), of every kind, every one of
	// them: read from the API server a moment ago, or from the cache when
	// the manager's record says it has them all (clusterJobs).
	Gate(ctx context.Context, c client.Reader, obj Object, jobs []batchv1.Job) (*Wait, error)
	// Watch adds the kind's own watches to the engine's (the objects of
	// another API whose changes concern it), where mgr serves them, and
	// the indexes they use.
	Watch(b *builder.Builder, mgr ctrl.Manager) (*builder.Builder, error)
}

// Wait is what an object waits for: the reason and message of Ready=False.
type Wait struct {
	Reason, Message string
}

// IndexReads indexes the objects of a kind by the variable sources they read
// (readsIndex), so an event of a ConfigMap or Secret looks only at the
// objects that may read it, not at every object of its namespace: the
// manager's own Secrets change several times per run.
const IndexReads = "captf.io/reads"

// Basics is what every kind declares alike, from its Go type and list
// type: its names, a new object, the objects reading a source, a copy of
// a status. A kind embeds it (NewBasics) and declares the rest.
type Basics struct {
	name, short string
	object      Object
	list        client.ObjectList
	indexedBy   []string
}

// NewBasics is the Basics of the kind name with short name short, whose
// objects are of object's type and listed in list's (both empty). Every
// API type with a status subresource has a field Status; one without is
// a programming error, and NewBasics panics.
func NewBasics(name, short string, object Object, list client.ObjectList) Basics {
	if f, ok := reflect.TypeOf(object).Elem().FieldByName("Status"); !ok || f.Type.Kind() != reflect.Struct {
		panic(fmt.Sprintf("%T has no Status field", object))
	}
	return Basics{name: name, short: short, object: object, list: list}
}

// IndexedBy is b with the objects of the kind listed by the labels keys
// (Kind.IndexedLabels).
func (b Basics) IndexedBy(keys ...string) Basics {
	b.indexedBy = slices.Clone(keys)
	return b
}

func (b Basics) Name() string               { return b.name }
func (b Basics) Short() string              { return b.short }
func (b Basics) New() Object                { return b.object.DeepCopyObject().(Object) }
func (b Basics) NewList() client.ObjectList { return b.list.DeepCopyObject().(client.ObjectList) }
func (b Basics) IndexedLabels() []string    { return slices.Clone(b.indexedBy) }

func (b Basics) ListReading(ctx context.Context, c client.Reader, namespace, key string) ([]Object, error) {
	return ListReading(ctx, c, b.NewList(), namespace, key)
}

// Replace: nothing is replaced on request.
func (Basics) Replace(context.Context, client.Reader, Object) ([]render.Replacement, error) {
	return nil, nil
}

// CopyStatus sets dst's Status field to a deep copy of src's.
func (Basics) CopyStatus(dst, src Object) {
	status := reflect.ValueOf(src.DeepCopyObject()).Elem().FieldByName("Status")
	reflect.ValueOf(dst).Elem().FieldByName("Status").Set(status)
}

// ListReading lists into list (a kind's list type) the objects in
// namespace whose variable sources IndexReads has under key: a Kind's
// ListReading. The objects are the cache's own: read only.
func ListReading(ctx context.Context, c client.Reader, list client.ObjectList, namespace, key string) ([]Object, error) {
	if err := c.List(ctx, list, client.InNamespace(namespace), client.MatchingFields{IndexReads: key}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	objs := make([]Object, 0, len(items))
	for _, item := range items {
		obj, ok := item.(Object)
		if !ok {
			return nil, fmt.Errorf("%T is not an object the run engine reconciles", item)
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

// RefreshSchedule is how a kind's object is refreshed (Kind.Refresh).
type RefreshSchedule struct {
	// Interval is the time between two refreshes after an apply or a
	// change; 0: the object is never refreshed.
	Interval time.Duration
	// MaxInterval bounds the time between two refreshes while nothing
	// changes: it grows with how long nothing has (doubling each time).
	MaxInterval time.Duration
	// Last is when the last refresh finished; ChangedAt when the manager
	// last saw a change that a refresh reads.
	Last, ChangedAt *metav1.Time
	// Expecting: a change is under way (a pool whose MachinePool asks for
	// other replicas than it has), so the interval does not grow.
	Expecting bool
}
