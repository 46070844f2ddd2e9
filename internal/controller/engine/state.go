package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/render"
	"github.com/captf/captf/internal/tfstate"
)

// ReasonStateLost (ApplyJobSucceeded=False, and a Warning event): the
// object applied before, and its terraform state Secret is gone. Nothing
// runs: an apply would create everything a second time beside what
// exists.
const ReasonStateLost = "StateLost"

// history is what the API server says of obj's past, read right before a
// Job would start while the state records no inputs hash: its signs of a
// past (any one means the object may have applied before) and whether its
// state Secret exists. The check that stops an object (lost) and the one
// that exempts its first apply from the gate (first) read the same signs.
type history struct {
	// signs names each sign of a past found, for the messages: the applied
	// marker, a pinned image digest, a state backup, a set control plane
	// endpoint, a TerraformPlan of the object, a run cut short by a move.
	signs []string
	state bool
	// applied: the applied marker is set, which the manager sets only
	// once it read a state that records an inputs hash.
	applied bool
	// backup is the newest backed-up serial, -1 when there is none.
	backup int64
}

// past reports whether any sign says the object may have applied before.
func (h history) past() bool { return len(h.signs) > 0 }

// first reports whether an apply would be the object's first, which is not
// gated. It fails closed: only when there is no sign of a past and no
// state Secret at all. A state without captf's inputs hash, or a sign of
// a past without a state, needs an approval like any other change.
func (h history) first() bool { return !h.past() && !h.state }

// lost reports whether the object may have applied before and its state
// Secret is gone, or holds a state that records no inputs hash although
// the applied marker says one did: deleted and made again empty (a runner
// Job's terraform makes an empty state where it finds none), or replaced.
// history is read only for a state that records no inputs hash.
func (h history) lost() bool { return h.past() && (!h.state || h.applied) }

// readHistory reads obj's history from the API server itself. fresh is
// its state as just read from the API server, when it was (nil when it
// was not): then whether the state Secret exists costs no second read.
func (r *Reconciler) readHistory(ctx context.Context, obj Object, fresh *freshState) (history, error) {
	h := history{backup: -1}
	var s corev1.Secret
	err := r.Reader.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: InputsName(r.kind().Short(), obj.GetName())}, &s)
	switch {
	case err == nil:
		if s.Annotations[infrav1.AnnotationApplied] == "true" {
			h.signs = append(h.signs, "the applied marker on Secret "+s.Name)
			h.applied = true
		}
		if s.Annotations[infrav1.AnnotationImageDigest] != "" {
			h.signs = append(h.signs, "an image digest pinned on Secret "+s.Name)
		}
	case !apierrors.IsNotFound(err):
		return h, fmt.Errorf("durable inputs: %w", err)
	}
	if fresh != nil {
		h.state = fresh.state != nil
	} else {
		err = r.Reader.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: StateSecretName(r.kind().Short(), obj.GetName())}, &corev1.Secret{})
		switch {
		case err == nil:
			h.state = true
		case !apierrors.IsNotFound(err):
			return h, fmt.Errorf("state: %w", err)
		}
	}
	list, _, err := r.backups(ctx, r.Reader, obj)
	if err != nil {
		return h, err
	}
	if len(list) > 0 {
		h.backup = list[0].serial()
		h.signs = append(h.signs, "state backup "+list[0].first.Name)
	}
	h.signs = append(h.signs, r.kind().Signs(obj)...)
	if movedMidRun(obj) {
		h.signs = append(h.signs, "a runner Job cut short by clusterctl move (annotation "+infrav1.AnnotationMovedMidRun+" or "+AnnotationBlockMove+" set on another management cluster)")
	}
	var plans infrav1.TerraformPlanList
	if err := r.Reader.List(ctx, &plans, client.InNamespace(obj.GetNamespace()), client.MatchingLabels{infrav1.LabelClusterName: NameLabel(ClusterName(obj))}); err != nil {
		return h, fmt.Errorf("list TerraformPlans: %w", err)
	}
	for _, p := range plans.Items {
		if p.Spec.TargetRef.Kind == r.kind().Name() && p.Spec.TargetRef.Name == obj.GetName() {
			h.signs = append(h.signs, "TerraformPlan "+p.Name)
			break
		}
	}
	return h, nil
}

// guardLostState stops obj when its history says its state is lost and
// nobody accepted starting from an empty one: it says so in
// ApplyJobSucceeded and in one Warning event, and reports true.
func (r *Reconciler) guardLostState(ctx context.Context, obj Object, past history) (bool, error) {
	if !past.lost() || obj.GetAnnotations()[infrav1.AnnotationAcceptEmptyState] == "true" {
		return false, nil
	}
	restore := "Restore the state Secret"
	if past.backup >= 0 {
		restore = fmt.Sprintf("Restore a backup (annotate the object %s=%d for the newest; status.stateBackups lists them all)", infrav1.AnnotationRestoreState, past.backup)
	}
	gone := "is gone"
	if past.state {
		gone = "holds a state that records no inputs hash, so not the one captf applied (it was deleted and made again empty, or replaced)"
	}
	key, msg := "state-lost", fmt.Sprintf("The object applied before (%s) and its terraform state Secret %s %s; nothing runs, since an apply would create everything a second time. %s, or annotate the object %s=true to start again from an empty state (under applyPolicy Manual its apply still waits for an approval).",
		strings.Join(past.signs, ", "), StateSecretName(r.kind().Short(), obj.GetName()), gone, restore, infrav1.AnnotationAcceptEmptyState)
	if !obj.GetDeletionTimestamp().IsZero() {
		key, msg = "state-lost-delete", fmt.Sprintf("The object is deleted; it applied before (%s) and its terraform state Secret %s %s, so no destroy can find what it made. Nothing is destroyed and the object is kept. %s to destroy it, or annotate the object %s=true to release it without a destroy (what it made stays).",
			strings.Join(past.signs, ", "), StateSecretName(r.kind().Short(), obj.GetName()), gone, restore, infrav1.AnnotationAcceptEmptyState)
	}
	if c := condition(obj, infrav1.ConditionApplyJobSucceeded); c == nil || c.Reason != ReasonStateLost {
		stateLostTotal.WithLabelValues(r.kind().Name()).Inc()
	}
	setCondition(obj, infrav1.ConditionApplyJobSucceeded, false, ReasonStateLost, msg)
	obj.GetRunnerStatus().Plan = nil
	return true, r.announce(ctx, obj, announce{Key: key, Type: corev1.EventTypeWarning, Reason: ReasonStateLost, Action: "Guard", Note: msg})
}

// acceptedEmptyState removes captf.io/accept-empty-state after the apply
// it allowed succeeded, so that a later loss is guarded again, and the
// mark of a run cut short by a move, which the new state replaces as the
// sign of a past.
type acceptedEmptyState struct{}

func (acceptedEmptyState) Apply(ctx context.Context, r *Reconciler, x *StepContext) error {
	if err := r.removeAnnotation(ctx, x.Obj, infrav1.AnnotationAcceptEmptyState); err != nil {
		return err
	}
	return r.removeAnnotation(ctx, x.Obj, infrav1.AnnotationMovedMidRun)
}

// freshState is a state as read from the API server itself (readState
// through Reader), nil for none.
type freshState struct{ state *stateRead }

// stateRead is what the manager reads of a terraform state: its chunks as
// the backend stores them, its serial and lineage, and the inputs hash it
// records. No other value is decoded.
type stateRead struct {
	// chunks are nil for a state read through the cache: withChunks
	// reads them.
	chunks [][]byte
	tfstate.Meta
	inputsHash string
	// approvalHash is the approval hash the state records (its inputs
	// hash where the root leaves no value out of approvals).
	approvalHash string
	// outputs reads the root outputs of chunks (output), once they are
	// asked for.
	outputs func(name string) (tfstate.Output, error)
	// version names the content of the Secrets read: their names and the
	// digests of their data.
	version string
	// newest is the newest resourceVersion among the Secrets read.
	newest string
	// fromAPI: read from the API server by this manager and no older than
	// the cache's copy (cachedState), or read from it for its chunks a
	// moment ago (withChunks).
	fromAPI bool
}

// stateVersion is the version of the state in list: each Secret's name and
// the digest of its data, as digest says it, in name order.
func stateVersion(list []corev1.Secret, digest func(*corev1.Secret) string) string {
	parts := make([]string, 0, len(list))
	for i := range list {
		parts = append(parts, list[i].Name+"="+digest(&list[i]))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// cachedState is obj's state as the cache knows it: the cache holds the
// state Secrets' metadata and the digests of their data, not the data, so
// what was read of the same content before is used again, and a new
// content is read from the API server once. What is kept is the serial,
// the lineage and the inputs hash, never the chunks.
func (r *Reconciler) cachedState(ctx context.Context, f *secretFiller, obj Object) (*stateRead, error) {
	suffix := StateSuffix(r.kind().Short(), obj.GetName())
	var list corev1.SecretList
	if err := f.cached().List(ctx, &list, client.InNamespace(obj.GetNamespace()), client.MatchingLabels(tfstate.Selector(suffix))); err != nil {
		return nil, fmt.Errorf("state Secrets: %w", err)
	}
	key := client.ObjectKeyFromObject(obj)
	if len(list.Items) == 0 {
		r.states.Delete(key)
		return nil, nil
	}
	for _, s := range list.Items {
		if _, stripped := s.Annotations[annotationDataDigest]; !stripped {
			// A cache that holds the data (not the manager's): read it.
			return parseState(suffix, list.Items)
		}
	}
	version := stateVersion(list.Items, func(s *corev1.Secret) string { return s.Annotations[annotationDataDigest] })
	if v, ok := r.states.Load(key); ok {
		if known := v.(stateRead); known.version == version || behind(list.Items, known.newest) {
			known.fromAPI = true
			return &known, nil
		}
	}
	st, err := r.readState(ctx, r.Reader, obj)
	if err != nil || st == nil {
		return st, err
	}
	r.remember(obj, st)
	st.fromAPI = true
	return st, nil
}

// lineage is s's lineage; empty for nil.
func (s *stateRead) lineage() string {
	if s == nil {
		return ""
	}
	return s.Lineage
}

// readFromAPI reports whether s is a state cachedState took from a read of
// the API server, or withChunks read from it; false for nil.
func (s *stateRead) readFromAPI() bool { return s != nil && s.fromAPI }

// behind reports whether none of the cache's copies of a state's Secrets
// is newer than newest, the newest resourceVersion of a read of that
// state from the API server: a cache that shows other content then has
// not caught up with that read (it has not seen the apply's write that
// the outcome read a moment ago), so the read holds the state. A write
// after the read would be newer than it.
// resourceVersions of one resource compare as integers (the API server's
// comparable resource versions); one that does not parse is not behind.
func behind(cached []corev1.Secret, newest string) bool {
	for i := range cached {
		c, err := resourceversion.CompareResourceVersion(cached[i].ResourceVersion, newest)
		if err != nil || c > 0 {
			return false
		}
	}
	return len(cached) > 0
}

// remember keeps what was read of obj's state from the API server (its
// serial, lineage and inputs hash, never the chunks) for cachedState,
// which takes it while the cache shows the same content or an older one
// (behind).
func (r *Reconciler) remember(obj Object, st *stateRead) {
	kept := *st
	kept.chunks, kept.outputs = nil, nil
	r.states.Store(client.ObjectKeyFromObject(obj), kept)
}

// withChunks is st with its chunks, read from the API server when st was
// read through the cache; nil when the state is gone meanwhile.
func (r *Reconciler) withChunks(ctx context.Context, obj Object, st *stateRead) (*stateRead, error) {
	if st == nil || st.chunks != nil {
		return st, nil
	}
	fresh, err := r.readState(ctx, r.Reader, obj)
	if fresh != nil {
		fresh.fromAPI = true
	}
	return fresh, err
}

// output reads the root output name of the state: the first call reads
// every output in one pass (a kind reads several), later ones answer from
// that.
func (s *stateRead) output(name string) (tfstate.Output, error) {
	if s.outputs == nil {
		s.outputs = tfstate.OutputsOf(s.chunks)
	}
	return s.outputs(name)
}

// InputsHash is the inputs hash the state records, "" for no state.
func (s *stateRead) InputsHash() string {
	if s == nil {
		return ""
	}
	return s.inputsHash
}

// ApprovalHash is the approval hash the state records, "" for no state.
func (s *stateRead) ApprovalHash() string {
	if s == nil {
		return ""
	}
	return s.approvalHash
}

// readState reads obj's terraform state through reader (the cache, or the
// API server before acting): every Secret of its suffix, chunks included.
// It is nil when there is none. Through the manager's cache, which holds
// no state's data, it is what cachedState says.
func (r *Reconciler) readState(ctx context.Context, reader client.Reader, obj Object) (*stateRead, error) {
	if f, ok := reader.(*secretFiller); ok {
		return r.cachedState(ctx, f, obj)
	}
	suffix := StateSuffix(r.kind().Short(), obj.GetName())
	if st, ok, err := stateByName(ctx, reader, obj.GetNamespace(), suffix); ok || err != nil {
		return st, err
	}
	return stateByList(ctx, reader, obj.GetNamespace(), suffix)
}

// stateByList reads the state of suffix from every Secret that carries the
// backend's labels, as terraform reads it.
func stateByList(ctx context.Context, reader client.Reader, namespace, suffix string) (*stateRead, error) {
	var list corev1.SecretList
	if err := reader.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabels(tfstate.Selector(suffix))); err != nil {
		return nil, fmt.Errorf("state Secrets: %w", err)
	}
	return parseState(suffix, list.Items)
}

// stateByName reads the state of suffix by the name of its first Secret,
// when that Secret holds it all: a GET costs the API server one object,
// where a list by label (stateByList) reads every Secret of the namespace
// (among 20,000 Secrets 2 ms against 29 ms, BenchmarkStateRead; the list
// took over a second on the loaded API server of 5,000 objects). ok is
// false when the first Secret cannot say: it is not there (no state, or
// parts without it), it lacks the backend's labels (terraform, which lists
// by them, would not read it), or its chunk is full, so parts follow; then
// the state's Secrets are listed. terraform writes the first Secret before
// it deletes the parts a smaller state no longer needs: a first chunk
// shorter than tfstate.ChunkSize is the whole state.
func stateByName(ctx context.Context, reader client.Reader, namespace, suffix string) (st *stateRead, ok bool, err error) {
	first, err := wholeStateSecret(ctx, reader, namespace, suffix)
	if first == nil || err != nil {
		return nil, false, err
	}
	st, err = parseState(suffix, []corev1.Secret{*first})
	return st, true, err
}

// wholeStateSecret is the first Secret of the state of suffix, read by its
// name, when it holds the whole state (stateByName); nil when it cannot
// say so.
func wholeStateSecret(ctx context.Context, reader client.Reader, namespace, suffix string) (*corev1.Secret, error) {
	var first corev1.Secret
	err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: tfstate.SecretName(suffix)}, &first)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state Secret %s: %w", tfstate.SecretName(suffix), err)
	}
	if !labels.SelectorFromSet(tfstate.Selector(suffix)).Matches(labels.Set(first.Labels)) || len(first.Data[tfstate.DataKey]) >= tfstate.ChunkSize {
		return nil, nil
	}
	return &first, nil
}

// toState is what tfstate reads of the Secrets of a state.
func toState(secrets []corev1.Secret) []tfstate.Secret {
	out := make([]tfstate.Secret, 0, len(secrets))
	for _, s := range secrets {
		out = append(out, tfstate.Secret{Name: s.Name, Data: s.Data})
	}
	return out
}

// parseState reads the state of suffix from its Secrets.
func parseState(suffix string, list []corev1.Secret) (*stateRead, error) {
	for _, s := range list {
		if _, stripped := s.Annotations[annotationDataDigest]; stripped {
			// Never taken for no state: the cache holds no state's data.
			return nil, fmt.Errorf("state Secret %s was read from the cache, which holds no state's data", s.Name)
		}
	}
	chunks, err := tfstate.Chunks(suffix, toState(list))
	if errors.Is(err, tfstate.ErrNoState) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	st := &stateRead{chunks: chunks, version: stateVersion(list, func(s *corev1.Secret) string { return dataDigest(s.Data) })}
	for i := range list {
		if c, err := resourceversion.CompareResourceVersion(list[i].ResourceVersion, st.newest); st.newest == "" || (err == nil && c > 0) {
			st.newest = list[i].ResourceVersion
		}
	}
	state, err := tfstate.Open(chunks)
	if err == nil {
		st.Meta, err = tfstate.ReadMeta(state)
	}
	if err == nil {
		st.inputsHash, err = render.StateInputsHash(chunks...)
	}
	if err == nil {
		st.approvalHash, err = render.StateApprovalHash(chunks...)
	}
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	return st, nil
}

// ownState makes obj an owner of the Secrets that hold its state, after a
// successful apply, so that clusterctl move carries them with it. The
// backend writes the state again on every apply; this finds out whether
// it kept the reference each time.
type ownState struct{}

func (ownState) Apply(ctx context.Context, r *Reconciler, x *StepContext) error {
	if x.Paused {
		// Deferred until the pause is lifted (ownStateForMove): see
		// reconcilePaused.
		return nil
	}
	st, err := r.setStateOwner(ctx, x.Obj, true)
	if err != nil || st == nil {
		return err
	}
	// Read whole after the Job ended: the outcome's status write records
	// its serial (process takes it).
	r.owned.Store(client.ObjectKeyFromObject(x.Obj), st)
	return nil
}

// setStateOwner adds obj as an owner of its state Secrets (own), or takes
// it away (before the object is released under deletionPolicy Retain, so
// that garbage collection keeps the state). The reference is not the
// controller's and blocks no deletion: terraform's backend writes these
// Secrets, the manager only marks them. It returns the state it read
// (chunks included; nil when none could be parsed).
func (r *Reconciler) setStateOwner(ctx context.Context, obj Object, own bool) (*stateRead, error) {
	suffix := StateSuffix(r.kind().Short(), obj.GetName())
	var list corev1.SecretList
	// After an apply, a state that fits its first Secret is that Secret,
	// read by name (stateByName says why). Otherwise, and to take every
	// reference away, every Secret of the suffix is listed.
	var first *corev1.Secret
	if own {
		var err error
		if first, err = wholeStateSecret(ctx, r.Reader, obj.GetNamespace(), suffix); err != nil {
			return nil, err
		}
	}
	if first != nil {
		list.Items = []corev1.Secret{*first}
	} else if err := r.Reader.List(ctx, &list, client.InNamespace(obj.GetNamespace()), client.MatchingLabels{tfstate.LabelSuffix: suffix}); err != nil {
		return nil, fmt.Errorf("state Secrets: %w", err)
	}
	// The state the apply just wrote, its Secrets as cachedState lists
	// them: the reconcile that publishes its serial finds it read.
	sel := labels.SelectorFromSet(tfstate.Selector(suffix))
	var state []corev1.Secret
	for _, s := range list.Items {
		if sel.Matches(labels.Set(s.Labels)) {
			state = append(state, s)
		}
	}
	st, err := parseState(suffix, state)
	if err != nil {
		st = nil
	}
	if st != nil {
		r.remember(obj, st)
	}
	for i := range list.Items {
		s := &list.Items[i]
		at := slices.IndexFunc(s.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == obj.GetUID() })
		_, labelled := s.Labels[infrav1.LabelMove]
		if (at >= 0) == own && (!own || labelled) {
			continue
		}
		patch := client.MergeFrom(s.DeepCopy())
		if own {
			if at < 0 {
				s.OwnerReferences = append(s.OwnerReferences, metav1.OwnerReference{
					APIVersion: infrav1.GroupVersion.String(), Kind: r.kind().Name(), Name: obj.GetName(), UID: obj.GetUID(),
				})
			}
			// clusterctl move carries it with the object (move.go).
			s.Labels[infrav1.LabelMove] = ""
		} else {
			s.OwnerReferences = slices.Delete(s.OwnerReferences, at, at+1)
		}
		if err := r.Client.Patch(ctx, s, patch); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("owner of state Secret %s: %w", s.Name, err)
		}
	}
	return st, nil
}
