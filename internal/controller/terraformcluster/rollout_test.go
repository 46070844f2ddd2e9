package terraformcluster

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
)

// TerraformMachines that Cluster API's MachineDeployment and MachineSet
// controllers make from a TerraformMachineTemplate.

// machineTemplate creates a TerraformMachineTemplate of the machine
// module whose machines' files go under dir.
func (h *driftHarness) machineTemplate(name, dir string) *infrav1.TerraformMachineTemplate {
	h.t.Helper()
	mt := &infrav1.TerraformMachineTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: infrav1.TerraformMachineTemplateSpec{Template: infrav1.TerraformMachineTemplateResource{
			Spec: infrav1.TerraformMachineSpec{RunnerSpec: infrav1.RunnerSpec{
				Image:     machineImage,
				Variables: []infrav1.Variable{{Name: "dir", Value: &apiextensionsv1.JSON{Raw: []byte(`"` + dir + `"`)}}},
			}},
		}},
	}
	if err := h.c.Create(context.Background(), mt); err != nil {
		h.t.Fatal(err)
	}
	return mt
}

// machineDeployment creates a MachineDeployment of cluster with replicas
// Machines of Kubernetes version whose infrastructure the
// TerraformMachineTemplate template makes and whose bootstrap data is the
// Secret bootstrap. It rolls out by deleting an old Machine before it
// makes a new one: no Node ever joins here, so a new Machine never
// becomes available.
func (h *driftHarness) machineDeployment(name, cluster, template, version, bootstrap string, replicas int32) *clusterv1.MachineDeployment {
	h.t.Helper()
	labels := map[string]string{clusterv1.ClusterNameLabel: cluster, "deployment": name}
	md := &clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{clusterv1.ClusterNameLabel: cluster}},
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: cluster,
			Replicas:    ptr.To(replicas),
			Selector:    metav1.LabelSelector{MatchLabels: labels},
			Rollout: clusterv1.MachineDeploymentRolloutSpec{Strategy: clusterv1.MachineDeploymentRolloutStrategy{
				Type: clusterv1.RollingUpdateMachineDeploymentStrategyType,
				RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{
					MaxSurge: ptr.To(intstr.FromInt32(0)), MaxUnavailable: ptr.To(intstr.FromInt32(1)),
				},
			}},
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: labels},
				Spec: clusterv1.MachineSpec{
					ClusterName:       cluster,
					Version:           version,
					Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To(bootstrap)},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "TerraformMachineTemplate", Name: template},
				},
			},
		},
	}
	if err := h.c.Create(context.Background(), md); err != nil {
		h.t.Fatal(err)
	}
	return md
}

// deploymentMachines are the TerraformMachines of the MachineDeployment
// name: those whose Machines carry its label.
func (h *driftHarness) deploymentMachines(name string) []infrav1.TerraformMachine {
	h.t.Helper()
	var machines infrav1.TerraformMachineList
	if err := h.c.List(context.Background(), &machines, client.InNamespace("default"), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: name}); err != nil {
		h.t.Fatal(err)
	}
	return machines.Items
}

// provisionedMachines waits until the MachineDeployment name has want
// TerraformMachines, each provisioned, and returns them.
func (h *driftHarness) provisionedMachines(name string, want int) []infrav1.TerraformMachine {
	h.t.Helper()
	var got []infrav1.TerraformMachine
	waitUntil(h.harness, "the provisioned machines of "+name, func() bool {
		got = h.deploymentMachines(name)
		if len(got) != want {
			return false
		}
		for _, tm := range got {
			if !machineProvisioned(&tm) || !tm.DeletionTimestamp.IsZero() {
				return false
			}
		}
		return true
	})
	return got
}

// waitUntil polls cond until it holds, for up to 3 minutes.
func waitUntil(h *harness, what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: not within 3 minutes", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// reconcileErrors are the lines the manager's log holds (from when the
// drift harness started) that captf's own controllers logged at the
// error level: a reconcile that returned an error.
func reconcileErrors(t *testing.T) []string {
	t.Helper()
	managerLog.mu.Lock()
	log := managerLog.buf.String()
	managerLog.mu.Unlock()
	var errs []string
	lines := bufio.NewScanner(strings.NewReader(log))
	lines.Buffer(make([]byte, 0, 1<<20), 1<<24)
	for lines.Scan() {
		var line struct {
			Level string `json:"level"`
			Group string `json:"controllerGroup"`
		}
		if json.Unmarshal(lines.Bytes(), &line) != nil {
			continue
		}
		if line.Level == "error" && line.Group == infrav1.GroupVersion.Group {
			errs = append(errs, lines.Text())
		}
	}
	if err := lines.Err(); err != nil {
		t.Fatal(err)
	}
	return errs
}

// TestScaleUpLogsNoConflict: a MachineSet makes TerraformMachines and
// Cluster API's Machine controller patches them (owner reference, labels)
// while the manager adds its finalizer. A write that loses to Cluster
// API's is tried again quietly: a scale-up logs no reconciler error.
func TestScaleUpLogsNoConflict(t *testing.T) {
	h := startMachines(t)
	ctx := context.Background()
	u := h.cluster("scale", false)
	h.exportsCluster(u, "zone-a")
	if err := h.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "scale-bootstrap", Namespace: "default"}, Data: map[string][]byte{"value": []byte(bootstrapCanary)}}); err != nil {
		t.Fatal(err)
	}
	h.machineTemplate("scale-1", "scale")
	md := h.machineDeployment("scale-md", "scale", "scale-1", "v1.34.0", "scale-bootstrap", 1)
	h.provisionedMachines(md.Name, 1)
	scaled := md.DeepCopy()
	scaled.Spec.Replicas = ptr.To(int32(4))
	if err := h.c.Patch(ctx, scaled, client.MergeFrom(md)); err != nil {
		t.Fatal(err)
	}
	h.provisionedMachines(md.Name, 4)
	if errs := reconcileErrors(t); len(errs) > 0 {
		t.Errorf("%d reconciler errors in the manager's log during the scale-up, the first:\n%s", len(errs), errs[0])
	}
}

// fileVersion is the Kubernetes version the machine or pool module wrote
// in the file name of the test's directory dir.
func (h *driftHarness) fileVersion(dir, name string) string {
	h.t.Helper()
	b, err := os.ReadFile(filepath.Join(h.files, dir, name))
	if err != nil {
		return ""
	}
	var got struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		h.t.Fatalf("%s/%s: %v", dir, name, err)
	}
	return got.Version
}

// inputsHashes are the inputs hashes of obj's Jobs of operation op.
func (h *driftHarness) inputsHashes(obj client.Object, op infrav1.Operation) []string {
	h.t.Helper()
	var hashes []string
	for _, j := range h.jobs(obj) {
		if j.Labels[engine.LabelOperation] == string(op) {
			hashes = append(hashes, j.Annotations["captf.io/inputs-hash"])
		}
	}
	return hashes
}

// TestKubernetesVersion: the Kubernetes version reaches the modules as
// var.captf_kubernetes_version. A MachineDeployment's version bump makes
// new TerraformMachines (Cluster API's MachineDeployment and MachineSet
// controllers roll them out) whose module gets the new version, and the
// old ones are destroyed with the inputs they were applied with. A
// MachinePool's version change is a change of its pool: applied under
// Automatic, and under Manual a plan that waits for approval.
func TestKubernetesVersion(t *testing.T) {
	h := startMachines(t)
	ctx := context.Background()
	u := h.cluster("ver", false)
	h.env.WorkloadKubeconfig(t, "default", "ver")
	h.exportsCluster(u, "zone-a")
	if err := h.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ver-bootstrap", Namespace: "default"}, Data: map[string][]byte{"value": []byte(bootstrapCanary)}}); err != nil {
		t.Fatal(err)
	}

	// A MachineDeployment's machines, then its version bump.
	h.machineTemplate("ver-1", "ver")
	md := h.machineDeployment("ver-md", "ver", "ver-1", "v1.33.2", "ver-bootstrap", 1)
	old := h.provisionedMachines(md.Name, 1)[0]
	if got := h.fileVersion("ver", old.Name+".txt"); got != "v1.33.2" {
		t.Errorf("%s: the module got version %q, want v1.33.2", old.Name, got)
	}
	bumped := md.DeepCopy()
	bumped.Spec.Template.Spec.Version = "v1.34.1"
	if err := h.c.Patch(ctx, bumped, client.MergeFrom(md)); err != nil {
		t.Fatal(err)
	}
	h.gone(&old, "the old machine destroyed and released")
	var renewed infrav1.TerraformMachine
	waitUntil(h.harness, "a new machine of the new version", func() bool {
		for _, tm := range h.provisionedMachines(md.Name, 1) {
			if tm.Name != old.Name {
				renewed = tm
				return true
			}
		}
		return false
	})
	if got := h.fileVersion("ver", renewed.Name+".txt"); got != "v1.34.1" {
		t.Errorf("%s: the module got version %q, want v1.34.1", renewed.Name, got)
	}
	if _, err := os.Stat(filepath.Join(h.files, "ver", old.Name+".txt")); !os.IsNotExist(err) {
		t.Errorf("the old machine's file after its destroy: %v", err)
	}
	applied, destroyed := h.inputsHashes(&old, infrav1.OperationApply), h.inputsHashes(&old, infrav1.OperationDestroy)
	if len(applied) != 1 || len(destroyed) != 1 || destroyed[0] != applied[0] || applied[0] == "" {
		t.Errorf("the old machine's apply ran inputs %v and its destroy %v, want the same", applied, destroyed)
	}
	if slices.Equal(h.inputsHashes(&renewed, infrav1.OperationApply), applied) {
		t.Error("the new machine ran the old one's inputs: the version is not in the inputs hash")
	}

	// A MachinePool's version change, under Automatic then Manual.
	p := &infrav1.TerraformMachinePool{
		ObjectMeta: metav1.ObjectMeta{Name: "ver-pool", Namespace: "default"},
		Spec: infrav1.TerraformMachinePoolSpec{RunnerSpec: infrav1.RunnerSpec{
			Image:     poolImage,
			Variables: []infrav1.Variable{{Name: "dir", Value: &apiextensionsv1.JSON{Raw: []byte(`"verpool"`)}}},
		}},
	}
	if err := h.c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	mp := h.capiMachinePool("ver-pool", "ver", "ver-pool-bootstrap", 1)
	setVersion := func(v string) {
		t.Helper()
		if err := h.c.Get(ctx, client.ObjectKeyFromObject(mp), mp); err != nil {
			t.Fatal(err)
		}
		before := mp.DeepCopy()
		mp.Spec.Template.Spec.Version = v
		if err := h.c.Patch(ctx, mp, client.MergeFrom(before)); err != nil {
			t.Fatal(err)
		}
	}
	setVersion("v1.33.2")
	if err := h.c.Create(ctx, bootstrapFor(mp, "ver-pool-bootstrap", bootstrapCanary)); err != nil {
		t.Fatal(err)
	}
	member := "ver-pool-0.txt"
	h.waitPool(p, "provisioned", func(p *infrav1.TerraformMachinePool) bool {
		return p.Status.Initialization != nil && ptr.Deref(p.Status.Initialization.Provisioned, false)
	})
	if got := h.fileVersion("verpool", member); got != "v1.33.2" {
		t.Errorf("the pool's member got version %q, want v1.33.2", got)
	}
	setVersion("v1.34.1")
	waitUntil(h.harness, "the pool applies the new version under Automatic", func() bool { return h.fileVersion("verpool", member) == "v1.34.1" })

	before := p.DeepCopy()
	p.Spec.ApplyPolicy = infrav1.ApplyManual
	if err := h.c.Patch(ctx, p, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	setVersion("v1.35.0")
	var plan infrav1.TerraformPlan
	h.waitPool(p, "a TerraformPlan of the version change", func(p *infrav1.TerraformMachinePool) bool {
		return p.Status.PendingPlanRef != nil && p.Status.Plan != nil &&
			h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: p.Status.PendingPlanRef.Name}, &plan) == nil
	})
	if s := plan.Spec.Summary; plan.Spec.Reason != infrav1.ReasonManual || s.Update+s.Replace == 0 {
		t.Errorf("the plan: reason %s, summary %+v", plan.Spec.Reason, s)
	}
	time.Sleep(3 * time.Second)
	if got := h.fileVersion("verpool", member); got != "v1.34.1" {
		t.Fatalf("the member has version %q before the approval, want v1.34.1", got)
	}
	h.approvePlan(&plan, "alice")
	waitUntil(h.harness, "the approved version applied", func() bool { return h.fileVersion("verpool", member) == "v1.35.0" })
}
