package engine

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/render"
)

// What the last successful apply ran. The durable inputs Secret is
// rewritten whenever an apply starts, also one the destructive-plan guard
// stops, one whose plan moved and one that fails; destroy and drift checks
// must undo or check what was applied, never what an apply only tried. A
// state records the inputs hash it was applied with, and a run reads the
// Secret's files only when they hash to it. After a successful apply, the
// current files do. So the apply's start, before it writes new files,
// keeps the ones the state records under two more keys, with their image
// (pinned to the digest) and identity in two more annotations
// (keepApplied): a successful apply then writes nothing
// more to the Secret once it is marked and pinned.

// Keys of the durable inputs Secret that hold the files of the last
// successful apply.
const (
	KeyAppliedMain = "applied.main.tf.json"
	keyAppliedVars = "applied.terraform.tfvars.json"
)

// appliedRun is what the last successful apply ran.
type appliedRun struct {
	root *render.Root
	// image is the reference as written, pinned to the digest the apply
	// ran when it is known.
	image string
	// identity is spec.identityRef as the durable Secret records it
	// ("Kind/Name"), "" for none.
	identity string
}

// recordApplied records a successful apply on the durable inputs Secret,
// in one patch and only when it changes something: the applied marker and,
// with Pin (the apply changed something), the image digest it ran
// (pinDigest). What it ran needs no copy: its files are the Secret's
// current ones until the next apply's start keeps them (keepApplied).
type recordApplied struct {
	Digest string
	Pin    bool
}

func (s recordApplied) Apply(ctx context.Context, r *Reconciler, x *StepContext) error {
	var sec corev1.Secret
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: x.Obj.GetNamespace(), Name: InputsName(r.kind().Short(), x.Obj.GetName())}, &sec)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("durable inputs: %w", err)
	}
	before := sec.DeepCopy()
	if sec.Annotations == nil {
		sec.Annotations = map[string]string{}
	}
	sec.Annotations[infrav1.AnnotationApplied] = "true"
	if s.Pin {
		pinDigest(&sec, x.Job, s.Digest)
	}
	if equality.Semantic.DeepEqual(before.Annotations, sec.Annotations) {
		return nil
	}
	if err := r.Client.Patch(ctx, &sec, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("record the apply: %w", err)
	}
	return nil
}

// writeDurableInputs writes captf-inputs-tfc-<name> when an apply Job
// starts: the rendered files and the image and identity annotations. The
// applied marker and the pinned digest stay. The files it replaces move to
// the keys of what the last successful apply ran when the state records
// their inputs hash (keepApplied): no Job runs between the state read here
// and the new Job, so that is what the state was applied with.
func (r *Reconciler) writeDurableInputs(ctx context.Context, obj Object, root *render.Root) error {
	state, err := r.readState(ctx, r.Client, obj)
	if err != nil {
		return err
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: InputsName(r.kind().Short(), obj.GetName()), Namespace: obj.GetNamespace()}}
	_, err = controllerutil.CreateOrPatch(ctx, r.Client, s, func() error {
		s.Labels = OwnerLabels(r.kind(), obj)
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		if s.Data == nil {
			s.Data = map[string][]byte{}
		}
		keepApplied(s, state.InputsHash())
		if s.Annotations[infrav1.AnnotationImage] != obj.GetRunnerSpec().Image {
			// A new image reference clears the pinned digest (spec 004).
			delete(s.Annotations, infrav1.AnnotationImageDigest)
		}
		s.Annotations[infrav1.AnnotationImage] = obj.GetRunnerSpec().Image
		s.Annotations[infrav1.AnnotationIdentity] = identity(obj)
		s.Data["main.tf.json"], s.Data["terraform.tfvars.json"] = root.MainTF, root.Vars
		return controllerutil.SetOwnerReference(obj, s, r.Client.Scheme())
	})
	if err != nil {
		return fmt.Errorf("durable inputs: %w", err)
	}
	return nil
}

// keepApplied keeps, in sec (the durable inputs Secret) before an apply's
// start writes new files to it, the current files, image (pinned to its
// digest) and identity as what the last successful apply
// ran, when they hash to stateHash (the inputs hash the state records).
// Otherwise the kept ones stay: the current files were never applied
// (the guard stopped them, the plan moved, the apply failed before it
// wrote the state, or the Job never started).
func keepApplied(sec *corev1.Secret, stateHash string) {
	main := sec.Data["main.tf.json"]
	if h, err := render.RootInputsHash(main); stateHash == "" || err != nil || h != stateHash {
		return
	}
	sec.Data[KeyAppliedMain] = main
	sec.Data[keyAppliedVars] = sec.Data["terraform.tfvars.json"]
	sec.Annotations[infrav1.AnnotationAppliedImage] = Pin(sec.Annotations[infrav1.AnnotationImage], sec.Annotations[infrav1.AnnotationImageDigest])
	sec.Annotations[infrav1.AnnotationAppliedIdentity] = sec.Annotations[infrav1.AnnotationIdentity]
}

// appliedInputs is what the last successful apply ran, from the durable
// inputs Secret read through reader (the cache, or the API server before a
// decision that cannot wait for it), when its files hash to stateHash (the
// inputs hash the state records); nil when they do not, or there is no
// such Secret. A Secret written before the applied keys existed is read by
// its current files, which count only when they hash to the state's too.
func (r *Reconciler) appliedInputs(ctx context.Context, reader client.Reader, obj Object, stateHash string) (*appliedRun, error) {
	if stateHash == "" {
		return nil, nil
	}
	var s corev1.Secret
	err := reader.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: InputsName(r.kind().Short(), obj.GetName())}, &s)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("durable inputs: %w", err)
	}
	candidates := []appliedRun{
		{root: &render.Root{MainTF: s.Data[KeyAppliedMain], Vars: s.Data[keyAppliedVars]},
			image: s.Annotations[infrav1.AnnotationAppliedImage], identity: s.Annotations[infrav1.AnnotationAppliedIdentity]},
		{root: &render.Root{MainTF: s.Data["main.tf.json"], Vars: s.Data["terraform.tfvars.json"]},
			image:    Pin(s.Annotations[infrav1.AnnotationImage], s.Annotations[infrav1.AnnotationImageDigest]),
			identity: s.Annotations[infrav1.AnnotationIdentity]},
	}
	for _, c := range candidates {
		if h, err := render.RootInputsHash(c.root.MainTF); err == nil && h == stateHash && c.image != "" {
			c.root.InputsHash = stateHash
			return &c, nil
		}
	}
	return nil, nil
}

// appliedOrCurrent is what the last successful apply ran, for an object
// whose state records the inputs hash of root: the current inputs, image
// and identity when the durable Secret does not say (it was lost).
func (r *Reconciler) appliedOrCurrent(ctx context.Context, obj Object, root *render.Root) (*appliedRun, error) {
	run, err := r.appliedInputs(ctx, r.Client, obj, root.InputsHash)
	if err != nil || run != nil {
		return run, err
	}
	image, err := r.jobImage(ctx, obj, infrav1.OperationApply)
	if err != nil {
		return nil, err
	}
	return &appliedRun{root: root, image: image, identity: identity(obj)}, nil
}

// identityRef is the identity reference an appliedRun records.
func (a *appliedRun) identityRef() *infrav1.IdentityReference {
	return parseIdentity(a.identity)
}

// inputs are obj's inputs: for a kind that is never rendered again once
// applied (Kind.Frozen), what the apply its state records ran, from the
// durable inputs Secret; otherwise obj rendered, or what it waits for
// before it can be.
func (r *Reconciler) inputs(ctx context.Context, obj Object, key []byte) (*render.Root, *Wait, error) {
	if !r.kind().Frozen() {
		return r.render(ctx, obj, key)
	}
	state, err := r.readState(ctx, r.Client, obj)
	if err != nil {
		return nil, nil, err
	}
	hash := state.InputsHash()
	if hash == "" {
		return r.render(ctx, obj, key)
	}
	run, err := r.appliedInputs(ctx, r.Client, obj, hash)
	if err != nil {
		return nil, nil, err
	}
	if run == nil {
		return nil, nil, fmt.Errorf("%w: the terraform state was applied with inputs %q, and the durable inputs Secret %s holds none that hash to it; a %s is never rendered again once applied, so nothing runs (no apply, no drift check). Its destroy needs the annotation %s=true",
			errInputs, hash, InputsName(r.kind().Short(), obj.GetName()), r.kind().Name(), infrav1.AnnotationDestroyWithCurrentInputs)
	}
	return run.root, nil, nil
}

// render resolves the variables of obj and renders its root module, each
// variable the kind marks KeepApplied at the value the last successful
// apply ran (appliedValues); or says what obj waits for before its kind's
// own variables can be had.
func (r *Reconciler) render(ctx context.Context, obj Object, key []byte) (*render.Root, *Wait, error) {
	own, wait, err := r.kind().Inputs(ctx, r.Client, obj)
	if err != nil || wait != nil {
		return nil, wait, err
	}
	if err := r.appliedValues(ctx, obj, own); err != nil {
		return nil, nil, err
	}
	root, err := r.renderWith(ctx, obj, key, own)
	return root, nil, err
}

// appliedValues puts in each variable marked KeepApplied the value the
// last successful apply ran, when the durable inputs say what that was
// (appliedInputs); otherwise (a first apply, lost inputs) the value stays
// as the kind gave it. The value is hashed as any other: under Manual
// none reaches the module unapproved.
func (r *Reconciler) appliedValues(ctx context.Context, obj Object, vars map[string]render.Variable) error {
	var kept []string
	for n, v := range vars {
		if v.KeepApplied {
			kept = append(kept, n)
		}
	}
	if len(kept) == 0 {
		return nil
	}
	state, err := r.readState(ctx, r.Client, obj)
	if err != nil {
		return err
	}
	applied, err := r.appliedInputs(ctx, r.Client, obj, state.InputsHash())
	if err != nil || applied == nil {
		return err
	}
	for _, n := range kept {
		was, err := variable(applied.root.Vars, n)
		if err != nil {
			return err
		}
		if was != nil {
			v := vars[n]
			v.Value = was
			vars[n] = v
		}
	}
	return nil
}

// variable is the value of name in a rendered terraform.tfvars.json (whose
// values are canonical JSON, so equal values are equal bytes); nil when
// it has none.
func variable(vars []byte, name string) (json.RawMessage, error) {
	var all map[string]json.RawMessage
	if err := json.Unmarshal(vars, &all); err != nil {
		return nil, fmt.Errorf("rendered variables: %w", err)
	}
	return all[name], nil
}
