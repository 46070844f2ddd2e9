// Package engine is the run engine every kind captf reconciles shares: it
// renders an object's inputs, runs runner Jobs one at a time, records
// their outcomes, and under applyPolicy Manual applies a change only after
// a person approved its plan hash (spec 001); it guards destructive plans,
// checks drift, backs up and restores state, and survives clusterctl move.
// It names no kind: a kind is a Kind adapter (kind.go) in a package of its
// own, such as internal/controller/terraformcluster.
//
// Its files are in layers, read from the bottom up, each referring only
// to its own layer and those below (layers_test.go keeps it so): the
// object, its kind, names, conditions, patches and events; Job mechanics
// (Secrets, inputs, runner Jobs, image, identity); state (the state and
// its history, backups, the lock, what was applied); decisions (starting a
// Job, outcomes and their steps, plans and approvals, the guard, drift,
// restore, pause); and the reconcile on top (controller.go, delete.go,
// move.go).
package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/render"
)

// SetupWithManager registers the reconciler: the kind's objects, the Jobs
// and TerraformPlans they own, the Jobs' pods, the ConfigMaps and Secrets they read
// variables from, and the identities they use with their Secrets and the
// labels of their namespaces. The manager's cache should be made with CacheOptions.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if err := IndexPlans(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("index TerraformPlans: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), r.kind().New(), IndexReads, readsIndex); err != nil {
		return fmt.Errorf("index of variable sources: %w", err)
	}
	if err := IndexIdentities(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("index TerraformClusterIdentities: %w", err)
	}
	if opts.RateLimiter == nil {
		opts.RateLimiter = errorRetries()
	}
	if err := r.fillSecrets(mgr); err != nil {
		return err
	}
	reader := client.Reader(mgr.GetClient())
	plansAwaiting.reader.Store(&reader)
	b := ctrl.NewControllerManagedBy(mgr).
		For(r.kind().New(), builder.WithPredicates(r.echoes())).
		Owns(&batchv1.Job{}, builder.WithPredicates(jobEnded, predicate.Funcs{DeleteFunc: func(e event.DeleteEvent) bool {
			// What was remembered of a Job goes with it.
			r.processed.Delete(e.Object.GetUID())
			return true
		}})).
		Owns(&infrav1.TerraformPlan{}, builder.WithPredicates(r.echoes())).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.sourcesOf("ConfigMap"))).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.secretUsers())).
		Watches(&infrav1.TerraformClusterIdentity{}, handler.EnqueueRequestsFromMapFunc(r.identityUsers)).
		// Only the labels of namespaces matter: their metadata is all the
		// cache holds of them.
		WatchesMetadata(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.namespaceUsers), builder.WithPredicates(labelsChanged)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.podOwner))
	b, err := r.kind().Watch(b, mgr)
	if err != nil {
		return fmt.Errorf("watches of %s: %w", r.kind().Name(), err)
	}
	return b.WithOptions(opts).Complete(r)
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=terraformplans,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=terraformplans/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets;configmaps,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=terraformclusteridentities,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch

// Reconcile brings one object a step closer to its spec. Its
// status is written where an outcome must be durable, and once at the end
// when it changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj, err := r.readObject(ctx, req.NamespacedName)
	if err != nil {
		if apierrors.IsNotFound(err) {
			// Gone: what was kept of its state goes too.
			r.states.Delete(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if externallyManaged(obj) {
		ctrl.LoggerFrom(ctx).V(1).Info("Externally managed, left alone", "mark", MarkManagedBy)
		return ctrl.Result{}, nil
	}
	if r.filteredOut(obj) {
		// Another manager's (its --watch-filter), or none's.
		return ctrl.Result{}, nil
	}
	s := newScope(obj)
	why, err := r.paused(ctx, obj)
	if err != nil {
		return ctrl.Result{}, err
	}
	if why != "" {
		return ctrl.Result{}, r.reconcilePaused(ctx, s, why)
	}
	var res ctrl.Result
	if obj.GetDeletionTimestamp().IsZero() {
		res, err = r.reconcileNormal(ctx, s)
		if err == nil {
			err = r.rebuildPlans(ctx, obj)
		}
		if err == nil {
			err = r.syncPlans(ctx, obj)
		}
		if err == nil {
			err = r.ownStateForMove(ctx, obj)
		}
	} else {
		res, err = r.reconcileDelete(ctx, s)
		if err == nil && !controllerutil.ContainsFinalizer(obj, Finalizer) {
			// Released: the object is going away; no status to write.
			return res, nil
		}
	}
	if err == nil {
		err = r.releaseMove(ctx, s)
	}
	// Set last: a patch of the object itself (the finalizer) reads its
	// status back from the API server.
	setCondition(obj, ConditionPaused, false, ReasonNotPaused, "Not paused.")
	if errors.Is(err, errAdopt) || errors.Is(err, errMigrated) {
		// A Job the cache has not shown yet, or a state it has not shown
		// under its new name: take it up in a moment.
		return ctrl.Result{RequeueAfter: time.Second}, r.patchStatus(ctx, s)
	}
	if locked, lerr := r.lockFailure(ctx, obj, err); locked {
		// A Lease is not watched: look again in a while.
		res, err = ctrl.Result{RequeueAfter: lockRecheck}, lerr
	}
	if w := (*errWait)(nil); errors.As(err, &w) {
		// A Job of related state runs; the kind's watches bring the
		// object back when it ended. A provisioned object stays Ready.
		if !IsProvisioned(obj) || !obj.GetDeletionTimestamp().IsZero() {
			setCondition(obj, infrav1.ConditionReady, false, w.Reason, w.Message)
		}
		res, err = ctrl.Result{RequeueAfter: r.recheck()}, nil
	}
	if reason, msg, ok := identityFailure(err); ok {
		// No Job runs. A change of the identity, of its Secret or of the
		// namespace's labels acts at once through their watches.
		setCondition(obj, infrav1.ConditionApplyJobSucceeded, false, reason, msg)
		res, err = ctrl.Result{RequeueAfter: r.recheck()}, nil
	}
	retry := false
	if apierrors.IsConflict(err) {
		// Another writer changed the object since it was read (Cluster
		// API adds its owner reference and labels to a machine it has
		// just made): not a fault, and tried again at once on what it
		// wrote, without a reconciler error in the log.
		ctrl.LoggerFrom(ctx).V(1).Info("Conflict, retrying", "error", err.Error())
		res, err, retry = ctrl.Result{RequeueAfter: ConflictRetry}, nil, true
	}
	if err == nil && !retry {
		obj.GetRunnerStatus().ObservedGeneration = obj.GetGeneration()
	}
	if perr := r.patchStatus(ctx, s); perr != nil {
		err = errors.Join(err, perr)
	}
	if res.RequeueAfter >= r.recheck() {
		// The periodic re-check yields to what events bring (an approval,
		// a finished Job): of thousands of objects, those whose re-check
		// is due never hold up the one someone waits for.
		res.Priority = ptr.To(handler.LowPriority)
	}
	return res, err
}

// reconcileNormal: the Jobs' outcomes, the inputs, then what is due.
func (r *Reconciler) reconcileNormal(ctx context.Context, s *scope) (ctrl.Result, error) {
	obj := s.obj
	if err := r.ensureFinalizer(ctx, obj); err != nil {
		return ctrl.Result{}, err
	}
	key, err := r.planKey(ctx, obj)
	if err != nil {
		return ctrl.Result{}, err
	}
	root, wait, inputsErr := r.inputs(ctx, obj, key)
	if inputsErr == nil && wait == nil {
		inputsErr = checkImage(obj.GetRunnerSpec().Image)
	}
	if inputsErr != nil && !errors.Is(inputsErr, errInputs) {
		return ctrl.Result{}, inputsErr
	}
	if inputsErr != nil {
		root = nil
	}
	// A finished Job's outcome is recorded before anything else: even
	// with inputs that no longer render, an applied plan is consumed.
	running, err := r.settleJobs(ctx, s, root, false)
	if err != nil {
		return ctrl.Result{}, err
	}
	if running != nil {
		if err := r.waitJob(ctx, obj, running, root); errors.Is(err, errPulling) {
			// Pods are not watched: look again in a while.
			return ctrl.Result{RequeueAfter: pullRecheck}, nil
		} else if err != nil || obj.GetRunnerStatus().ActiveJob != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.pruneJobs(ctx, obj); err != nil {
		return ctrl.Result{}, err
	}
	// A restore asked for runs first, whatever the inputs and the policy:
	// it changes no infrastructure, and a lost state waits for it.
	if serial, ok := restoreRequest(obj); ok {
		if started, err := r.startRestore(ctx, obj, serial); err != nil || started {
			return ctrl.Result{}, err
		}
	}
	if wait != nil {
		// The kind's own inputs cannot be had yet (a machine's owner,
		// cluster or bootstrap data): its watches bring the object back.
		// What a provisioned object runs stays Ready (a pool whose
		// MachinePool names new bootstrap data not there yet): its next
		// apply waits.
		if IsProvisioned(obj) {
			setCondition(obj, infrav1.ConditionApplyJobSucceeded, unknown, wait.Reason, wait.Message)
		} else {
			setCondition(obj, infrav1.ConditionReady, false, wait.Reason, wait.Message)
		}
		return ctrl.Result{RequeueAfter: r.recheck()}, nil
	}
	if inputsErr != nil {
		// The message names the variable and its source, never a value.
		// A fixed source brings the object back through the watches of
		// ConfigMaps and Secrets; a spec change through its own.
		setCondition(obj, infrav1.ConditionApplyJobSucceeded, false, ReasonInvalidInputs, inputsErr.Error())
		return ctrl.Result{RequeueAfter: r.recheck()}, nil
	}
	return r.reconcileDue(ctx, s, key, root)
}

// reconcileDue starts what is due: nothing, an apply, or under Manual a
// plan or the apply of an approved plan. key is the plan key, which
// rendered root.
func (r *Reconciler) reconcileDue(ctx context.Context, s *scope, key []byte, root *render.Root) (ctrl.Result, error) {
	obj := s.obj
	// A state under the suffix the object had before is moved first: read
	// as no state, it would plan to create everything again.
	if err := r.migrateState(ctx, obj); err != nil {
		return ctrl.Result{}, err
	}
	state, err := r.readState(ctx, r.Client, obj)
	if err != nil {
		return ctrl.Result{}, err
	}
	if state, err = r.settleState(ctx, obj, state); err != nil {
		return ctrl.Result{}, err
	}
	stateHash := state.InputsHash()
	if stateHash != "" {
		// A state that records an inputs hash was applied by captf: the
		// applied marker says so from now on, even if status is lost.
		if err := r.markApplied(ctx, obj); err != nil {
			return ctrl.Result{}, err
		}
	}
	// An apply is due when the state records other inputs (or none), or
	// when one is owed whatever the state records (owed).
	upToDate := stateHash == root.InputsHash
	if upToDate && !owed(obj) {
		// Nothing is due: a waiting plan is moot; a drift check may be.
		obj.GetRunnerStatus().Plan = nil
		if wait, err := r.unpublished(ctx, obj, state); err != nil || wait != nil {
			if wait != nil {
				setUnpublished(obj, wait)
			}
			return ctrl.Result{}, err
		}
		setProvisioned(obj)
		// An identity the object may no longer use says so now, not when
		// its next Job is due: the watches of identities, their Secrets
		// and namespaces' labels bring the object back.
		if err := r.checkIdentity(ctx, obj); err != nil {
			return ctrl.Result{}, err
		}
		return r.idleJobs(ctx, obj, state, func() (*appliedRun, error) { return r.appliedOrCurrent(ctx, obj, root) })
	}
	if upToDate && capRemediation(obj) {
		obj.GetRunnerStatus().Plan = nil
		return r.idleJobs(ctx, obj, state, func() (*appliedRun, error) { return r.appliedOrCurrent(ctx, obj, root) })
	}
	if !upToDate {
		liftRemediationStop(obj)
	}
	if failedRun(obj.GetRunnerStatus().LastRun) {
		if wait := r.backoff(obj); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
	}
	var fresh *freshState
	if !owed(obj) && (!state.readFromAPI() || stateHash == "") {
		// The cache may lag behind an apply that just finished: ask the
		// API server before starting anything. A state the manager read
		// from the API server itself, and the cache shows nothing newer
		// than (cachedState), needs no second read: the outcome of a
		// successful apply or restore reads the state it wrote (ownState),
		// and a failed or interrupted one makes an apply owed, which
		// skips this read anyway. No state, or one that records no inputs
		// hash, is read again: the history check (readHistory) takes from
		// that read whether it exists.
		if state, err = r.readState(ctx, r.Reader, obj); err != nil {
			return ctrl.Result{}, err
		}
		fresh = &freshState{state: state}
		if stateHash = state.InputsHash(); stateHash == root.InputsHash {
			return ctrl.Result{RequeueAfter: time.Second}, nil
		}
	}
	// A state that records an inputs hash was applied by captf: neither
	// lost nor a first apply. Otherwise the API server says which.
	var past history
	if stateHash == "" {
		if past, err = r.readHistory(ctx, obj, fresh); err != nil {
			return ctrl.Result{}, err
		}
		stop, err := r.guardLostState(ctx, obj, past)
		if err != nil {
			return ctrl.Result{}, err
		}
		if stop {
			return ctrl.Result{RequeueAfter: r.recheck()}, nil
		}
	}
	first := stateHash == "" && past.first() && !Interrupted(obj)
	// A change of the kind's held variable (a pool's exports) that
	// deletes or replaces waits as an ExportsChange plan, under either
	// policy (held.go).
	res, handled, exportsChange, err := r.reconcileHeld(ctx, obj, key, root, state)
	if err != nil || handled {
		return res, err
	}
	manual := obj.GetRunnerSpec().ApplyPolicy == infrav1.ApplyManual
	if manual && !first {
		// A change only of values the approval does not bind (a pool's
		// rotated bootstrap data) is applied without one, by a Job that
		// shows it is only that (runner --applied-inputs), under the
		// destructive-plan guard whatever allowDestructivePlans says.
		unapproved, err := r.unapprovedChangeOnly(ctx, obj, root, state)
		if err != nil {
			return ctrl.Result{}, err
		}
		if unapproved {
			obj.GetRunnerStatus().Plan = nil
			return ctrl.Result{}, r.startJob(ctx, obj, root, jobRequest{op: infrav1.OperationApply, guard: true, unapproved: root.Unapproved, lineage: state.lineage()})
		}
	}
	if !manual {
		guard := !first && !obj.GetRunnerSpec().AllowDestructivePlans
		if guard && (blocked(obj.GetRunnerStatus().LastRun) || WaitsDestructive(obj)) {
			// The guard stopped a plan that deletes or replaces: a plan
			// of it waits for approval, as under Manual.
			return r.reconcileManual(ctx, obj, root, state, exportsChange)
		}
		// Switching to Automatic applies what waited and clears the plan.
		obj.GetRunnerStatus().Plan = nil
		return ctrl.Result{}, r.startJob(ctx, obj, root, jobRequest{op: infrav1.OperationApply, guard: guard, lineage: state.lineage()})
	}
	if first {
		// The first apply of a new object is not gated: there is no state
		// yet to damage.
		obj.GetRunnerStatus().Plan = nil
		return ctrl.Result{}, r.startJob(ctx, obj, root, jobRequest{op: infrav1.OperationApply, lineage: state.lineage()})
	}
	return r.reconcileManual(ctx, obj, root, state, exportsChange)
}

// unapprovedChangeOnly reports whether root differs from what the last
// successful apply ran only in values the approval hash leaves out
// (render.Variable.Unapproved: a pool's bootstrap data, which rotates):
// the approval hash the state records, which only an apply writes, is
// root's. Then an apply Job that shows it applies only those values needs
// no new approval. Not while drift waits to be undone, which under Manual
// needs one; not once such a Job found more to apply, or the guard
// stopped it, nor while a plan of these inputs waits: then they wait for
// an approval, and are not tried again after every drift check. The
// durable inputs Secret must keep the files of that apply, for the Job to
// compare (it trusts them no more than that: it tests them against the
// state).
func (r *Reconciler) unapprovedChangeOnly(ctx context.Context, obj Object, root *render.Root, state *stateRead) (bool, error) {
	st := obj.GetRunnerStatus()
	stateHash := state.InputsHash()
	switch {
	case len(root.Unapproved) == 0, stateHash == "", stateHash == root.InputsHash, remediating(obj),
		refused(st.LastRun), st.Plan != nil && st.Plan.InputsHash == root.InputsHash,
		state.ApprovalHash() != root.ApprovalHash:
		return false, nil
	}
	applied, err := r.appliedInputs(ctx, r.Client, obj, stateHash)
	return applied != nil, err
}

// owed reports whether an apply is due even where the state records the
// current inputs hash, which an apply that did not finish may have
// written: while runs have failed since the last successful apply (only
// one clears the failures), after an apply that ended without a report
// (captf.io/interrupted-apply), while a plan the destructive-plan guard
// stopped is yet to be made or approved, and while drift found under
// action Remediate waits to be undone. (reconcileDue asks capRemediation
// first: the failures of a remediation that stopped make nothing due
// while the inputs are those it failed with.)
func owed(obj Object) bool {
	return obj.GetRunnerStatus().Failures > 0 || Interrupted(obj) || blocked(obj.GetRunnerStatus().LastRun) || WaitsDestructive(obj) || remediating(obj)
}

// failedRun reports whether the last run failed for a reason other than a
// moved plan (which counts toward no retry), a plan the destructive-plan
// guard stopped (which waits for approval instead) or a drift check (whose
// failure makes nothing due). A failed apply is due again;
// either kind waits out the backoff first, so a failing Job never loops.
func failedRun(run *infrav1.RunStatus) bool {
	return run != nil && !run.Succeeded && run.Operation != infrav1.OperationDrift && run.Operation != infrav1.OperationRestore && !blocked(run) &&
		(run.Error == nil || run.Error.Kind != infrav1.ErrorKindPlanChanged)
}
