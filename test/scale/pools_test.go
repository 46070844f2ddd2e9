package scale

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
)

// poolPhase gives every TerraformCluster s.pools MachinePools, each with a
// TerraformMachinePool it owns, as Cluster API's MachinePool controller
// would leave them (it does not run). It measures the pools' first
// applies (each with poolMembers members in its state) and, in an idle
// window, what the manager then costs per pool — the idle requests less
// before, what the objects made before cost per minute (baseline) —
// with the membership refresh Jobs at the default interval, and its
// memory with every kind.
func poolPhase(t *testing.T, c client.Client, s settings, mgr *manager, nd *node, clusters []string, baseline float64) []string {
	t.Helper()
	ctx := context.Background()
	clusterAPIClusters(t, c, clusters)
	var pools []string
	clusterOf := map[string]string{}
	for _, cluster := range clusters {
		for i := range s.pools {
			name := fmt.Sprintf("%s-p%d", cluster, i)
			pools = append(pools, name)
			clusterOf[name] = cluster
		}
	}
	total := len(pools)

	m0 := scrape(t, mgr.metricsURL)
	began := time.Now()
	parallel(t, pools, func(name string) error {
		cluster := clusterOf[name]
		labels := map[string]string{clusterv1.ClusterNameLabel: cluster}
		mp := &clusterv1.MachinePool{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
			Spec: clusterv1.MachinePoolSpec{
				ClusterName: cluster,
				Replicas:    ptr.To(int32(poolMembers)),
				Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{
					ClusterName:       cluster,
					Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To(cluster + "-bootstrap")},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "TerraformMachinePool", Name: name},
				}},
			},
		}
		if err := c.Create(ctx, mp); err != nil {
			return err
		}
		return c.Create(ctx, &infrav1.TerraformMachinePool{
			ObjectMeta: ownedBy(mp, "MachinePool"),
			Spec:       infrav1.TerraformMachinePoolSpec{RunnerSpec: infrav1.RunnerSpec{Image: moduleImage}},
		})
	})
	waitCount(t, s, mgr, "provisioned pools with their members", total, countOf(t, c, &infrav1.TerraformMachinePoolList{}, poolProvisioned))
	created := time.Since(began)
	m1 := scrape(t, mgr.metricsURL)

	// Refreshes back off while members stay: after s.poolSettle the
	// window sees an idle pool's steady rate.
	time.Sleep(s.poolSettle)
	refreshes0 := nd.refreshJobs()
	idle0, idle1, hwm, rss := idleWindow(t, s, mgr)
	refreshes := nd.refreshJobs() - refreshes0

	idle := requests(idle0, idle1)
	poolIdle := idle - baseline*s.idle.Minutes()
	perHour := poolIdle / float64(total) / s.idle.Hours()
	mb := func(b float64) float64 { return b / (1 << 20) }
	perPool := func(v float64) float64 { return v / float64(total) }
	return []string{
		fmt.Sprintf("scale: N=%d × %d pools (%d members each) create→provisioned %s: per pool %.1f requests (%s), %.1f pool reconciles; manager CPU %.1fs; conflicts (409) %.0f, pool reconcile errors %.0f",
			s.n, s.pools, poolMembers, created.Round(time.Second), perPool(requests(m0, m1)), formatCounts(byMethod(m0, m1)),
			perPool(reconciles(m0, m1, "terraformmachinepool")), cpu(m0, m1),
			m1.sum("rest_client_requests_total", `code="409"`)-m0.sum("rest_client_requests_total", `code="409"`),
			idle1.sum("controller_runtime_reconcile_errors_total", `controller="terraformmachinepool"`)),
		fmt.Sprintf("scale: N=%d × %d pools idle %s, %s after they were provisioned (membership refresh at the defaults): %.0f requests (%s), %.0f pool reconciles, %d refresh Jobs (%.1f per pool per hour); less the objects before at %.1f requests a minute: %.0f requests per pool per hour",
			s.n, s.pools, s.idle, s.poolSettle, idle, formatCounts(byMethod(idle0, idle1)), reconciles(idle0, idle1, "terraformmachinepool"),
			refreshes, float64(refreshes)/float64(total)/s.idle.Hours(), baseline, perHour),
		fmt.Sprintf("scale: N=%d × %d pools memory VmHWM=%.0f MB VmRSS=%.0f MB heap in use=%.0f MB",
			s.n, s.pools, mb(float64(hwm)), mb(float64(rss)), mb(idle1.sum("go_memstats_heap_inuse_bytes"))),
	}
}

// poolProvisioned: the pool applied, published its members, and has
// nothing running; its status is current.
func poolProvisioned(p *infrav1.TerraformMachinePool) bool {
	c := meta.FindStatusCondition(p.Status.Conditions, infrav1.ConditionReady)
	return p.Status.Ready && len(p.Spec.ProviderIDList) == poolMembers && p.Status.Replicas == poolMembers &&
		p.Status.ActiveJob == nil && p.Status.ObservedGeneration == p.Generation && c != nil && c.Status == metav1.ConditionTrue
}
