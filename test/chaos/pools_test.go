package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/terraformmachinepool"
)

// The TerraformMachinePool kind under the same faults: a change of its
// cluster's exports that replaces the pool's placement waits as an
// ExportsChange plan, under Automatic, and is applied only once that plan
// is approved, with --allow-deletes-hash naming the approved input set;
// then the pool is destroyed. As for machines, Cluster API's controllers
// do not run: the flow sets what they would.
const invExportsChange = "exports-change-applied-once-approved"

// invRotationOnly: under Manual, nothing beyond rotated bootstrap data
// applies without an approval (pool-bootstrap-rotation).
const invRotationOnly = "no-change-beyond-rotated-data-unapproved"

func init() {
	invariants = append(invariants, invExportsChange, invRotationOnly)
	flows = append(flows, poolFlow, rotationFlow)
}

// driftedContent is what pool-bootstrap-rotation writes into a member's
// file behind terraform's back.
const driftedContent = "edited outside terraform"

var rotationFlow = &flow{
	// A pool provisioned under Automatic, switched to Manual; one member
	// drifts (its file edited outside terraform); the faulted part: the
	// bootstrap data rotates, the Job that was to apply it finds the
	// drift and applies nothing, a plan of the change waits, is approved
	// and applied (the drift undone, the data rotated).
	name: "pool-bootstrap-rotation",
	setup: func(r *run) error {
		if err := poolProvisioned(r); err != nil {
			return err
		}
		p := &infrav1.TerraformMachinePool{ObjectMeta: metav1.ObjectMeta{Name: poolName, Namespace: r.ns}}
		if err := r.f.env.Client.Patch(r.ctx, p, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"applyPolicy":"Manual"}}`))); err != nil {
			return err
		}
		r.manualFrom = rv(p)
		// As a bootstrap provider makes it: labelled with the cluster
		// and controller-owned (here by the MachinePool), so its data
		// rotates without approval.
		var mp clusterv1.MachinePool
		if err := r.f.env.Client.Get(r.ctx, client.ObjectKey{Namespace: r.ns, Name: poolName}, &mp); err != nil {
			return err
		}
		owned := fmt.Sprintf(`{"metadata":{"labels":{%q:%q},"ownerReferences":[{"apiVersion":%q,"kind":"MachinePool","name":%q,"uid":%q,"controller":true}]}}`,
			clusterv1.ClusterNameLabel, objectName, clusterv1.GroupVersion.String(), mp.Name, mp.UID)
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: bootstrapSecret, Namespace: r.ns}}
		if err := r.f.env.Client.Patch(r.ctx, secret, client.RawPatch(types.MergePatchType, []byte(owned))); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(r.f.files, r.ns, poolName+"-0.txt"), []byte(driftedContent), 0o644)
	},
	act: func(r *run) error {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: bootstrapSecret, Namespace: r.ns}}
		if err := r.f.env.Client.Patch(r.ctx, secret, client.RawPatch(types.MergePatchType,
			[]byte(`{"stringData":{"value":"`+bootstrapCanary+`-ROTATED"}}`))); err != nil {
			return err
		}
		p, err := waitFor(r, poolSubject, "a plan of the rotation waits", func(p *infrav1.TerraformMachinePool) bool {
			return p != nil && p.Status.PendingPlanRef != nil && p.Status.Plan != nil && p.Status.Plan.Reason == infrav1.ReasonManual
		})
		if err != nil {
			return err
		}
		// Before any approval the drift is still there: what was applied
		// without one did not undo it.
		content, err := os.ReadFile(filepath.Join(r.f.files, r.ns, poolName+"-0.txt"))
		r.driftUndoneUnapproved = err != nil || string(content) != driftedContent
		if err := r.approvePlan(p); err != nil {
			return err
		}
		_, err = waitFor(r, poolSubject, "the rotation applied, the drift undone", func(p *infrav1.TerraformMachinePool) bool {
			b, err := os.ReadFile(filepath.Join(r.f.files, r.ns, "."+poolName+"-1.txt.captftest-secret"))
			return p != nil && ready(p) && p.Status.Plan == nil && p.Status.ActiveJob == nil && err == nil && string(b) == bootstrapCanary+"-ROTATED"
		})
		return err
	},
	phases:     map[infrav1.PlanPhase]int{infrav1.PlanApplied: 1},
	webhook:    true,
	of:         &poolSubject,
	clusterAPI: true,
	check: func(r *run) []violation {
		var out []violation
		if r.driftUndoneUnapproved {
			out = append(out, violation{invRotationOnly, "the drifted member was undone before any approval: the rotation applied more than the rotated data"})
		}
		all, _, _ := r.obs.snapshot()
		for _, j := range poolSubject.jobs(all) {
			if j.appliedInputs && j.succeeded {
				out = append(out, violation{invRotationOnly, fmt.Sprintf("apply Job %s applied the rotation without approval while a member had drifted", j.name)})
			}
		}
		return out
	},
}

const (
	// poolImage holds the controller tests' pool module: a captftest
	// file per member, whose secret is the bootstrap data, its members
	// read with a data source, and a placement file named for the
	// cluster's zone, which a new zone replaces.
	poolImage = "example.test/pool:1"
	// poolName is the run's MachinePool and TerraformMachinePool.
	poolName = "chaos-pool"
	// poolMembers is the MachinePool's replicas.
	poolMembers = 2
)

// poolSubject is the run's TerraformMachinePool.
var poolSubject = subject{terraformmachinepool.Kind, poolName}

var poolFlow = &flow{
	// A TerraformCluster applied, its Cluster provisioned, and a pool of
	// it provisioned under Automatic; the faulted part: the cluster's
	// exports change, the pool's ExportsChange plan waits, is approved
	// and applied; then the pool is deleted and destroyed.
	name:  "pool-exports-change",
	setup: poolProvisioned,
	act: func(r *run) error {
		at, err := r.setExports("zone-b")
		if err != nil {
			return err
		}
		r.exportsChanged = at
		p, err := waitFor(r, poolSubject, "the pool's ExportsChange plan waits", func(p *infrav1.TerraformMachinePool) bool {
			return p != nil && p.Status.PendingPlanRef != nil && p.Status.Plan != nil && p.Status.Plan.Reason == infrav1.ReasonExportsChange
		})
		if err != nil {
			return err
		}
		if err := r.approvePlan(p); err != nil {
			return err
		}
		if _, err := waitFor(r, poolSubject, "the exports change applied", func(p *infrav1.TerraformMachinePool) bool {
			_, err := os.Stat(filepath.Join(r.f.files, r.ns+"-placement", "zone-b.txt"))
			return p != nil && ready(p) && p.Status.Plan == nil && p.Status.ActiveJob == nil && err == nil
		}); err != nil {
			return err
		}
		if err := r.f.env.Client.Delete(r.ctx, &infrav1.TerraformMachinePool{ObjectMeta: metav1.ObjectMeta{Name: poolName, Namespace: r.ns}}); err != nil {
			return err
		}
		_, err = waitFor(r, poolSubject, "the pool destroyed and released", gone[*infrav1.TerraformMachinePool])
		return err
	},
	phases:     map[infrav1.PlanPhase]int{infrav1.PlanApplied: 1},
	webhook:    true,
	of:         &poolSubject,
	clusterAPI: true,
	check:      func(r *run) []violation { return r.checkPool() },
}

// poolProvisioned is clusterProvisioned, then a MachinePool of the cluster
// with its bootstrap data and the TerraformMachinePool it controller-owns,
// under Automatic, provisioned with its members.
func poolProvisioned(r *run) error {
	if err := clusterProvisioned(r); err != nil {
		return err
	}
	c := r.f.env.Client
	labels := map[string]string{clusterv1.ClusterNameLabel: objectName}
	mp := &clusterv1.MachinePool{
		ObjectMeta: metav1.ObjectMeta{Name: poolName, Namespace: r.ns, Labels: labels},
		Spec: clusterv1.MachinePoolSpec{
			ClusterName: objectName,
			Replicas:    ptr.To(int32(poolMembers)),
			Template: clusterv1.MachineTemplateSpec{Spec: clusterv1.MachineSpec{
				ClusterName: objectName,
				Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To(bootstrapSecret)},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{
					APIGroup: infrav1.GroupVersion.Group, Kind: poolSubject.kind.Name(), Name: poolName,
				},
			}},
		},
	}
	if err := c.Create(r.ctx, mp); err != nil {
		return err
	}
	p := &infrav1.TerraformMachinePool{
		ObjectMeta: metav1.ObjectMeta{
			Name: poolName, Namespace: r.ns, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: clusterv1.GroupVersion.String(), Kind: "MachinePool", Name: mp.Name, UID: mp.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: infrav1.TerraformMachinePoolSpec{
			RunnerSpec: infrav1.RunnerSpec{
				Image:       poolImage,
				ApplyPolicy: infrav1.ApplyAutomatic,
				Variables:   []infrav1.Variable{{Name: "dir", Value: &apiextensionsv1.JSON{Raw: []byte(strconv.Quote(r.ns))}}},
				Drift:       infrav1.DriftSpec{IntervalSeconds: ptr.To(int32(0))},
			},
			// Refreshes only after applies: the flow counts the Jobs.
			Membership: infrav1.MembershipSpec{IntervalSeconds: ptr.To(int32(86400))},
		},
	}
	if err := c.Create(r.ctx, p); err != nil {
		return err
	}
	r.automaticFrom = rv(p)
	if _, err := waitFor(r, poolSubject, "the pool applied, its members published", func(p *infrav1.TerraformMachinePool) bool {
		return p != nil && ready(p) && len(p.Spec.ProviderIDList) == poolMembers && p.Status.ActiveJob == nil
	}); err != nil {
		return err
	}
	secret, err := os.ReadFile(filepath.Join(r.f.files, r.ns, "."+poolName+"-0.txt.captftest-secret"))
	r.bootstrapReached = err == nil && string(secret) == bootstrapCanary
	return nil
}

// checkPool: after the exports changed, the one apply that succeeded
// carried --allow-deletes-hash (the generic invariant checks that an
// approval of exactly that input set came before it) and replaced the
// placement; the destroy removed the pool's files; nothing of the pool
// is left; the bootstrap data reached nothing but the module.
func (r *run) checkPool() []violation {
	var out []violation
	add := func(inv, format string, args ...any) {
		out = append(out, violation{inv, fmt.Sprintf(format, args...)})
	}
	all, _, _ := r.obs.snapshot()
	jobs := poolSubject.jobs(all)
	allowed := 0
	for _, j := range jobs {
		if j.operation != string(infrav1.OperationApply) || !j.succeeded || j.created < r.exportsChanged {
			continue
		}
		if j.allowDeletes == "" {
			add(invExportsChange, "apply Job %s succeeded after the exports changed without --allow-deletes-hash: the change replaces the placement, which only an approval allows", j.name)
			continue
		}
		allowed++
	}
	if allowed != 1 {
		add(invExportsChange, "%d apply Jobs applied the approved exports change, want 1", allowed)
	}
	for _, dir := range []string{r.ns, r.ns + "-placement"} {
		entries, err := os.ReadDir(filepath.Join(r.f.files, dir))
		if err != nil && !os.IsNotExist(err) {
			add(invDestroyed, "read %s: %v", dir, err)
		}
		for _, e := range entries {
			add(invDestroyed, "%s/%s, which the pool's applies made, is left", dir, e.Name())
		}
	}
	out = append(out, r.checkNothingLeft(poolSubject, all)...)
	if !r.bootstrapReached {
		add(invBootstrapData, "the bootstrap data did not reach the module: looking for it elsewhere proves nothing")
	}
	return append(out, r.checkKeptSecret(invBootstrapData, bootstrapCanary)...)
}
