package kubectlcaptf

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
)

func (o *options) approveCommand() *cobra.Command {
	var expectHash string
	cmd := &cobra.Command{
		Use:   "approve PLAN",
		Short: "Approve a TerraformPlan in your own name",
		Long: "approve sets spec.approved to true and spec.approvedBy to your username, as the API server\n" +
			"reports it (the SelfSubjectReview API, what kubectl auth whoami shows). The admission\n" +
			"webhook accepts only your own name there. An approval cannot be withdrawn.",
		Example: "  kubectl captf approve demo-3f9a1c07be -n default\n" +
			"  kubectl captf approve demo-3f9a1c07be --plan-hash p2:9c1e…  # only if it is still this plan",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completePlans,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, ns, err := o.client()
			if err != nil {
				return err
			}
			p, user, err := approvePlan(ctx, c, ns, args[0], expectHash)
			if err != nil {
				return err
			}
			if o.structured() {
				return o.writeObjects(newPlan(p))
			}
			_, err = fmt.Fprintf(o.streams.Out, "TerraformPlan %s/%s approved by %s (%s/%s: %s, plan hash %s).\n",
				ns, p.Name, user, p.Spec.TargetRef.Kind, p.Spec.TargetRef.Name, changes(p.Spec.Summary), p.Spec.PlanHash)
			return err
		},
	}
	cmd.Flags().StringVar(&expectHash, "plan-hash", "", "approve only if the plan's spec.planHash is this value (the one you reviewed)")
	return cmd
}

// approvePlan approves the TerraformPlan ns/name as the requester, if its
// plan hash is expectHash (any hash when empty), and returns the plan and
// the requester's username. Approving a plan the requester already
// approved changes nothing; a plan approved by another, or finished, is an
// error, and so is a refusal of the API server, which says why.
func approvePlan(ctx context.Context, c client.Client, ns, name, expectHash string) (*infrav1.TerraformPlan, string, error) {
	p, err := getPlan(ctx, c, ns, name)
	if err != nil {
		return nil, "", err
	}
	if expectHash != "" && p.Spec.PlanHash != expectHash {
		return nil, "", fmt.Errorf("TerraformPlan %s/%s has plan hash %s, not %s: nothing approved", ns, p.Name, p.Spec.PlanHash, expectHash)
	}
	user, err := whoami(ctx, c)
	if err != nil {
		return nil, "", err
	}
	switch phase := phaseOf(p); {
	case p.Spec.Approved && p.Spec.ApprovedBy == user:
		// Approving twice is a no-op, so a script may retry.
	case p.Spec.Approved:
		return nil, "", fmt.Errorf("TerraformPlan %s/%s is already approved by %s; an approval cannot be changed", ns, p.Name, p.Spec.ApprovedBy)
	case phase.Terminal():
		return nil, "", fmt.Errorf("TerraformPlan %s/%s is %s and can no longer be approved; its target's current plan is in status.pendingPlanRef.name", ns, p.Name, phase)
	default:
		patch, err := json.Marshal(map[string]any{"spec": map[string]any{"approved": true, "approvedBy": user}})
		if err != nil {
			return nil, "", err
		}
		if err := c.Patch(ctx, p, client.RawPatch("application/merge-patch+json", patch)); err != nil {
			return nil, "", fmt.Errorf("approve TerraformPlan %s/%s: %w", ns, p.Name, err)
		}
	}
	return p, user, nil
}

// approveMachine approves the plan that waits in the status of the
// TerraformMachine ns/name, as the requester, if its plan hash is hash: it
// sets the approval annotation to the hash, as kubectl annotate does, and
// the manager applies that plan once. A plan that no longer waits or has
// another hash is an error, and so is a refusal of the API server, which
// says why.
func approveMachine(ctx context.Context, c client.Client, ns, name, hash string) error {
	var m infrav1.TerraformMachine
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &m); err != nil {
		return fmt.Errorf("TerraformMachine %s/%s: %w", ns, name, err)
	}
	switch p := m.Status.Plan; {
	case p == nil:
		return fmt.Errorf("TerraformMachine %s/%s has no plan waiting for an approval: nothing approved", ns, name)
	case p.PlanHash != hash:
		return fmt.Errorf("TerraformMachine %s/%s waits with plan hash %s, not %s: nothing approved", ns, name, p.PlanHash, hash)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{approvalAnnotation(&m): hash}}})
	if err != nil {
		return err
	}
	if err := c.Patch(ctx, &m, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("approve TerraformMachine %s/%s: %w", ns, name, err)
	}
	return nil
}

// whoami returns the requester's username as the API server knows it.
func whoami(ctx context.Context, c client.Client) (string, error) {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		return "", fmt.Errorf("ask the API server who you are (SelfSubjectReview): %w", err)
	}
	if review.Status.UserInfo.Username == "" {
		return "", errors.New("the API server did not say who you are (SelfSubjectReview returned no username)")
	}
	return review.Status.UserInfo.Username, nil
}
