package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/controller/terraformcluster"
	"github.com/captf/captf/internal/faultproxy"
	"github.com/captf/captf/internal/testnode"
)

// objectName is the TerraformCluster of every run (one per namespace).
const objectName = "chaos"

// subject is an object of a run by its kind and name: the one a flow's
// invariants are about is the flow's subject.
type subject struct {
	kind engine.Kind
	name string
}

// clusterSubject is the run's TerraformCluster, every flow's subject but
// those that name another.
var clusterSubject = subject{terraformcluster.Kind, objectName}

// owns reports whether j is a Job of s (its owner labels).
func (s subject) owns(j jobRecord) bool {
	return j.ownerKind == s.kind.Name() && j.ownerName == engine.NameLabel(s.name)
}

// jobs are the Jobs of s among jobs.
func (s subject) jobs(jobs []jobRecord) []jobRecord {
	var out []jobRecord
	for _, j := range jobs {
		if s.owns(j) {
			out = append(out, j)
		}
	}
	return out
}

// converge is how long a step of a flow may take to reach its state.
const converge = 2 * time.Minute

// webhookWindow is how long the webhook stays unreachable in a
// webhook-down run.
const webhookWindow = 20 * time.Second

// run is one execution of a flow, clean or with one fault.
type run struct {
	t    *testing.T
	f    *fixture
	ctx  context.Context
	ns   string
	flow *flow
	obs  *observer
	// node runs the run's Jobs.
	node *testnode.Node

	// approvals are the approvals the test wrote, in order.
	approvals []approval
	// automaticFrom is the resourceVersion of the switch to Automatic: an
	// apply Job created after it needs no approval.
	automaticFrom uint64
	// manualFrom is the resourceVersion of a switch back to Manual: an
	// apply Job created after it needs an approval again.
	manualFrom uint64
	// serials are the state serials the flow saw backed up, oldest first.
	serials []int64
	// acceptedAt is the resourceVersion of captf.io/accept-empty-state.
	acceptedAt uint64
	// stuck is the apply Job that waits for an image it cannot pull.
	stuck string
	// stateAtAct is the state when the faulted part began.
	stateAtAct [32]byte
	// planJobsWhileDown counts plan Jobs created while the webhook was
	// unreachable (webhook-down runs).
	webhookDown       bool
	planJobsWhileDown int
	// machineCreated is the resourceVersion of the TerraformMachine's
	// creation (machine-lifecycle).
	machineCreated uint64
	// bootstrapReached: the bootstrap data reached the machine module.
	bootstrapReached bool
	// exportsChanged is the resourceVersion of the cluster's exports
	// change the pool's ExportsChange plan is about (pool-exports-change).
	exportsChanged uint64
	// driftUndoneUnapproved: the drifted member was undone before any
	// approval (pool-bootstrap-rotation).
	driftUndoneUnapproved bool
	// replacedUnapproved: the member's resource was replaced before any
	// approval (pool-member-replace).
	replacedUnapproved bool
}

type approval struct {
	hash string
	// inputs is the approved TerraformPlan's spec.inputsHash (an
	// ExportsChange plan's approval hash); empty for an annotation.
	inputs string
	// plan is the TerraformPlan approved through spec.approved; empty for
	// an approval by annotation.
	plan string
	rv   uint64
}

// object reads the run's object s; nil once it is gone.
func (r *run) object(s subject) (engine.Object, error) {
	obj := s.kind.New()
	err := r.f.env.Client.Get(r.ctx, client.ObjectKey{Namespace: r.ns, Name: s.name}, obj)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return obj, nil
}

// get reads the run's TerraformCluster; nil once it is gone.
func (r *run) get() (*infrav1.TerraformCluster, error) {
	obj, err := r.object(clusterSubject)
	tc, _ := obj.(*infrav1.TerraformCluster)
	return tc, err
}

// wait polls the run's TerraformCluster until cond holds (waitFor).
func (r *run) wait(what string, cond func(*infrav1.TerraformCluster) bool) (*infrav1.TerraformCluster, error) {
	return waitFor(r, clusterSubject, what, cond)
}

// waitFor polls the run's object s, of type T, until cond holds (cond
// gets a nil T while it is gone), restarting the manager when a fault
// killed it. A flow that does not reach the state is a finding (the
// invariant "converges"), returned as an error.
func waitFor[T engine.Object](r *run, s subject, what string, cond func(T) bool) (T, error) {
	deadline := time.Now().Add(converge)
	var zero T
	for {
		r.keepManager()
		obj, err := r.object(s)
		if err != nil {
			return zero, fmt.Errorf("%s: %w", what, err)
		}
		got, _ := obj.(T)
		if cond(got) {
			return got, nil
		}
		if time.Now().After(deadline) {
			return zero, fmt.Errorf("%s: not within %s; status: %s", what, converge, describe(obj))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// keepManager restarts the manager after a kill, as its Deployment would.
func (r *run) keepManager() {
	if !r.f.mgr.Running() {
		r.f.mgr.Restart(r.t)
	}
}

// describe is an object's status in words and hashes, never a value.
func describe(obj engine.Object) string {
	if absent(obj) {
		return "gone"
	}
	st := obj.GetRunnerStatus()
	var b strings.Builder
	for _, c := range st.Conditions {
		fmt.Fprintf(&b, "%s=%s/%s ", c.Type, c.Status, c.Reason)
	}
	if st.ActiveJob != nil {
		fmt.Fprintf(&b, "activeJob=%s(%s) ", st.ActiveJob.Name, st.ActiveJob.Operation)
	}
	if st.Plan != nil {
		fmt.Fprintf(&b, "plan=%s ", short(st.Plan.PlanHash))
	}
	if st.PendingPlanRef != nil {
		fmt.Fprintf(&b, "pendingPlanRef=%s ", st.PendingPlanRef.Name)
	}
	if h := obj.GetAnnotations()[infrav1.AnnotationApprovePlan]; h != "" {
		fmt.Fprintf(&b, "approve-plan=%s ", short(h))
	}
	if h := obj.GetAnnotations()[infrav1.AnnotationApproveDestructivePlan]; h != "" {
		fmt.Fprintf(&b, "approve-destructive-plan=%s ", short(h))
	}
	fmt.Fprintf(&b, "failures=%d generation=%d observed=%d", st.Failures, obj.GetGeneration(), st.ObservedGeneration)
	return b.String()
}

// absent: obj is gone (no object, or a nil one of its type).
func absent(obj engine.Object) bool {
	return obj == nil || reflect.ValueOf(obj).IsNil()
}

// short is the start of a p2: hash, enough to tell plans apart in a report.
func short(hash string) string {
	if len(hash) > 15 {
		return hash[:15] + "…"
	}
	return hash
}

func condition(obj engine.Object, typ string) *metav1.Condition {
	return meta.FindStatusCondition(obj.GetRunnerStatus().Conditions, typ)
}

// ready: applied, nothing running, the latest spec seen.
func ready[T engine.Object](obj T) bool {
	if absent(obj) {
		return false
	}
	st := obj.GetRunnerStatus()
	c := condition(obj, infrav1.ConditionReady)
	return c != nil && c.Status == metav1.ConditionTrue && st.ActiveJob == nil &&
		st.ObservedGeneration == obj.GetGeneration() && st.LastRun != nil && st.LastRun.Succeeded
}

// applied: ready, no plan waiting, the approval consumed.
func applied(tc *infrav1.TerraformCluster) bool {
	return ready(tc) && tc.Status.Plan == nil && tc.Status.PendingPlanRef == nil && tc.Annotations[infrav1.AnnotationApprovePlan] == "" &&
		tc.Annotations[infrav1.AnnotationApproveDestructivePlan] == ""
}

// waiting is a plan recorded (status and TerraformPlan) that waits with
// reason, for another hash than not.
func waiting(reason, not string) func(*infrav1.TerraformCluster) bool {
	return func(tc *infrav1.TerraformCluster) bool {
		if tc == nil || tc.Status.Plan == nil || tc.Status.ActiveJob != nil || tc.Status.PendingPlanRef == nil || tc.Status.Plan.PlanHash == not {
			return false
		}
		c := condition(tc, infrav1.ConditionApplyJobSucceeded)
		return c != nil && c.Reason == reason
	}
}

func gone[T engine.Object](obj T) bool { return absent(obj) }

// create makes the run's object under policy: of the runner's module
// with size small, of the drift module with its files in the run's own
// directory, or of the provider-root module with its root in the run's
// directory appliedRoot. Under Automatic no apply needs an approval (but the
// guard's: invariants_test.go).
func (r *run) create(policy infrav1.ApplyPolicy, mutate ...func(*infrav1.TerraformCluster)) error {
	tc := &infrav1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Name: objectName, Namespace: r.ns},
		Spec: infrav1.TerraformClusterSpec{RunnerSpec: infrav1.RunnerSpec{
			Image: moduleImage, ApplyPolicy: policy,
			Variables: []infrav1.Variable{
				{Name: "size", Value: &apiextensionsv1.JSON{Raw: []byte(`"small"`)}},
				{Name: "token", ValueFrom: &infrav1.VariableSource{SecretKeyRef: &corev1SecretKey}},
			},
		}},
	}
	if r.flow.drift {
		tc.Spec.Image = driftImage
		tc.Spec.Variables = []infrav1.Variable{
			{Name: "dir", Value: &apiextensionsv1.JSON{Raw: []byte(strconv.Quote(r.ns))}},
			{Name: "content", Value: &apiextensionsv1.JSON{Raw: []byte(`"one"`)}},
		}
	}
	if r.flow.rooted {
		if err := os.MkdirAll(r.root(appliedRoot), 0o755); err != nil {
			return err
		}
		tc.Spec.Image = rootedImage
		tc.Spec.Variables = []infrav1.Variable{{Name: "root", Value: &apiextensionsv1.JSON{Raw: []byte(strconv.Quote(r.root(appliedRoot)))}}}
		// No drift check: the flows count the Jobs of applies and destroys.
		tc.Spec.Drift = infrav1.DriftSpec{IntervalSeconds: ptr.To(int32(0))}
	}
	for _, m := range mutate {
		m(tc)
	}
	if err := r.f.env.Client.Create(r.ctx, tc); err != nil {
		return err
	}
	if policy == infrav1.ApplyAutomatic {
		r.automaticFrom = rv(tc)
	}
	return nil
}

// patch merge-patches the object as a user would (no resourceVersion, so
// the user's own write never conflicts) and returns its resourceVersion.
func (r *run) patch(p string) (uint64, error) {
	tc := &infrav1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Name: objectName, Namespace: r.ns}}
	if err := r.f.env.Client.Patch(r.ctx, tc, client.RawPatch(types.MergePatchType, []byte(p))); err != nil {
		return 0, err
	}
	return rv(tc), nil
}

// setVars replaces the inline variables, keeping the module's fixed ones
// (the token's reference; the drift module's directory, and its content
// unless given): of the runner's module size, moving and label, of the
// drift module content, mode and extra.
func (r *run) setVars(vars map[string]string) error {
	type variable struct {
		Name      string          `json:"name"`
		Value     json.RawMessage `json:"value,omitempty"`
		ValueFrom any             `json:"valueFrom,omitempty"`
	}
	list := []variable{{Name: "token", ValueFrom: infrav1.VariableSource{SecretKeyRef: &corev1SecretKey}}}
	names := []string{"size", "moving", "label"}
	if r.flow.drift {
		list = []variable{{Name: "dir", Value: json.RawMessage(strconv.Quote(r.ns))}}
		names = []string{"content", "mode", "extra"}
		if _, ok := vars["content"]; !ok {
			list = append(list, variable{Name: "content", Value: json.RawMessage(`"one"`)})
		}
	}
	for _, name := range names {
		if v, ok := vars[name]; ok {
			list = append(list, variable{Name: name, Value: json.RawMessage(v)})
		}
	}
	b, err := json.Marshal(map[string]any{"spec": map[string]any{"variables": list}})
	if err != nil {
		return err
	}
	_, err = r.patch(string(b))
	return err
}

// approveAnnotation sets captf.io/approve-plan to hash. The approval is
// recorded before it is written: an apply Job may appear before the write
// returns.
func (r *run) approveAnnotation(hash string) error {
	return r.approveWith(infrav1.AnnotationApprovePlan, hash)
}

// approveWith approves hash with the annotation key: captf.io/approve-plan
// or, for a plan the guard stopped, captf.io/approve-destructive-plan.
func (r *run) approveWith(key, hash string) error {
	tc, err := r.get()
	if err != nil || tc == nil {
		return fmt.Errorf("approve: %v", err)
	}
	r.approvals = append(r.approvals, approval{hash: hash, rv: rv(tc)})
	_, err = r.patch(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, hash))
	return err
}

// approvePlan approves the live TerraformPlan through spec.approved, as
// the approver (approvedBy must be the requester), through the webhook.
func (r *run) approvePlan(obj engine.Object) error {
	return r.throughWebhook(func() error {
		var plan infrav1.TerraformPlan
		if err := r.f.env.Client.Get(r.ctx, client.ObjectKey{Namespace: r.ns, Name: obj.GetRunnerStatus().PendingPlanRef.Name}, &plan); err != nil {
			return fmt.Errorf("the live plan: %w", err)
		}
		a := approval{hash: plan.Spec.PlanHash, inputs: plan.Spec.InputsHash, plan: plan.Name, rv: rv(&plan)}
		p := fmt.Sprintf(`{"spec":{"approved":true,"approvedBy":%q}}`, approverUser)
		err := r.f.approver.Patch(r.ctx, &plan, client.RawPatch(types.MergePatchType, []byte(p)))
		if err == nil {
			r.approvals = append(r.approvals, a)
		}
		return err
	})
}

// throughWebhook makes a write that the manager's webhook checks: while a
// fault killed the manager it is refused, and the person or controller
// that makes it tries again, until the manager is back.
func (r *run) throughWebhook(write func() error) error {
	deadline := time.Now().Add(converge)
	for {
		err := write()
		if err == nil || !strings.Contains(err.Error(), "failed calling webhook") || time.Now().After(deadline) {
			return err
		}
		r.keepManager()
		time.Sleep(500 * time.Millisecond)
	}
}

// toAutomatic switches the policy and records when.
func (r *run) toAutomatic() error {
	at, err := r.patch(`{"spec":{"applyPolicy":"Automatic"}}`)
	r.automaticFrom = at
	return err
}

// toManual switches the policy back and records when.
func (r *run) toManual() error {
	at, err := r.patch(`{"spec":{"applyPolicy":"Manual"}}`)
	r.manualFrom = at
	return err
}

// planned is called right after a change that makes the manager plan:
// in a webhook-down run the webhook stays unreachable for a while, and
// the plan Jobs created meanwhile are counted.
func (r *run) planned() {
	if !r.webhookDown {
		return
	}
	r.f.gate.Shut()
	defer r.f.gate.Open()
	before := r.planJobs()
	deadline := time.Now().Add(webhookWindow)
	for time.Now().Before(deadline) {
		r.keepManager()
		time.Sleep(200 * time.Millisecond)
	}
	r.planJobsWhileDown = r.planJobs() - before
}

func (r *run) planJobs() int {
	jobs, _, _ := r.obs.snapshot()
	n := 0
	for _, j := range jobs {
		if j.operation == string(infrav1.OperationPlan) {
			n++
		}
	}
	return n
}

// release makes the manager forget the run's objects, its subject and
// its TerraformCluster: deleted, their finalizers removed (the node is
// gone, so no destroy would ever run).
func (r *run) release() error {
	objects := []subject{clusterSubject}
	if s := r.flow.subject(); s.kind.Name() != clusterSubject.kind.Name() || s.name != clusterSubject.name {
		objects = append([]subject{s}, objects...)
	}
	var errs []error
	for _, s := range objects {
		if err := r.releaseObject(s); err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", s.kind.Name(), s.name, err))
		}
	}
	return errors.Join(errs...)
}

func (r *run) releaseObject(s subject) error {
	obj := s.kind.New()
	obj.SetNamespace(r.ns)
	obj.SetName(s.name)
	if err := r.f.env.Client.Delete(r.ctx, obj); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := r.f.env.Client.Patch(r.ctx, obj, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil {
			got, err := r.object(s)
			if err == nil && got == nil {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return errors.Join(errors.New("the object was not released"), err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// rule is the proxy rule of a fault at a point of this run's namespace.
func (r *run) rule(fault string, p point) faultproxy.Rule {
	verb, resource, _ := strings.Cut(p.key, " ")
	rule := faultproxy.Rule{Verb: verb, Resource: resource, Namespace: r.ns, Nth: p.k, Fault: faultproxy.Fault(fault)}
	if fault == faultKill {
		rule.Fault = faultproxy.Pass
		rule.After = r.f.mgr.Kill
	}
	return rule
}
