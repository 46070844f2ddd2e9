package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/terraformmachinepoolmachine"
)

// invReplacedOnceApproved: a pool's member whose object was deleted (as
// Cluster API does when its Machine is deleted) is replaced only by an
// approved plan under Manual, once (pool-member-replace).
const invReplacedOnceApproved = "member-replaced-once-approved"

func init() {
	invariants = append(invariants, invReplacedOnceApproved)
	flows = append(flows, replaceFlow)
}

// replacedMember is the file of the member pool-member-replace replaces.
const replacedMember = poolName + "-0.txt"

var replaceFlow = &flow{
	// A pool provisioned under Automatic, its module naming each
	// member's resource (member_addresses), switched to Manual; the
	// faulted part: a member's object is deleted (Cluster API's Machine
	// controller deletes it with its Machine; its controllers do not run
	// here), a plan that replaces the member waits, is approved and
	// applied, and the object goes and is made again.
	name: "pool-member-replace",
	setup: func(r *run) error {
		if err := poolProvisioned(r); err != nil {
			return err
		}
		c := r.f.env.Client
		p := &infrav1.TerraformMachinePool{ObjectMeta: metav1.ObjectMeta{Name: poolName, Namespace: r.ns}}
		if err := c.Get(r.ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		before := p.DeepCopy()
		p.Spec.Variables = append(p.Spec.Variables, infrav1.Variable{Name: "member_addresses", Value: &apiextensionsv1.JSON{Raw: []byte("true")}})
		if err := c.Patch(r.ctx, p, client.MergeFrom(before)); err != nil {
			return err
		}
		p, err := waitFor(r, poolSubject, "the pool replaceable, its members' objects made", func(p *infrav1.TerraformMachinePool) bool {
			return p != nil && ready(p) && p.Status.ActiveJob == nil && meta.IsStatusConditionTrue(p.Status.Conditions, infrav1.ConditionMembersReplaceable) &&
				r.memberObject(p) != nil
		})
		if err != nil {
			return err
		}
		if err := c.Patch(r.ctx, p, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"applyPolicy":"Manual"}}`))); err != nil {
			return err
		}
		r.manualFrom = rv(p)
		return nil
	},
	act: func(r *run) error {
		file := filepath.Join(r.f.files, r.ns, replacedMember)
		before, err := os.Stat(file)
		if err != nil {
			return err
		}
		p, err := waitFor(r, poolSubject, "the member's object", func(p *infrav1.TerraformMachinePool) bool { return p != nil && r.memberObject(p) != nil })
		if err != nil {
			return err
		}
		m := r.memberObject(p)
		if err := r.f.env.Client.Delete(r.ctx, m); err != nil {
			return err
		}
		p, err = waitFor(r, poolSubject, "a plan of the replacement waits", func(p *infrav1.TerraformMachinePool) bool {
			return p != nil && p.Status.PendingPlanRef != nil && p.Status.Plan != nil && p.Status.Plan.Reason == infrav1.ReasonManual
		})
		if err != nil {
			return err
		}
		info, err := os.Stat(file)
		r.replacedUnapproved = err != nil || !info.ModTime().Equal(before.ModTime())
		if err := r.approvePlan(p); err != nil {
			return err
		}
		_, err = waitFor(r, poolSubject, "the member replaced, its object made again", func(p *infrav1.TerraformMachinePool) bool {
			now := r.memberObject(p)
			info, err := os.Stat(file)
			return p != nil && ready(p) && p.Status.Plan == nil && p.Status.ActiveJob == nil && len(p.Status.ReplacedMembers) == 0 &&
				now != nil && now.UID != m.UID && now.DeletionTimestamp == nil && err == nil && info.ModTime().After(before.ModTime())
		})
		return err
	},
	phases:     map[infrav1.PlanPhase]int{infrav1.PlanApplied: 1},
	webhook:    true,
	of:         &poolSubject,
	clusterAPI: true,
	check: func(r *run) []violation {
		var out []violation
		if r.replacedUnapproved {
			out = append(out, violation{invReplacedOnceApproved, "the member's resource changed before the plan that replaces it was approved"})
		}
		all, _, _ := r.obs.snapshot()
		replaced := 0
		for _, j := range poolSubject.jobs(all) {
			if !j.replaces || j.operation != string(infrav1.OperationApply) || !j.succeeded {
				continue
			}
			if j.expect == "" {
				out = append(out, violation{invReplacedOnceApproved, fmt.Sprintf("apply Job %s replaced a member without an approved plan", j.name)})
			}
			replaced++
		}
		if replaced != 1 {
			out = append(out, violation{invReplacedOnceApproved, fmt.Sprintf("%d apply Jobs replaced the member, want 1", replaced)})
		}
		return out
	},
}

// memberObject is the member object of the pool p for replacedMember's
// provider ID, or nil (p nil, or not there).
func (r *run) memberObject(p *infrav1.TerraformMachinePool) *infrav1.TerraformMachinePoolMachine {
	if p == nil {
		return nil
	}
	id := "captftest:///" + r.ns + "/" + replacedMember
	m := &infrav1.TerraformMachinePoolMachine{}
	ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
	defer cancel()
	if err := r.f.env.Client.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: terraformmachinepoolmachine.Name(p.Name, id)}, m); err != nil {
		return nil
	}
	return m
}
