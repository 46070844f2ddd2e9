package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/controller/terraformmachine"
	"github.com/captf/captf/internal/tfstate"
)

// The TerraformMachine kind under the same faults: a machine of a
// provisioned cluster applies once, is never rendered again, waits while
// its cluster's apply runs, and is destroyed from what it applied after
// its bootstrap data is gone. Cluster API's controllers do not run: the
// faults are the manager's, and the flow sets what they would (the
// Cluster's provisioned infrastructure, the Machine's owner reference and
// label), as test/scale does.
const (
	invClusterGate   = "no-machine-job-during-cluster-job"
	invAppliedOnce   = "machine-applied-once-from-durable-inputs"
	invDestroyed     = "machine-destroyed"
	invNothingLeft   = "nothing-left-of-a-deleted-object"
	invBootstrapData = "bootstrap-data-kept-secret"
)

func init() {
	invariants = append(invariants, invClusterGate, invAppliedOnce, invDestroyed, invNothingLeft, invBootstrapData)
	flows = append(flows, machineFlow)
}

const (
	// machineImage holds the controller tests' machine module: a
	// captftest file per machine, whose secret is the bootstrap data.
	machineImage = "example.test/machine:1"
	// exportsImage holds the controller tests' cluster module that
	// publishes its variable exports.
	exportsImage = "example.test/exports:1"
	// machineName is the run's Machine and TerraformMachine.
	machineName = "chaos-0"
	// bootstrapSecret holds the Machine's bootstrap data.
	bootstrapSecret = "chaos-bootstrap"
	// bootstrapCanary is the bootstrap data: it reaches the module and
	// nothing the manager writes or prints.
	bootstrapCanary = "CANARY-CHAOS-BOOTSTRAP-7c2e"
)

// machineSubject is the run's TerraformMachine.
var machineSubject = subject{terraformmachine.Kind, machineName}

var machineFlow = &flow{
	// A TerraformCluster applied and its Cluster provisioned; the faulted
	// part: the cluster's exports change, and while its apply runs the
	// machine is created; it applies once, publishing its provider ID; the
	// exports change again, which the machine never renders; its
	// bootstrap Secret goes, then the machine, which is destroyed from
	// its durable inputs.
	name:  "machine-lifecycle",
	setup: clusterProvisioned,
	act: func(r *run) error {
		at, err := r.setExports("zone-b")
		if err != nil {
			return err
		}
		if _, err := r.awaitJobOf(clusterSubject, infrav1.OperationApply, at); err != nil {
			return err
		}
		if err := r.createMachine(); err != nil {
			return err
		}
		if _, err := waitFor(r, machineSubject, "the machine applied, its provider ID published", provisioned); err != nil {
			return err
		}
		secret, err := os.ReadFile(filepath.Join(r.f.files, r.ns, "."+machineName+".txt.captftest-secret"))
		r.bootstrapReached = err == nil && string(secret) == bootstrapCanary
		if _, err := r.setExports("zone-c"); err != nil {
			return err
		}
		if _, err := r.wait("the cluster applied the new exports", func(tc *infrav1.TerraformCluster) bool {
			return ready(tc) && tc.Status.Exports != nil && bytes.Contains(tc.Status.Exports.Raw, []byte("zone-c"))
		}); err != nil {
			return err
		}
		// As Cluster API's Machine controller does when the Machine is
		// deleted, after the bootstrap provider removed its Secret.
		if err := r.f.env.Client.Delete(r.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: bootstrapSecret, Namespace: r.ns}}); err != nil {
			return err
		}
		tm := &infrav1.TerraformMachine{ObjectMeta: metav1.ObjectMeta{Name: machineName, Namespace: r.ns}}
		if err := r.f.env.Client.Delete(r.ctx, tm); err != nil {
			return err
		}
		_, err = waitFor(r, machineSubject, "the machine destroyed and released", gone[*infrav1.TerraformMachine])
		return err
	},
	phases:     map[infrav1.PlanPhase]int{},
	fresh:      true,
	of:         &machineSubject,
	clusterAPI: true,
	check:      func(r *run) []violation { return r.checkMachine() },
}

// clusterProvisioned makes the run's TerraformCluster, of the exports
// module under Automatic, and waits until it applied and published its
// exports; then its Cluster, provisioned, and the Machine with its
// bootstrap data, as Cluster API and a bootstrap provider would.
func clusterProvisioned(r *run) error {
	if err := r.create(infrav1.ApplyAutomatic, func(tc *infrav1.TerraformCluster) {
		tc.Spec.Image = exportsImage
		tc.Spec.Variables = []infrav1.Variable{{Name: "exports", Value: &apiextensionsv1.JSON{Raw: exportsOf("zone-a")}}}
	}); err != nil {
		return err
	}
	if _, err := r.wait("the cluster's first apply, its exports published", func(tc *infrav1.TerraformCluster) bool {
		c := condition(tc, infrav1.ConditionExportsPublished)
		return ready(tc) && c != nil && c.Status == metav1.ConditionTrue
	}); err != nil {
		return err
	}
	c := r.f.env.Client
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: objectName, Namespace: r.ns},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: clusterSubject.kind.Name(), Name: objectName,
		}},
	}
	if err := c.Create(r.ctx, cluster); err != nil {
		return err
	}
	cluster.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	if err := c.Status().Update(r.ctx, cluster); err != nil {
		return fmt.Errorf("Cluster status: %w", err)
	}
	if err := c.Create(r.ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: bootstrapSecret, Namespace: r.ns},
		Data:       map[string][]byte{"value": []byte(bootstrapCanary)},
	}); err != nil {
		return err
	}
	return c.Create(r.ctx, &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: machineName, Namespace: r.ns, Labels: map[string]string{clusterv1.ClusterNameLabel: objectName}},
		Spec: clusterv1.MachineSpec{
			ClusterName: objectName,
			Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To(bootstrapSecret)},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: machineSubject.kind.Name(), Name: machineName,
			},
		},
	})
}

func exportsOf(zone string) []byte { return []byte(fmt.Sprintf(`{"zone":%q}`, zone)) }

// setExports changes the cluster's exports and returns the write's
// resourceVersion.
func (r *run) setExports(zone string) (uint64, error) {
	return r.patch(fmt.Sprintf(`{"spec":{"variables":[{"name":"exports","value":%s}]}}`, exportsOf(zone)))
}

// createMachine makes the TerraformMachine the run's Machine
// controller-owns, of the machine module with its files in the run's
// directory, as Cluster API's MachineSet would. No drift check: the flow
// counts its Jobs.
func (r *run) createMachine() error {
	var m clusterv1.Machine
	if err := r.f.env.Client.Get(r.ctx, client.ObjectKey{Namespace: r.ns, Name: machineName}, &m); err != nil {
		return err
	}
	tm := &infrav1.TerraformMachine{
		ObjectMeta: metav1.ObjectMeta{
			Name: machineName, Namespace: r.ns, Labels: map[string]string{clusterv1.ClusterNameLabel: objectName},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: m.Name, UID: m.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: infrav1.TerraformMachineSpec{RunnerSpec: infrav1.RunnerSpec{
			Image:     machineImage,
			Variables: []infrav1.Variable{{Name: "dir", Value: &apiextensionsv1.JSON{Raw: []byte(strconv.Quote(r.ns))}}},
			Drift:     infrav1.DriftSpec{IntervalSeconds: ptr.To(int32(0))},
		}},
	}
	// The provider-ID webhook checks the create: Cluster API's MachineSet
	// tries again while the manager is down.
	if err := r.throughWebhook(func() error {
		c := tm.DeepCopy()
		err := r.f.env.Client.Create(r.ctx, c)
		tm = c
		return err
	}); err != nil {
		return err
	}
	r.machineCreated = rv(tm)
	return nil
}

// provisioned: the machine applied and published its provider ID, and
// nothing runs.
func provisioned(tm *infrav1.TerraformMachine) bool {
	return ready(tm) && tm.Spec.ProviderID != "" && tm.Status.Initialization != nil && ptr.Deref(tm.Status.Initialization.Provisioned, false)
}

// checkMachine: no Job of the machine was created while an apply or
// destroy Job of its cluster had not ended; it applied once, and every
// Job after that ran the inputs of that apply; a destroy succeeded after
// it and removed the module's files; nothing of the machine is left; the
// bootstrap data reached nothing but the module.
func (r *run) checkMachine() []violation {
	var out []violation
	add := func(inv, format string, args ...any) {
		out = append(out, violation{inv, fmt.Sprintf(format, args...)})
	}
	all, _, _ := r.obs.snapshot()
	machine, cluster := machineSubject.jobs(all), clusterSubject.jobs(all)
	gated := false
	for _, c := range cluster {
		if c.operation != string(infrav1.OperationApply) && c.operation != string(infrav1.OperationDestroy) {
			continue
		}
		ran := func(at uint64) bool { return c.created < at && (c.finished == 0 || c.finished > at) }
		gated = gated || ran(r.machineCreated)
		for _, m := range machine {
			if ran(m.created) {
				add(invClusterGate, "%s Job %s of the machine created while the cluster's %s Job %s ran", m.operation, m.name, c.operation, c.name)
			}
		}
	}
	if !gated {
		// Not a fault of the manager's, but the gate had nothing to stop.
		r.t.Log("no apply Job of the cluster ran when the machine was created")
	}

	var first *jobRecord
	for i, j := range machine {
		if j.operation == string(infrav1.OperationApply) && j.succeeded && (first == nil || j.finished < first.finished) {
			first = &machine[i]
		}
	}
	if first == nil {
		add(invAppliedOnce, "no apply Job of the machine succeeded")
	}
	destroyed := false
	for _, j := range machine {
		if first == nil || j.created < first.finished {
			continue
		}
		if j.operation == string(infrav1.OperationApply) {
			add(invAppliedOnce, "apply Job %s of the machine created after Job %s applied it", j.name, first.name)
		}
		if j.inputs != first.inputs {
			add(invAppliedOnce, "%s Job %s runs inputs %s, the machine's apply ran %s", j.operation, j.name, short(j.inputs), short(first.inputs))
		}
		destroyed = destroyed || (j.operation == string(infrav1.OperationDestroy) && j.succeeded)
	}
	if !destroyed {
		add(invDestroyed, "no destroy Job of the machine succeeded after its apply")
	}
	for _, f := range []string{machineName + ".txt", machineName + ".health"} {
		if _, err := os.Stat(filepath.Join(r.f.files, r.ns, f)); !os.IsNotExist(err) {
			add(invDestroyed, "%s, which the machine's apply made, is left (%v)", f, err)
		}
	}

	out = append(out, r.checkNothingLeft(machineSubject, all)...)
	if !r.bootstrapReached {
		add(invBootstrapData, "the bootstrap data did not reach the module: looking for it elsewhere proves nothing")
	}
	out = append(out, r.checkKeptSecret(invBootstrapData, bootstrapCanary)...)
	return out
}

// checkNothingLeft: of the deleted object s, whose Jobs are among all,
// none of the Secrets the manager deletes is left (its plan key, durable
// inputs and state, the per-run Secrets of its Jobs that are there), and
// what is left garbage collection takes, which envtest has not: its
// backups and Jobs, owned by it, none of them running.
func (r *run) checkNothingLeft(s subject, all []jobRecord) []violation {
	var out []violation
	add := func(format string, args ...any) {
		out = append(out, violation{invNothingLeft, fmt.Sprintf(format, args...)})
	}
	ownedByS := func(refs []metav1.OwnerReference) bool {
		for _, o := range refs {
			if o.Kind == s.kind.Name() && o.Name == s.name {
				return true
			}
		}
		return false
	}
	c := r.f.env.Client
	var jobs batchv1.JobList
	if err := c.List(r.ctx, &jobs, client.InNamespace(r.ns), client.MatchingLabels{infrav1.LabelOwnerKind: s.kind.Name(), infrav1.LabelOwnerName: engine.NameLabel(s.name)}); err != nil {
		return []violation{{invNothingLeft, fmt.Sprintf("list Jobs: %v", err)}}
	}
	perRun := map[string]string{}
	for _, j := range jobs.Items {
		if finished, _ := engine.JobFinished(&j); !finished {
			add("Job %s of the deleted %s has not finished", j.Name, s.kind.Name())
		}
		if !ownedByS(j.OwnerReferences) {
			add("Job %s of the deleted %s is not owned by it: garbage collection would leave it", j.Name, s.kind.Name())
		}
		perRun[engine.RunName(j.Name)], perRun[engine.CredentialsName(j.Name)] = j.Name, j.Name
	}
	var secrets corev1.SecretList
	if err := c.List(r.ctx, &secrets, client.InNamespace(r.ns)); err != nil {
		return append(out, violation{invNothingLeft, fmt.Sprintf("list Secrets: %v", err)})
	}
	suffix := engine.StateSuffix(s.kind.Short(), s.name)
	for _, sec := range secrets.Items {
		switch {
		case sec.Name == engine.PlanKeyName(s.kind.Short(), s.name) || sec.Name == engine.InputsName(s.kind.Short(), s.name):
			add("Secret %s of the deleted %s is left", sec.Name, s.kind.Name())
		case sec.Labels[tfstate.LabelState] == "true" && sec.Labels[tfstate.LabelSuffix] == suffix:
			add("state Secret %s of the deleted %s is left", sec.Name, s.kind.Name())
		case perRun[sec.Name] != "":
			add("per-run Secret %s of the finished Job %s is left", sec.Name, perRun[sec.Name])
		case sec.Labels[infrav1.LabelOwnerKind] == s.kind.Name() && sec.Labels[infrav1.LabelOwnerName] == engine.NameLabel(s.name) && !ownedByS(sec.OwnerReferences):
			add("Secret %s of the deleted %s is not owned by it: garbage collection would leave it", sec.Name, s.kind.Name())
		}
	}
	if len(s.jobs(all)) == 0 {
		add("the watch saw no Job of %s: there was nothing to leave", s.kind.Name())
	}
	return out
}

// checkKeptSecret: the sensitive value canary reached none of what the
// manager writes or prints: any version of the flow's subject the watch
// saw, the namespace's Events (of both APIs), the manager's log, the
// logs of the run's Jobs. A finding is inv's.
func (r *run) checkKeptSecret(inv, canary string) []violation {
	var out []violation
	add := func(format string, args ...any) {
		out = append(out, violation{inv, fmt.Sprintf(format, args...)})
	}
	versions := r.obs.seen()
	if len(versions) == 0 {
		add("the watch saw no version of the subject to look in")
	}
	for _, v := range versions {
		if bytes.Contains(v, []byte(canary)) {
			add("the sensitive value reached the %s (resourceVersion %s)", r.flow.subject().kind.Name(), versionOf(v))
			break
		}
	}
	var events eventsv1.EventList
	var coreEvents corev1.EventList
	for _, list := range []client.ObjectList{&events, &coreEvents} {
		if err := r.f.env.Client.List(r.ctx, list, client.InNamespace(r.ns)); err != nil {
			add("list Events: %v", err)
		} else if b, _ := json.Marshal(list); bytes.Contains(b, []byte(canary)) {
			add("the sensitive value reached an Event")
		}
	}
	if log := r.f.mgr.Log(r.t); len(log) == 0 {
		add("no manager log to look in")
	} else if bytes.Contains(log, []byte(canary)) {
		add("the sensitive value reached the manager's log")
	}
	logs, err := r.node.Logs()
	if err != nil || len(logs) == 0 {
		add("no Job log to look in (%v)", err)
	}
	for key, b := range logs {
		if bytes.Contains(b, []byte(canary)) {
			add("the sensitive value reached the log of %s", key)
		}
	}
	return out
}

// versionOf is the resourceVersion of an object as JSON.
func versionOf(b []byte) string {
	var m metav1.PartialObjectMetadata
	_ = json.Unmarshal(b, &m)
	return m.ResourceVersion
}
