package terraformcluster

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/render"
)

// The TerraformMachinePool kind on the run engine, with Cluster API's own
// Cluster and MachinePool controllers, the test node, the real runner and
// terraform with the test provider.

// poolImage holds testdata/pool.
const poolImage = "example.test/pool:1"

// capiMachinePool creates a Cluster API MachinePool of cluster with
// replicas, whose infrastructure is the TerraformMachinePool name and
// whose bootstrap data is the Secret bootstrap.
func (h *driftHarness) capiMachinePool(name, cluster, bootstrap string, replicas int32) *clusterv1.MachinePool {
	h.t.Helper()
	mp := &clusterv1.MachinePool{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{clusterv1.ClusterNameLabel: cluster}},
		Spec: clusterv1.MachinePoolSpec{
			ClusterName:    cluster,
			Replicas:       ptr.To(replicas),
			FailureDomains: []string{"zone-a", "zone-b"},
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"node-role.kubernetes.io/pool": ""}},
				Spec: clusterv1.MachineSpec{
					ClusterName:       cluster,
					Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To(bootstrap)},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "TerraformMachinePool", Name: name},
					Taints:            []clusterv1.MachineTaint{{Key: "dedicated", Value: "pool", Effect: corev1.TaintEffectNoSchedule, Propagation: clusterv1.MachineTaintPropagationAlways}},
				},
			},
		},
	}
	if err := h.c.Create(context.Background(), mp); err != nil {
		h.t.Fatal(err)
	}
	return mp
}

// bootstrapFor is a bootstrap data Secret of mp's as a bootstrap provider
// makes it (capi.BootstrapProvided): labelled with the cluster's name and
// controller-owned (here by mp itself), so that new data rotates without
// a new approval.
func bootstrapFor(mp *clusterv1.MachinePool, name, value string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: mp.Namespace,
			Labels:          map[string]string{clusterv1.ClusterNameLabel: mp.Spec.ClusterName},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachinePool", Name: mp.Name, UID: mp.UID, Controller: ptr.To(true)}}},
		Data: map[string][]byte{"value": []byte(value)},
	}
}

// startPool makes the Cluster cluster (its workload cluster reachable),
// its TerraformCluster of the exports module in zone-a, a MachinePool
// <cluster>-pool of replicas with its bootstrap data (the canary), and the
// TerraformMachinePool it controller-owns, of the pool module writing
// under the directory <cluster>, drift checks off; spec changes its
// runner spec before it is created.
func (h *driftHarness) startPool(cluster string, replicas int32, spec func(*infrav1.TerraformMachinePoolSpec)) (*clusterv1.MachinePool, *infrav1.TerraformMachinePool) {
	h.t.Helper()
	ctx := context.Background()
	u := h.cluster(cluster, false)
	h.env.WorkloadKubeconfig(h.t, "default", cluster)
	mp := h.capiMachinePool(cluster+"-pool", cluster, cluster+"-pool-bootstrap", replicas)
	h.exportsCluster(u, "zone-a")
	if err := h.c.Create(ctx, bootstrapFor(mp, cluster+"-pool-bootstrap", bootstrapCanary)); err != nil {
		h.t.Fatal(err)
	}
	p := &infrav1.TerraformMachinePool{
		ObjectMeta: metav1.ObjectMeta{Name: cluster + "-pool", Namespace: "default", Labels: map[string]string{clusterv1.ClusterNameLabel: cluster},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "MachinePool", Name: mp.Name, UID: mp.UID, Controller: ptr.To(true)}}},
		Spec: infrav1.TerraformMachinePoolSpec{RunnerSpec: infrav1.RunnerSpec{
			Image:     poolImage,
			Variables: []infrav1.Variable{{Name: "dir", Value: &apiextensionsv1.JSON{Raw: []byte(`"` + cluster + `"`)}}},
			Drift:     infrav1.DriftSpec{IntervalSeconds: ptr.To(int32(0))},
		}},
	}
	spec(&p.Spec)
	if err := h.c.Create(ctx, p); err != nil {
		h.t.Fatal(err)
	}
	return mp, p
}

// waitPool polls a TerraformMachinePool until cond holds.
func (h *driftHarness) waitPool(p *infrav1.TerraformMachinePool, what string, cond func(*infrav1.TerraformMachinePool) bool) {
	h.t.Helper()
	waitFor(h.harness, p, "TerraformMachinePool "+p.Name+": "+what, cond)
}

// TestPools: a TerraformMachinePool owned by a Cluster API MachinePool
// waits (for its owner, the cluster's infrastructure and bootstrap data)
// each with its reason, then applies with the cluster's exports, the
// MachinePool's name, replicas, failure domains, labels and taints and
// the bootstrap data. Its own provider ID reaches spec.providerID, and
// its members' IDs, read from the state, spec.providerIDList and
// status.replicas, which Cluster API's MachinePool controller copies into
// the MachinePool with its infrastructure provisioned. A scale-up under
// applyPolicy Manual waits as a TerraformPlan of the pool, which kubectl
// captf lists, shows and approves; it applies, and the list follows. A member made or removed outside any
// apply reaches the list through a refresh Job, on the pool's membership
// interval. Under Manual, rotated bootstrap data alone applies without a
// new approval, and replicas an autoscaler owns never reach the module:
// their change applies nothing, and the next apply hands the module the
// replicas it last applied. The bootstrap data reaches nothing but the
// module.
func TestPools(t *testing.T) {
	h := startMachines(t)
	ctx := context.Background()
	seen := record[*infrav1.TerraformMachinePool](h.harness, &infrav1.TerraformMachinePoolList{}, "default")

	// A pool with no owner yet waits for one.
	p := &infrav1.TerraformMachinePool{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet-pool", Namespace: "default"},
		Spec: infrav1.TerraformMachinePoolSpec{RunnerSpec: infrav1.RunnerSpec{
			Image:     poolImage,
			Variables: []infrav1.Variable{{Name: "dir", Value: &apiextensionsv1.JSON{Raw: []byte(`"fleet"`)}}},
		}},
	}
	if err := h.c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	readyReason(h, p, infrav1.ReasonWaitingForOwner)
	// Its MachinePool, in a Cluster whose TerraformCluster is not there:
	// the cluster's infrastructure is waited for. Cluster API's cluster
	// cache reaches this API server as the workload cluster, as the
	// MachinePool controller needs to copy the members.
	u := h.cluster("fleet", false)
	h.env.WorkloadKubeconfig(t, "default", "fleet")
	mp := h.capiMachinePool("fleet-pool", "fleet", "fleet-pool-bootstrap", 2)
	readyReason(h, p, infrav1.ReasonWaitingForClusterInfrastructure)

	h.exportsCluster(u, "zone-b")
	readyReason(h, p, infrav1.ReasonWaitingForBootstrapData)
	if jobs := h.jobs(p); len(jobs) != 0 {
		t.Fatalf("%d Jobs of a pool waiting for its bootstrap data", len(jobs))
	}

	bootstrap := bootstrapFor(mp, "fleet-pool-bootstrap", bootstrapCanary)
	if err := h.c.Create(ctx, bootstrap); err != nil {
		t.Fatal(err)
	}
	members := func(n int) []string {
		var ids []string
		for i := range n {
			ids = append(ids, "captftest:///fleet/fleet-pool-"+string(rune('0'+i))+".txt")
		}
		return ids
	}
	h.waitPool(p, "provisioned with 2 members", func(p *infrav1.TerraformMachinePool) bool {
		return p.Status.Initialization != nil && ptr.Deref(p.Status.Initialization.Provisioned, false) && p.Status.Ready && len(p.Spec.ProviderIDList) == 2
	})
	if want := "captftest:///fleet/fleet-pool"; p.Spec.ProviderID != want {
		t.Errorf("spec.providerID %q, want %q", p.Spec.ProviderID, want)
	}
	if !slices.Equal(p.Spec.ProviderIDList, members(2)) || p.Status.Replicas != 2 {
		t.Errorf("spec.providerIDList %v, status.replicas %d; want %v, 2", p.Spec.ProviderIDList, p.Status.Replicas, members(2))
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, infrav1.ConditionMembersPublished); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("MembersPublished: %+v", c)
	}
	// What each member got: the exports, the failure domains, the
	// template's labels and taints, and the bootstrap data as the file's
	// secret.
	for _, name := range []string{"fleet-pool-0.txt", "fleet-pool-1.txt"} {
		var got struct {
			Zone    string            `json:"zone"`
			Domains []string          `json:"domains"`
			Labels  map[string]string `json:"labels"`
			Taints  []struct {
				Key, Value, Effect string
			} `json:"taints"`
		}
		if err := json.Unmarshal([]byte(h.machineFile(name)), &got); err != nil {
			t.Fatal(err)
		}
		if got.Zone != "zone-b" || !slices.Equal(got.Domains, []string{"zone-a", "zone-b"}) || len(got.Labels) != 1 ||
			len(got.Taints) != 1 || got.Taints[0].Key != "dedicated" || got.Taints[0].Effect != "NoSchedule" {
			t.Errorf("%s: the module got %+v", name, got)
		}
		secret, err := os.ReadFile(filepath.Join(h.files, "fleet", "."+name+".captftest-secret"))
		if err != nil || string(secret) != bootstrapCanary {
			t.Errorf("%s: the bootstrap data did not reach the module: %q, %v", name, secret, err)
		}
	}
	// The waits, in order, each seen.
	want := []string{infrav1.ReasonWaitingForOwner, infrav1.ReasonWaitingForClusterInfrastructure, infrav1.ReasonWaitingForBootstrapData, infrav1.ReasonProvisioning, engine.ReasonProvisioned}
	if reasons := readyReasons(seen.all(), p.Name); len(reasons) < len(want) || !slices.Equal(reasons[:len(want)], want) {
		t.Errorf("Ready's reasons %v, want them to begin %v", reasons, want)
	}

	// Cluster API's MachinePool controller read the contract.
	copied := func(n int) func(*clusterv1.MachinePool) bool {
		return func(mp *clusterv1.MachinePool) bool {
			return ptr.Deref(mp.Status.Initialization.InfrastructureProvisioned, false) &&
				slices.Equal(mp.Spec.ProviderIDList, members(n)) && ptr.Deref(mp.Status.Replicas, 0) == int32(n)
		}
	}
	waitFor(h.harness, mp, "MachinePool: the pool's members and replicas", copied(2))
	if mp.Status.Deprecated == nil || mp.Status.Deprecated.V1Beta1 == nil ||
		!slices.ContainsFunc(mp.Status.Deprecated.V1Beta1.Conditions, func(c clusterv1.Condition) bool {
			return c.Type == clusterv1.InfrastructureReadyV1Beta1Condition && c.Status == corev1.ConditionTrue
		}) {
		t.Errorf("MachinePool: no InfrastructureReady True: %+v", mp.Status.Deprecated)
	}

	// Under Manual, a scale-up waits as a TerraformPlan of the pool, and
	// applies once approved; the list follows.
	before := p.DeepCopy()
	p.Spec.ApplyPolicy = infrav1.ApplyManual
	if err := h.c.Patch(ctx, p, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	scaled := mp.DeepCopy()
	scaled.Spec.Replicas = ptr.To(int32(3))
	if err := h.c.Patch(ctx, scaled, client.MergeFrom(mp)); err != nil {
		t.Fatal(err)
	}
	var plan infrav1.TerraformPlan
	h.waitPool(p, "a TerraformPlan of the scale-up", func(p *infrav1.TerraformMachinePool) bool {
		return p.Status.PendingPlanRef != nil && p.Status.Plan != nil &&
			h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: p.Status.PendingPlanRef.Name}, &plan) == nil
	})
	if plan.Spec.TargetRef.Kind != "TerraformMachinePool" || plan.Spec.TargetRef.Name != p.Name || plan.Spec.Reason != infrav1.ReasonManual || plan.Spec.Summary.Create != 1 {
		t.Errorf("the plan: targetRef %+v, reason %s, summary %+v", plan.Spec.TargetRef, plan.Spec.Reason, plan.Spec.Summary)
	}
	// kubectl captf lists, shows and approves it, as a cluster's.
	admin := h.env.Kubeconfig(t)
	kubectlCaptf := func(args ...string) string { return h.kubectlCaptf(admin, args...) }
	if out := kubectlCaptf("plans", "--pending"); !strings.Contains(out, plan.Name) || !strings.Contains(out, "TerraformMachinePool/fleet-pool") {
		t.Errorf("kubectl captf plans --pending lacks the pool's plan:\n%s", out)
	}
	if out := kubectlCaptf("show", plan.Name); !strings.Contains(out, "Target:    TerraformMachinePool/fleet-pool\n") {
		t.Errorf("kubectl captf show: no pool target:\n%s", out)
	}
	kubectlCaptf("approve", plan.Name, "--plan-hash", plan.Spec.PlanHash)
	waitFor(h.harness, &plan, "the pool's plan applied", func(p *infrav1.TerraformPlan) bool {
		return p.Status.Phase == infrav1.PlanApplied && p.Spec.Approved && p.Spec.ApprovedBy != ""
	})
	h.waitPool(p, "3 members", func(p *infrav1.TerraformMachinePool) bool {
		c := meta.FindStatusCondition(p.Status.Conditions, infrav1.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue && len(p.Spec.ProviderIDList) == 3 && p.Status.Replicas == 3
	})
	waitFor(h.harness, mp, "MachinePool: 3 members", copied(3))

	// Members change outside any apply: a refresh Job reads them again
	// every membership.intervalSeconds, and the list follows, with no
	// plan and no apply.
	earlier := map[string]bool{}
	for _, j := range h.jobs(p) {
		earlier[j.Name] = true
	}
	before = p.DeepCopy()
	p.Spec.Membership.IntervalSeconds = ptr.To(int32(10))
	if err := h.c.Patch(ctx, p, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	autoscaled := filepath.Join(h.files, "fleet", "fleet-pool-3.txt")
	if err := os.WriteFile(autoscaled, []byte("made by an autoscaler"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.waitPool(p, "the autoscaled member", func(p *infrav1.TerraformMachinePool) bool {
		return slices.Equal(p.Spec.ProviderIDList, members(4)) && p.Status.Replicas == 4
	})
	waitFor(h.harness, mp, "MachinePool: the autoscaled member", copied(4))
	if err := os.Remove(autoscaled); err != nil {
		t.Fatal(err)
	}
	h.waitPool(p, "the autoscaled member gone", func(p *infrav1.TerraformMachinePool) bool {
		return slices.Equal(p.Spec.ProviderIDList, members(3)) && p.Status.Replicas == 3 && p.Status.LastMembershipRefresh != nil
	})
	refreshes := 0
	for _, j := range h.jobs(p) {
		switch op := j.Labels[engine.LabelOperation]; {
		case earlier[j.Name]:
		case op == string(infrav1.OperationRefresh):
			refreshes++
		default:
			t.Errorf("%s Job %s while only the members changed, want refresh Jobs only", op, j.Name)
		}
	}
	if refreshes == 0 {
		t.Error("no refresh Job, yet the members outside any apply reached the list")
	}
	if p.Status.PendingPlanRef != nil || p.Status.Plan != nil {
		t.Errorf("a plan waits while only the members changed: %+v", p.Status.Plan)
	}

	// Under Manual, rotated bootstrap data alone is applied without a new
	// approval: no TerraformPlan, and every member gets the new data.
	plansBefore := h.planNames(p)
	rotated := bootstrapCanary + "-ROTATED"
	bootstrap.Data["value"] = []byte(rotated)
	if err := h.c.Update(ctx, bootstrap); err != nil {
		t.Fatal(err)
	}
	waitFiles := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(2 * time.Minute)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 2 minutes", what)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitFiles("the rotated bootstrap data reaches every member", func() bool {
		for i := range 3 {
			b, err := os.ReadFile(filepath.Join(h.files, "fleet", ".fleet-pool-"+strconv.Itoa(i)+".txt.captftest-secret"))
			if err != nil || string(b) != rotated {
				return false
			}
		}
		return true
	})
	if now := h.planNames(p); !slices.Equal(now, plansBefore) {
		t.Errorf("TerraformPlans %v after a bootstrap rotation, want still %v: it asked for an approval", now, plansBefore)
	}

	// New bootstrap data named before its Secret exists: the provisioned
	// pool stays Ready (Cluster API reads it) and its next apply waits,
	// then applies once the Secret is there.
	if err := h.c.Get(ctx, client.ObjectKeyFromObject(mp), mp); err != nil {
		t.Fatal(err)
	}
	renamed := mp.DeepCopy()
	renamed.Spec.Template.Spec.Bootstrap.DataSecretName = ptr.To("fleet-pool-bootstrap-2")
	if err := h.c.Patch(ctx, renamed, client.MergeFrom(mp)); err != nil {
		t.Fatal(err)
	}
	h.waitPool(p, "the next apply waits for the new bootstrap data", func(p *infrav1.TerraformMachinePool) bool {
		c := meta.FindStatusCondition(p.Status.Conditions, infrav1.ConditionApplyJobSucceeded)
		return c != nil && c.Reason == infrav1.ReasonWaitingForBootstrapData
	})
	if c := meta.FindStatusCondition(p.Status.Conditions, infrav1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue || !p.Status.Ready {
		t.Errorf("a provisioned pool waiting for new bootstrap data: Ready %+v, status.ready %v; want it Ready", c, p.Status.Ready)
	}
	second := bootstrapFor(mp, "fleet-pool-bootstrap-2", rotated+"-2")
	if err := h.c.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	waitFiles("the new Secret's bootstrap data reaches every member", func() bool {
		b, err := os.ReadFile(filepath.Join(h.files, "fleet", ".fleet-pool-0.txt.captftest-secret"))
		return err == nil && string(b) == rotated+"-2"
	})
	mp = renamed

	// Replicas an autoscaler owns: the module gets those of the last
	// apply, so taking them over changes nothing, an autoscaler's change
	// of them plans and applies nothing, and the next apply (rotated
	// bootstrap data) hands the module the replicas it last applied, not
	// the autoscaler's, which no plan showed.
	h.waitPool(p, "idle after the rotation", func(p *infrav1.TerraformMachinePool) bool {
		return p.Status.ActiveJob == nil && p.Status.LastRun != nil && p.Status.LastRun.Operation == infrav1.OperationApply && p.Status.LastRun.Succeeded
	})
	if err := h.c.Get(ctx, client.ObjectKeyFromObject(mp), mp); err != nil {
		t.Fatal(err)
	}
	lastApply := p.Status.LastRun.Job
	earlier = map[string]bool{}
	for _, j := range h.jobs(p) {
		earlier[j.Name] = true
	}
	owned := mp.DeepCopy()
	owned.Annotations = map[string]string{clusterv1.ReplicasManagedByAnnotation: "external-autoscaler"}
	if err := h.c.Patch(ctx, owned, client.MergeFrom(mp)); err != nil {
		t.Fatal(err)
	}
	autoscaled5 := owned.DeepCopy()
	autoscaled5.Spec.Replicas = ptr.To(int32(5))
	if err := h.c.Patch(ctx, autoscaled5, client.MergeFrom(owned)); err != nil {
		t.Fatal(err)
	}
	// Two membership refreshes later, nothing else ran.
	refreshed := p.Status.LastMembershipRefresh
	h.waitPool(p, "two refreshes after the autoscaler's change", func(p *infrav1.TerraformMachinePool) bool {
		r := p.Status.LastMembershipRefresh
		return r != nil && refreshed != nil && r.Sub(refreshed.Time) >= 10*time.Second
	})
	for _, j := range h.jobs(p) {
		if op := j.Labels[engine.LabelOperation]; !earlier[j.Name] && op != string(infrav1.OperationRefresh) {
			t.Errorf("%s Job %s after the autoscaler's takeover and change of the replicas, want refresh Jobs only", op, j.Name)
		}
	}
	if p.Status.LastRun.Job != lastApply || p.Status.Plan != nil || p.Status.PendingPlanRef != nil {
		t.Errorf("an autoscaler's change of the replicas: last run %s (want %s), plan %+v", p.Status.LastRun.Job, lastApply, p.Status.Plan)
	}
	if now := h.planNames(p); !slices.Equal(now, plansBefore) {
		t.Errorf("TerraformPlans %v after the autoscaler's takeover, want still %v", now, plansBefore)
	}
	// The next apply: bootstrap data rotates again.
	second.Data["value"] = []byte(rotated + "-3")
	if err := h.c.Update(ctx, second); err != nil {
		t.Fatal(err)
	}
	waitFiles("the third bootstrap data reaches every member", func() bool {
		b, err := os.ReadFile(filepath.Join(h.files, "fleet", ".fleet-pool-0.txt.captftest-secret"))
		return err == nil && string(b) == rotated+"-3"
	})
	h.waitPool(p, "idle after the third rotation", func(p *infrav1.TerraformMachinePool) bool {
		return p.Status.ActiveJob == nil && p.Status.LastRun != nil && p.Status.LastRun.Job != lastApply && p.Status.LastRun.Succeeded
	})
	if ids := p.Spec.ProviderIDList; len(ids) != 3 {
		t.Errorf("members %v after an apply while an autoscaler owns the replicas (5), want the 3 last approved", ids)
	}
	if _, err := os.Stat(filepath.Join(h.files, "fleet", "fleet-pool-3.txt")); err == nil {
		t.Error("the module made a fourth member from the autoscaler's replicas, which no plan showed")
	}

	// The bootstrap data reached no status, event or plan.
	var plans infrav1.TerraformPlanList
	if err := h.c.List(ctx, &plans, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	if len(plans.Items) == 0 {
		t.Error("no TerraformPlan to look in: the check proves nothing")
	}
	h.noCanary(bootstrapCanary, map[string]any{"status": p.Status, "events": h.events(p), "plans": plans.Items, "seen pools": seen.all()})
}

// planNames are the names of the TerraformPlans of obj, sorted.
func (h *driftHarness) planNames(obj client.Object) []string {
	h.t.Helper()
	var plans infrav1.TerraformPlanList
	if err := h.c.List(context.Background(), &plans, client.InNamespace(obj.GetNamespace())); err != nil {
		h.t.Fatal(err)
	}
	var names []string
	for _, p := range plans.Items {
		if p.Spec.TargetRef.Name == obj.GetName() {
			names = append(names, p.Name)
		}
	}
	slices.Sort(names)
	return names
}

// TestPoolExportsChange: a change of the cluster's exports that replaces
// a pool's resources waits as an ExportsChange TerraformPlan, under
// Automatic too, whose spec.inputsHash is the pool's approval hash, not
// its inputs hash; meanwhile the pool keeps applying with the exports it
// last applied — a scale-up goes on, and the plan is made again for the
// new input set. Approved (with kubectl captf), it applies, replacing
// under --allow-deletes-hash. Scaled down, the guard stops the apply that
// deletes a member until its Destructive plan is approved; the list and
// the MachinePool follow. A second exports change withdrawn before
// approval makes its plan moot: it is superseded and nothing of it is
// applied.
func TestPoolExportsChange(t *testing.T) {
	h := startMachines(t)
	ctx := context.Background()
	u := h.cluster("zoned", false)
	h.env.WorkloadKubeconfig(t, "default", "zoned")
	tc := h.exportsCluster(u, "zone-a")
	p := &infrav1.TerraformMachinePool{
		ObjectMeta: metav1.ObjectMeta{Name: "zoned-pool", Namespace: "default"},
		Spec: infrav1.TerraformMachinePoolSpec{RunnerSpec: infrav1.RunnerSpec{
			Image:     poolImage,
			Variables: []infrav1.Variable{{Name: "dir", Value: &apiextensionsv1.JSON{Raw: []byte(`"zoned"`)}}},
		}},
	}
	if err := h.c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	mp := h.capiMachinePool("zoned-pool", "zoned", "zoned-pool-bootstrap", 2)
	if err := h.c.Create(ctx, bootstrapFor(mp, "zoned-pool-bootstrap", bootstrapCanary)); err != nil {
		t.Fatal(err)
	}
	h.waitPool(p, "provisioned with 2 members", func(p *infrav1.TerraformMachinePool) bool {
		return p.Status.Ready && len(p.Spec.ProviderIDList) == 2
	})
	placement := func() []string {
		t.Helper()
		entries, err := os.ReadDir(filepath.Join(h.files, "zoned-placement"))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), ".") {
				names = append(names, e.Name())
			}
		}
		return names
	}
	if got := placement(); !slices.Equal(got, []string{"zone-a.txt"}) {
		t.Fatalf("placement %v, want zone-a.txt", got)
	}
	setZone := func(zone string) {
		t.Helper()
		if err := h.c.Get(ctx, client.ObjectKeyFromObject(tc), tc); err != nil {
			t.Fatal(err)
		}
		before := tc.DeepCopy()
		tc.Spec.Variables = []infrav1.Variable{{Name: "exports", Value: &apiextensionsv1.JSON{Raw: []byte(`{"zone": "` + zone + `"}`)}}}
		if err := h.c.Patch(ctx, tc, client.MergeFrom(before)); err != nil {
			t.Fatal(err)
		}
	}
	livePlan := func(what string, cond func(*infrav1.TerraformPlan) bool) *infrav1.TerraformPlan {
		t.Helper()
		var plan infrav1.TerraformPlan
		h.waitPool(p, what, func(p *infrav1.TerraformMachinePool) bool {
			return p.Status.PendingPlanRef != nil &&
				h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: p.Status.PendingPlanRef.Name}, &plan) == nil && cond(&plan)
		})
		return &plan
	}
	exportsChange := func(plan *infrav1.TerraformPlan) bool {
		return plan.Spec.Reason == infrav1.ReasonExportsChange && plan.Status.Phase == infrav1.PlanPending
	}

	// New exports replace the placement: an ExportsChange plan, under
	// Automatic, bound to the approval hash.
	setZone("zone-b")
	first := livePlan("an ExportsChange plan", exportsChange)
	if first.Spec.TargetRef.Kind != "TerraformMachinePool" || first.Spec.Summary.Replace != 1 || first.Labels[infrav1.LabelPlanReason] != string(infrav1.ReasonExportsChange) {
		t.Errorf("the plan: %+v, labels %v", first.Spec, first.Labels)
	}
	if got := placement(); !slices.Equal(got, []string{"zone-a.txt"}) {
		t.Errorf("placement %v while the exports change waits, want zone-a.txt", got)
	}
	if inputs := h.durableInputsHash(p); first.Spec.InputsHash == inputs {
		t.Errorf("spec.inputsHash %s is the inputs hash; an ExportsChange plan binds the approval hash", inputs)
	}

	// A scale-up goes on with the exports last applied; the plan is made
	// again for the new input set.
	before := mp.DeepCopy()
	mp.Spec.Replicas = ptr.To(int32(3))
	if err := h.c.Patch(ctx, mp, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	h.waitPool(p, "3 members, with the old exports", func(p *infrav1.TerraformMachinePool) bool { return len(p.Spec.ProviderIDList) == 3 })
	var member struct {
		Zone string `json:"zone"`
	}
	raw, err := os.ReadFile(filepath.Join(h.files, "zoned", "zoned-pool-2.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &member); err != nil || member.Zone != "zone-a" {
		t.Errorf("the new member got zone %q (%v), want the last applied zone-a", member.Zone, err)
	}
	second := livePlan("the ExportsChange plan made again", func(plan *infrav1.TerraformPlan) bool {
		return exportsChange(plan) && plan.Name != first.Name
	})
	waitFor(h.harness, first, "the first plan superseded", func(plan *infrav1.TerraformPlan) bool { return plan.Status.Phase == infrav1.PlanSuperseded })
	if got := placement(); !slices.Equal(got, []string{"zone-a.txt"}) {
		t.Errorf("placement %v before the approval, want zone-a.txt", got)
	}

	// approve approves plan with kubectl captf.
	approve := func(plan *infrav1.TerraformPlan) { h.kubectlCaptf(h.env.Kubeconfig(t), "approve", plan.Name) }
	// A member is chmod'ed outside terraform after the plan was made: the
	// approved apply would replace it too, which the reviewed plan did
	// not. It applies nothing, names the member, and that plan fails; a
	// new plan of both replacements waits.
	if err := os.Chmod(filepath.Join(h.files, "zoned", "zoned-pool-0.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	approve(second)
	waitFor(h.harness, second, "the approved plan failed", func(plan *infrav1.TerraformPlan) bool { return plan.Status.Phase == infrav1.PlanFailed })
	named := func() bool {
		return slices.ContainsFunc(h.events(p), func(e eventsv1.Event) bool {
			return e.Reason == infrav1.EventDestructivePlanBlocked && strings.Contains(e.Note, `did not: module.main.captftest_file.member[0]`)
		})
	}
	for deadline := time.Now().Add(time.Minute); !named(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s event naming the member the approved plan did not replace: %+v", infrav1.EventDestructivePlanBlocked, h.events(p))
		}
	}
	if got := placement(); !slices.Equal(got, []string{"zone-a.txt"}) {
		t.Errorf("placement %v after the refused apply, want zone-a.txt: nothing applied", got)
	}
	second = livePlan("a plan of both replacements", func(plan *infrav1.TerraformPlan) bool {
		return exportsChange(plan) && plan.Spec.Summary.Replace == 2
	})
	// Approved, it applies: the placement is replaced, every member
	// gets the new exports.
	approve(second)
	waitFor(h.harness, second, "the approved plan applied", func(plan *infrav1.TerraformPlan) bool { return plan.Status.Phase == infrav1.PlanApplied })
	if got := placement(); !slices.Equal(got, []string{"zone-b.txt"}) {
		t.Errorf("placement %v after the approval, want zone-b.txt", got)
	}
	var applyJob *batchv1.Job
	for _, j := range h.jobs(p) {
		if j.Annotations[infrav1.AnnotationPlan] == second.Name {
			applyJob = &j
		}
	}
	if applyJob == nil || !slices.Contains(applyJob.Spec.Template.Spec.Containers[0].Command, "--allow-deletes-hash="+second.Spec.InputsHash) {
		t.Errorf("the approved apply Job does not carry --allow-deletes-hash=%s: %+v", second.Spec.InputsHash, applyJob)
	}

	// Scaled down: under Automatic the guard stops the apply that deletes
	// a member, its plan waits as Destructive; approved, the member goes
	// and the list and Cluster API's MachinePool follow.
	if err := h.c.Get(ctx, client.ObjectKeyFromObject(mp), mp); err != nil {
		t.Fatal(err)
	}
	before = mp.DeepCopy()
	mp.Spec.Replicas = ptr.To(int32(2))
	if err := h.c.Patch(ctx, mp, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	down := livePlan("the scale-down's Destructive plan", func(plan *infrav1.TerraformPlan) bool {
		return plan.Spec.Reason == infrav1.ReasonDestructive && plan.Status.Phase == infrav1.PlanPending
	})
	if down.Spec.Summary.Delete != 1 {
		t.Errorf("the scale-down's plan: %+v", down.Spec.Summary)
	}
	approve(down)
	h.waitPool(p, "2 members after the scale-down", func(p *infrav1.TerraformMachinePool) bool {
		return len(p.Spec.ProviderIDList) == 2 && p.Status.Replicas == 2 && p.Status.PendingPlanRef == nil
	})
	waitFor(h.harness, mp, "MachinePool: 2 members", func(mp *clusterv1.MachinePool) bool {
		return len(mp.Spec.ProviderIDList) == 2 && ptr.Deref(mp.Status.Replicas, 0) == 2
	})

	// Withdrawn: another exports change waits, and is taken back before
	// anyone approves it; its plan is moot and nothing of it applies.
	setZone("zone-c")
	third := livePlan("an ExportsChange plan of zone-c", exportsChange)
	setZone("zone-b")
	waitFor(h.harness, third, "the withdrawn change's plan superseded", func(plan *infrav1.TerraformPlan) bool { return plan.Status.Phase == infrav1.PlanSuperseded })
	h.waitPool(p, "no plan waits", func(p *infrav1.TerraformMachinePool) bool {
		return p.Status.PendingPlanRef == nil && p.Status.Plan == nil && p.Status.ActiveJob == nil
	})
	if got := placement(); !slices.Equal(got, []string{"zone-b.txt"}) {
		t.Errorf("placement %v after the change was withdrawn, want zone-b.txt", got)
	}
	h.noCanary(bootstrapCanary, map[string]any{"status": p.Status, "events": h.events(p), "plans": []any{first, second, third}})
}

// durableInputsHash is the inputs hash obj's durable inputs Secret records
// for its current inputs.
func (h *driftHarness) durableInputsHash(obj engine.Object) string {
	h.t.Helper()
	var s corev1.Secret
	if err := h.c.Get(context.Background(), client.ObjectKey{Namespace: obj.GetNamespace(), Name: engine.InputsName("tfmp", obj.GetName())}, &s); err != nil {
		h.t.Fatal(err)
	}
	hash, err := render.RootInputsHash(s.Data["main.tf.json"])
	if err != nil {
		h.t.Fatal(err)
	}
	return hash
}
