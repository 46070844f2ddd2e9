package scale

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
)

// machinePhase gives every TerraformCluster a Cluster API Cluster whose
// infrastructure is provisioned and s.machines Machines, each with a
// TerraformMachine it owns, as Cluster API's controllers would leave them
// (they do not run: their requests are not the manager's, and two cores
// are short). It measures the machines' first applies and, in an idle
// window, what the manager then costs per machine: the idle requests
// less the clusters' own (clusterRecheck per cluster and re-check, from
// the idle phase before), and its memory with both kinds.
// It returns its figures and the idle requests a minute of clusters and
// machines.
func machinePhase(t *testing.T, c client.Client, s settings, mgr *manager, clusters []string, clusterRecheck float64) ([]string, float64) {
	t.Helper()
	ctx := context.Background()
	var machines []string
	clusterOf := map[string]string{}
	for _, cluster := range clusters {
		for i := range s.machines {
			name := fmt.Sprintf("%s-m%d", cluster, i)
			machines = append(machines, name)
			clusterOf[name] = cluster
		}
	}
	total := len(machines)

	m0, r0 := scrape(t, mgr.metricsURL), mgr.mark()
	began := time.Now()
	clusterAPIClusters(t, c, clusters)
	parallel(t, machines, func(name string) error {
		cluster := clusterOf[name]
		labels := map[string]string{clusterv1.ClusterNameLabel: cluster}
		m := &clusterv1.Machine{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
			Spec: clusterv1.MachineSpec{
				ClusterName:       cluster,
				Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To(cluster + "-bootstrap")},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "TerraformMachine", Name: name},
			},
		}
		if err := c.Create(ctx, m); err != nil {
			return err
		}
		return c.Create(ctx, &infrav1.TerraformMachine{
			ObjectMeta: ownedBy(m, "Machine"),
			Spec:       infrav1.TerraformMachineSpec{RunnerSpec: infrav1.RunnerSpec{Image: moduleImage}},
		})
	})
	waitCount(t, s, mgr, "provisioned machines", total, countOf(t, c, &infrav1.TerraformMachineList{}, provisioned))
	created := time.Since(began)
	m1, r1 := scrape(t, mgr.metricsURL), mgr.mark()

	idle0, idle1, hwm, rss := idleWindow(t, s, mgr)

	rechecks := s.idle.Minutes() / s.recheck.Minutes()
	idle := requests(idle0, idle1)
	machineIdle := idle - clusterRecheck*float64(s.n)*rechecks
	perRecheck := machineIdle / float64(total) / rechecks
	perHour := perRecheck * (time.Hour.Minutes() / engine.Recheck.Minutes())
	mb := func(b float64) float64 { return b / (1 << 20) }
	perMachine := func(v float64) float64 { return v / float64(total) }
	lines := []string{
		fmt.Sprintf("scale: N=%d × %d machines create→provisioned %s: per machine %.1f requests (%s), %.1f machine reconciles, %.1f cluster reconciles; manager CPU %.1fs; conflicts (409) %.0f, machine reconcile errors %.0f",
			s.n, s.machines, created.Round(time.Second), perMachine(requests(m0, m1)), formatCounts(byMethod(m0, m1)),
			perMachine(reconciles(m0, m1, "terraformmachine")), perMachine(reconciles(m0, m1, "terraformcluster")), cpu(m0, m1),
			m1.sum("rest_client_requests_total", `code="409"`)-m0.sum("rest_client_requests_total", `code="409"`),
			idle1.sum("controller_runtime_reconcile_errors_total", `controller="terraformmachine"`)),
		fmt.Sprintf("scale: N=%d × %d machines idle %s at --recheck-interval=%s: %.0f requests (%s), %.0f machine and %.0f cluster reconciles; less the clusters' %.2f per re-check: %.2f requests per machine per re-check × %.0f re-checks an hour at %s = %.1f requests per machine per hour",
			s.n, s.machines, s.idle, s.recheck, idle, formatCounts(byMethod(idle0, idle1)),
			reconciles(idle0, idle1, "terraformmachine"), reconciles(idle0, idle1, "terraformcluster"), clusterRecheck,
			perRecheck, time.Hour.Minutes()/engine.Recheck.Minutes(), engine.Recheck, perHour),
		fmt.Sprintf("scale: N=%d × %d machines memory VmHWM=%.0f MB VmRSS=%.0f MB heap in use=%.0f MB",
			s.n, s.machines, mb(float64(hwm)), mb(float64(rss)), mb(idle1.sum("go_memstats_heap_inuse_bytes"))),
	}
	if s.breakdown {
		lines = append(lines, fmt.Sprintf("scale: N=%d × %d machines breakdown create→provisioned, requests per machine: %s", s.n, s.machines, mgr.breakdown(r0, r1, total)))
	}
	return lines, idle / s.idle.Minutes()
}

// clusterAPIClusters makes for each TerraformCluster a Cluster API Cluster
// whose infrastructure is provisioned, and a bootstrap data Secret, as
// Cluster API and a bootstrap provider would leave them; those already
// made are left.
func clusterAPIClusters(t *testing.T, c client.Client, clusters []string) {
	t.Helper()
	ctx := context.Background()
	parallel(t, clusters, func(name string) error {
		cluster := &clusterv1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
			Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "TerraformCluster", Name: name,
			}},
		}
		err := c.Create(ctx, cluster)
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		if err != nil {
			return err
		}
		cluster.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
		if err := c.Status().Update(ctx, cluster); err != nil {
			return fmt.Errorf("Cluster status: %w", err)
		}
		return c.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-bootstrap", Namespace: namespace},
			Data:       map[string][]byte{"value": []byte("#cloud-config\n")},
		})
	})
}

// ownedBy is the metadata of the infrastructure object Cluster API's owner
// (of kind) controller-owns: its name, namespace and cluster-name label.
func ownedBy(owner client.Object, kind string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: owner.GetName(), Namespace: owner.GetNamespace(), Labels: map[string]string{clusterv1.ClusterNameLabel: owner.GetLabels()[clusterv1.ClusterNameLabel]},
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: clusterv1.GroupVersion.String(), Kind: kind, Name: owner.GetName(), UID: owner.GetUID(),
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}},
	}
}

// countOf counts for waitCount the objects of list's type in the
// benchmark's namespace that are done.
func countOf[T client.Object](t *testing.T, c client.Client, list client.ObjectList, done func(T) bool) func() (int, int) {
	return func() (n, all int) {
		if err := c.List(context.Background(), list, client.InNamespace(namespace)); err != nil {
			t.Fatal(err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range items {
			if done(item.(T)) {
				n++
			}
		}
		return n, len(items)
	}
}

// provisioned: the machine applied, published its provider ID, and has
// nothing running; its status is current.
func provisioned(tm *infrav1.TerraformMachine) bool {
	c := meta.FindStatusCondition(tm.Status.Conditions, infrav1.ConditionReady)
	return tm.Spec.ProviderID != "" && tm.Status.Initialization != nil && ptr.Deref(tm.Status.Initialization.Provisioned, false) &&
		tm.Status.ActiveJob == nil && tm.Status.ObservedGeneration == tm.Generation && c != nil && c.Status == metav1.ConditionTrue
}
