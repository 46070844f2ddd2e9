package kubectlcaptf

import (
	"github.com/spf13/cobra"
)

func (o *options) showCommand() *cobra.Command {
	return &cobra.Command{
		Use:               "show PLAN",
		Short:             "Show what a TerraformPlan changes: summary, resources, reason, phase, age",
		Example:           "  kubectl captf show demo-3f9a1c07be -n default",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completePlans,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ns, err := o.client()
			if err != nil {
				return err
			}
			p, err := getPlan(cmd.Context(), c, ns, args[0])
			if err != nil {
				return err
			}
			if o.structured() {
				return o.writeObjects(newPlan(p))
			}
			return writeDetail(o.streams.Out, newPlan(p), o.now())
		},
	}
}
