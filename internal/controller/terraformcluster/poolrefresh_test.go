package terraformcluster

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
)

// TestPoolRefreshBacksOff: an idle pool's membership refreshes come less
// and less often while its members stay as they are (intervalSeconds 10,
// maxIntervalSeconds 40 here), and write no new state serial; while its
// MachinePool asks for other replicas than it has, they come every
// interval again, and a member made outside any apply reaches the list.
func TestPoolRefreshBacksOff(t *testing.T) {
	h := startMachines(t)
	ctx := context.Background()
	mp, p := h.startPool("calm", 2, func(s *infrav1.TerraformMachinePoolSpec) {
		s.Membership = infrav1.MembershipSpec{IntervalSeconds: ptr.To(int32(10)), MaxIntervalSeconds: ptr.To(int32(40))}
	})
	h.waitPool(p, "provisioned with 2 members", func(p *infrav1.TerraformMachinePool) bool {
		return p.Status.Ready && len(p.Spec.ProviderIDList) == 2 && p.Status.StateSerial != nil && p.Status.LastMembershipRefresh != nil
	})
	serial, changed := *p.Status.StateSerial, p.Status.MembershipChangedAt

	// refreshStarts lists the creation times of the pool's refresh Jobs.
	refreshStarts := func() []time.Time {
		var at []time.Time
		for _, j := range h.jobs(p) {
			if j.Labels[engine.LabelOperation] == string(infrav1.OperationRefresh) {
				at = append(at, j.CreationTimestamp.Time)
			}
		}
		slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
		return at
	}
	gaps := func(at []time.Time) (out []time.Duration) {
		for i := 1; i < len(at); i++ {
			out = append(out, at[i].Sub(at[i-1]).Round(time.Second))
		}
		return out
	}

	// Idle for 2½ minutes: at the interval alone, 10 or more refreshes.
	time.Sleep(150 * time.Second)
	idle := refreshStarts()
	g := gaps(idle)
	t.Logf("idle: %d refresh Jobs, gaps %v", len(idle), g)
	if len(idle) > 7 {
		t.Errorf("%d refresh Jobs in 2½ idle minutes (gaps %v), want them to come less often while nothing changes", len(idle), g)
	}
	if len(g) < 3 || g[len(g)-1] < 30*time.Second || g[len(g)-1] > 50*time.Second {
		t.Errorf("the gaps between refreshes %v: want the last near maxIntervalSeconds (40 s)", g)
	}
	if err := h.c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
		t.Fatal(err)
	}
	if *p.Status.StateSerial != serial || changed == nil || !p.Status.MembershipChangedAt.Equal(changed) {
		t.Errorf("after refreshes that found nothing: state serial %d (want %d), membershipChangedAt %v (want %v, the first apply's)", *p.Status.StateSerial, serial, p.Status.MembershipChangedAt, changed)
	}

	// An autoscaler owns the replicas and asks for 3: refreshes every
	// interval until a third member is there, made outside any apply.
	owned := mp.DeepCopy()
	owned.Annotations = map[string]string{clusterv1.ReplicasManagedByAnnotation: "external-autoscaler"}
	owned.Spec.Replicas = ptr.To(int32(3))
	if err := h.c.Patch(ctx, owned, client.MergeFrom(mp)); err != nil {
		t.Fatal(err)
	}
	asked := time.Now()
	h.waitPool(p, "two refreshes after the autoscaler asked for 3", func(*infrav1.TerraformMachinePool) bool {
		return len(refreshStarts()) >= len(idle)+2
	})
	if g := gaps(refreshStarts()[len(idle)-1:]); g[1] > 20*time.Second {
		t.Errorf("refresh gaps %v after the autoscaler asked for more replicas: want the second at about the interval (10 s)", g)
	}
	if err := os.WriteFile(filepath.Join(h.files, "calm", "calm-pool-2.txt"), []byte("made by an autoscaler"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.waitPool(p, "the autoscaled member", func(p *infrav1.TerraformMachinePool) bool {
		return len(p.Spec.ProviderIDList) == 3 && p.Status.Replicas == 3 && p.Status.MembershipChangedAt.After(changed.Time)
	})
	t.Logf("the autoscaled member reached the list %s after the autoscaler asked", time.Since(asked).Round(time.Second))
	for _, j := range h.jobs(p) {
		if op := j.Labels[engine.LabelOperation]; op != string(infrav1.OperationRefresh) && op != string(infrav1.OperationApply) {
			t.Errorf("%s Job %s, want applies and refreshes only", op, j.Name)
		}
	}
	var applies []batchv1.Job
	for _, j := range h.jobs(p) {
		if j.Labels[engine.LabelOperation] == string(infrav1.OperationApply) {
			applies = append(applies, j)
		}
	}
	if len(applies) != 1 {
		t.Errorf("%d apply Jobs, want the first alone", len(applies))
	}
}
