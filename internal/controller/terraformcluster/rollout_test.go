package terraformcluster

import (
	"bufio"
	"context"
	"encoding/json"
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
