package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
)

// The flows of the paths where the gate once trusted too little evidence
// (issue 23, section 6; the controller tests of evidence_test.go and
// applied_test.go): accepting an empty state keeps the Manual gate, a
// destroy runs the inputs of the last successful apply, a delete waits
// for an apply Job whose start was not recorded, and a switch to Manual
// drops an apply Job that never started. A copy moved mid-first-apply is
// not here: it needs a second API server and manager.
const (
	invAcceptedEmpty  = "accepted-empty-state-consumed"
	invDestroyApplied = "destroy-of-applied-inputs"
	invDeleteWaits    = "delete-waits-for-apply"
	invSwitchDrops    = "switch-drops-unstarted-apply"
)

func init() {
	invariants = append(invariants, invAcceptedEmpty, invDestroyApplied, invDeleteWaits, invSwitchDrops)
	flows = append(flows, evidenceFlows...)
}

// The provider-root module's roots, directories of the run's own.
const (
	appliedRoot = "applied"
	movedRoot   = "moved"
)

// inputsSecret is the durable inputs Secret of the run's object.
const inputsSecret = "captf-inputs-tfc-" + objectName

// laterImage is a reference the run's node cannot pull until the flow
// retags it.
const laterImage = "example.test/module:later"

var evidenceFlows = []*flow{
	{
		// A Manual object that applied loses its state and its durable
		// inputs (the applied marker with them); its next change stops at
		// StateLost. Accepting an empty state approves nothing: the apply
		// from it waits for an approved plan, as the backup says the
		// object has a past.
		name: "accept-empty-state",
		setup: func(r *run) error {
			if err := r.create(infrav1.ApplyManual); err != nil {
				return err
			}
			if _, err := r.wait("first apply backed up", func(tc *infrav1.TerraformCluster) bool { return ready(tc) && backedUpSerial(tc) >= 0 }); err != nil {
				return err
			}
			secrets, err := r.stateSecrets()
			if err != nil {
				return err
			}
			for i := range secrets {
				if err := r.f.env.Client.Delete(r.ctx, &secrets[i]); err != nil {
					return err
				}
			}
			if err := r.f.env.Client.Delete(r.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: inputsSecret}}); err != nil {
				return err
			}
			if err := r.setVars(map[string]string{"size": `"large"`}); err != nil {
				return err
			}
			_, err = r.wait("the lost state guarded", func(tc *infrav1.TerraformCluster) bool {
				c := condition(tc, infrav1.ConditionApplyJobSucceeded)
				return c != nil && c.Reason == engine.ReasonStateLost && tc.Status.ActiveJob == nil &&
					tc.Status.ObservedGeneration == tc.Generation
			})
			return err
		},
		act: func(r *run) error {
			at, err := r.patch(fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, infrav1.AnnotationAcceptEmptyState))
			if err != nil {
				return err
			}
			r.acceptedAt = at
			r.planned()
			tc, err := r.wait("the plan from the empty state awaits approval", waiting(infrav1.ReasonPlanAwaitingApproval, ""))
			if err != nil {
				return err
			}
			if err := r.approveAnnotation(tc.Status.Plan.PlanHash); err != nil {
				return err
			}
			// The annotation goes in the apply's outcome, before the status
			// records it: the check looks for it.
			_, err = r.wait("the approved apply from the empty state", applied)
			return err
		},
		phases:  map[infrav1.PlanPhase]int{infrav1.PlanApplied: 1},
		webhook: true,
		check:   func(r *run) []violation { return r.checkAccepted() },
	},
	{
		// Under Automatic, a change of the provider's root (as of a
		// region) replaces a resource: the guard stops it, after its start
		// rewrote the durable inputs. The object is deleted with that
		// change left blocked: the destroy must run what the last
		// successful apply ran, and so remove the file under the first
		// root.
		name: "destroy-applied-inputs",
		setup: func(r *run) error {
			if err := r.create(infrav1.ApplyAutomatic); err != nil {
				return err
			}
			if _, err := r.wait("first apply", ready); err != nil {
				return err
			}
			if _, err := os.Stat(filepath.Join(r.root(appliedRoot), "a.txt")); err != nil {
				return fmt.Errorf("the first apply made no a.txt under its root: %w", err)
			}
			if err := r.setRoot(movedRoot); err != nil {
				return err
			}
			_, err := r.wait("the guard stopped the new root", func(tc *infrav1.TerraformCluster) bool {
				return waiting(infrav1.ReasonPlanAwaitingApproval, "")(tc) && tc.Status.Plan.Reason == infrav1.ReasonDestructive
			})
			return err
		},
		act: deleted,
		// The blocked plan would go with the object by garbage collection.
		phases: map[infrav1.PlanPhase]int{infrav1.PlanPending: 1},
		rooted: true,
		check:  func(r *run) []violation { return r.checkDestroyedApplied() },
	},
	{
		// The object is deleted as soon as its first apply Job exists,
		// whether or not its start was recorded (a fault of the status
		// write, a kill, a cache that does not show the Job yet): the
		// destroy waits for the apply, then removes what it made.
		name:  "delete-unrecorded-apply",
		setup: func(*run) error { return nil },
		act: func(r *run) error {
			if err := r.create(infrav1.ApplyAutomatic); err != nil {
				return err
			}
			job, err := r.awaitJob(infrav1.OperationApply)
			if err != nil {
				return err
			}
			if job.finished != 0 {
				// Not a fault of the manager's, but the run did not test
				// what it should: the report says so.
				r.t.Logf("apply Job %s finished before the delete", job.name)
			}
			return deleted(r)
		},
		phases: map[infrav1.PlanPhase]int{},
		rooted: true,
		fresh:  true,
		check:  func(r *run) []violation { return r.checkDeleteWaited() },
	},
	{
		// A guarded apply under Automatic whose image cannot be pulled has
		// not started when the object switches to Manual: it is dropped,
		// and once the image can be pulled what runs is a plan that waits
		// for approval, never the old apply.
		name: "policy-switch-unstarted",
		setup: func(r *run) error {
			if err := r.create(infrav1.ApplyAutomatic); err != nil {
				return err
			}
			if _, err := r.wait("first apply", ready); err != nil {
				return err
			}
			// A change of a resource too: an empty plan needs no approval.
			p := fmt.Sprintf(`{"spec":{"image":%q,"variables":[{"name":"size","value":"large"},{"name":"token","valueFrom":{"secretKeyRef":{"name":%q,"key":%q}}}]}}`,
				laterImage, corev1SecretKey.Name, corev1SecretKey.Key)
			if _, err := r.patch(p); err != nil {
				return err
			}
			tc, err := r.wait("the guarded apply stuck on its image", func(tc *infrav1.TerraformCluster) bool {
				c := condition(tc, infrav1.ConditionApplyJobSucceeded)
				return c != nil && c.Reason == engine.ReasonImagePullFailed && tc.Status.ActiveJob != nil &&
					tc.Status.ActiveJob.Operation == infrav1.OperationApply
			})
			if err == nil {
				r.stuck = tc.Status.ActiveJob.Name
			}
			return err
		},
		act: func(r *run) error {
			if err := r.toManual(); err != nil {
				return err
			}
			// The image is pulled only once the stuck Job is gone: pulled
			// earlier, it would run what the manager may still drop. A Job
			// that is never dropped gets the image after the wait, and the
			// flow ends when its outcome is recorded: the check sees what
			// it did.
			kept := r.awaitGone(r.stuck)
			if kept != nil {
				r.t.Log(kept)
			}
			r.node.Retag(laterImage, r.f.images[moduleImage])
			r.planned()
			_, err := r.wait("the plan under Manual awaits approval", func(tc *infrav1.TerraformCluster) bool {
				if kept != nil && ready(tc) && tc.Status.LastRun.Job == r.stuck {
					return true
				}
				return waiting(infrav1.ReasonPlanAwaitingApproval, "")(tc)
			})
			return err
		},
		phases:  map[infrav1.PlanPhase]int{infrav1.PlanPending: 1},
		webhook: true,
		check:   func(r *run) []violation { return r.checkSwitchDropped() },
	},
}

// root is a directory of the run's own under the provider's root.
func (r *run) root(name string) string { return filepath.Join(r.f.files, r.ns, name) }

// setRoot points the provider-root module at the run's directory name.
func (r *run) setRoot(name string) error {
	if err := os.MkdirAll(r.root(name), 0o755); err != nil {
		return err
	}
	_, err := r.patch(fmt.Sprintf(`{"spec":{"variables":[{"name":"root","value":%s}]}}`, strconv.Quote(r.root(name))))
	return err
}

// awaitJob waits until the observer saw a Job of op of the flow's subject.
func (r *run) awaitJob(op infrav1.Operation) (jobRecord, error) {
	return r.awaitJobOf(r.flow.subject(), op, 0)
}

// awaitJobOf waits until the observer saw a Job of op of s created after
// the resourceVersion after.
func (r *run) awaitJobOf(s subject, op infrav1.Operation, after uint64) (jobRecord, error) {
	for deadline := time.Now().Add(converge); ; time.Sleep(50 * time.Millisecond) {
		r.keepManager()
		jobs, _, _ := r.obs.snapshot()
		for _, j := range s.jobs(jobs) {
			if j.operation == string(op) && j.created > after {
				return j, nil
			}
		}
		if time.Now().After(deadline) {
			return jobRecord{}, fmt.Errorf("no %s Job of %s %s within %s", op, s.kind.Name(), s.name, converge)
		}
	}
}

// awaitGone waits until the observer saw Job name deleted.
func (r *run) awaitGone(name string) error {
	for deadline := time.Now().Add(converge); ; time.Sleep(200 * time.Millisecond) {
		r.keepManager()
		jobs, _, _ := r.obs.snapshot()
		for _, j := range jobs {
			if j.name == name && j.dropped {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("Job %s still stands %s after the switch to Manual", name, converge)
		}
	}
}

// checkAccepted: the acceptance is consumed by one successful apply after
// it, of the plan approved after it; the state is back, and the
// annotation is gone, so that a later loss is guarded again.
func (r *run) checkAccepted() []violation {
	var out []violation
	add := func(format string, args ...any) {
		out = append(out, violation{invAcceptedEmpty, fmt.Sprintf(format, args...)})
	}
	jobs, _, _ := r.obs.snapshot()
	var applies []string
	for _, j := range jobs {
		if j.operation == string(infrav1.OperationApply) && j.created > r.acceptedAt && j.succeeded {
			applies = append(applies, j.name)
			if n := len(r.approvals); n == 0 || j.expect != r.approvals[n-1].hash {
				add("apply Job %s from the empty state did not apply the plan approved after the acceptance", j.name)
			}
		}
	}
	if len(applies) != 1 {
		add("%d apply Jobs succeeded after the acceptance, want 1: %v", len(applies), applies)
	}
	if secrets, err := r.stateSecrets(); err != nil || len(secrets) == 0 {
		add("no state after the apply from the empty state (%v)", err)
	}
	if tc, err := r.get(); err == nil && tc != nil {
		if _, ok := tc.Annotations[infrav1.AnnotationAcceptEmptyState]; ok {
			add("%s stays after the apply it allowed", infrav1.AnnotationAcceptEmptyState)
		}
	}
	return out
}

// checkDestroyedApplied: every destroy Job ran the inputs of the last
// successful apply, one succeeded, and the file that apply made under the
// first root is gone; nothing was ever made under the root the guard
// stopped.
func (r *run) checkDestroyedApplied() []violation {
	var out []violation
	add := func(format string, args ...any) {
		out = append(out, violation{invDestroyApplied, fmt.Sprintf(format, args...)})
	}
	jobs, _, _ := r.obs.snapshot()
	var applied string
	destroyed := false
	for _, j := range jobs {
		switch {
		case j.operation == string(infrav1.OperationApply) && j.succeeded:
			applied = j.inputs
		case j.operation == string(infrav1.OperationDestroy):
			if j.inputs != applied {
				add("destroy Job %s runs inputs %s, the last successful apply ran %s", j.name, short(j.inputs), short(applied))
			}
			destroyed = destroyed || j.succeeded
		}
	}
	if !destroyed {
		add("no destroy Job succeeded")
	}
	for _, f := range []string{filepath.Join(r.root(appliedRoot), "a.txt"), filepath.Join(r.root(movedRoot), "a.txt")} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			add("%s is left after the destroy (%v)", filepath.Join(filepath.Base(filepath.Dir(f)), "a.txt"), err)
		}
	}
	return out
}

// checkDeleteWaited: no destroy Job was created before every apply Job
// created before it had ended; after a successful apply a destroy
// succeeded, created after it ended; what the apply made is gone, and so
// is the state.
func (r *run) checkDeleteWaited() []violation {
	var out []violation
	add := func(format string, args ...any) {
		out = append(out, violation{invDeleteWaits, fmt.Sprintf(format, args...)})
	}
	jobs, _, _ := r.obs.snapshot()
	var lastApplied uint64
	destroyedAfter := false
	for _, d := range jobs {
		switch d.operation {
		case string(infrav1.OperationApply):
			if d.succeeded && d.finished > lastApplied {
				lastApplied = d.finished
			}
		case string(infrav1.OperationDestroy):
			for _, a := range jobs {
				if a.operation == string(infrav1.OperationApply) && a.created < d.created && (a.finished == 0 || a.finished > d.created) {
					add("destroy Job %s created while apply Job %s had not ended", d.name, a.name)
				}
			}
			destroyedAfter = destroyedAfter || (d.succeeded && d.created > lastApplied && lastApplied != 0)
		}
	}
	if lastApplied != 0 && !destroyedAfter {
		add("an apply succeeded and no destroy succeeded after it")
	}
	if _, err := os.Stat(filepath.Join(r.root(appliedRoot), "a.txt")); !os.IsNotExist(err) {
		add("a.txt, made by the apply, is left after the object is gone (%v)", err)
	}
	if secrets, err := r.stateSecrets(); err != nil || len(secrets) > 0 {
		add("%d state Secrets left after the object is gone (%v)", len(secrets), err)
	}
	return out
}

// checkSwitchDropped: the apply Job stuck on its image under Automatic was
// deleted before it ended; nothing was applied after the switch to
// Manual; the last run is the plan that waits.
func (r *run) checkSwitchDropped() []violation {
	var out []violation
	add := func(format string, args ...any) {
		out = append(out, violation{invSwitchDrops, fmt.Sprintf(format, args...)})
	}
	jobs, _, states := r.obs.snapshot()
	for _, j := range jobs {
		if j.name == r.stuck && (!j.dropped || j.succeeded) {
			add("apply Job %s, stuck under Automatic, was not dropped (succeeded: %v, finished: %v)", j.name, j.succeeded, j.finished != 0)
		}
		if j.operation == string(infrav1.OperationApply) && j.succeeded && j.finished > r.manualFrom {
			add("apply Job %s succeeded after the switch to Manual", j.name)
		}
	}
	for _, w := range states {
		if w.rv > r.manualFrom {
			add("the state changed after the switch to Manual")
			break
		}
	}
	tc, err := r.get()
	if err != nil || tc == nil {
		add("read the object: %v", err)
	} else if run := tc.Status.LastRun; run == nil {
		add("no last run")
	} else if run.Job == r.stuck || run.Operation != infrav1.OperationPlan {
		add("the last run is Job %s (%s), not the plan under Manual", run.Job, run.Operation)
	}
	return out
}
