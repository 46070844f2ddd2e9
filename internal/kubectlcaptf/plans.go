package kubectlcaptf

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
)

func (o *options) plansCommand() *cobra.Command {
	var allNamespaces, pending bool
	var selector string
	cmd := &cobra.Command{
		Use:   "plans",
		Short: "List TerraformPlans: phase, target, reason, changes, approver, age",
		Example: "  kubectl captf plans -A --pending\n" +
			"  kubectl captf plans -n infra -l captf.io/destructive=true -o json",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, ns, err := o.client()
			if err != nil {
				return err
			}
			sel, err := labels.Parse(selector)
			if err != nil {
				return fmt.Errorf("--selector: %w", err)
			}
			if pending {
				req, err := labels.NewRequirement(infrav1.LabelPlanPhase, "=", []string{string(infrav1.PlanPending)})
				if err != nil {
					return err
				}
				sel = sel.Add(*req)
			}
			opts := []client.ListOption{client.MatchingLabelsSelector{Selector: sel}}
			if !allNamespaces {
				opts = append(opts, client.InNamespace(ns))
			}
			var list infrav1.TerraformPlanList
			if err := c.List(cmd.Context(), &list, opts...); err != nil {
				return fmt.Errorf("list TerraformPlans: %w", err)
			}
			plans := make([]Plan, 0, len(list.Items))
			for i := range list.Items {
				plans = append(plans, newPlan(&list.Items[i]))
			}
			sortPlans(plans)
			if o.structured() {
				return o.writeObjects(plans)
			}
			if len(plans) == 0 {
				where := "in namespace " + ns
				if allNamespaces {
					where = "in any namespace"
				}
				_, err := fmt.Fprintf(o.streams.ErrOut, "No TerraformPlans found %s.\n", where)
				return err
			}
			return writeTable(o.streams.Out, plans, allNamespaces, o.now())
		},
	}
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "list the plans of every namespace")
	cmd.Flags().BoolVar(&pending, "pending", false, "only plans that wait for an approval (label "+infrav1.LabelPlanPhase+"=Pending)")
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "a label selector, as kubectl get -l takes it")
	return cmd
}

// sortPlans orders plans by namespace, then oldest first, so the plan
// that waits longest comes first.
func sortPlans(plans []Plan) {
	slices.SortStableFunc(plans, func(a, b Plan) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}
