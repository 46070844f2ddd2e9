package kubectlcaptf

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/terminal"
)

// Plan is one TerraformPlan as the plugin prints it with -o json|yaml (or
// --json): what a reviewer or a script needs, never a value.
type Plan struct {
	Namespace   string                      `json:"namespace"`
	Name        string                      `json:"name"`
	Target      infrav1.PlanTargetReference `json:"target"`
	Phase       infrav1.PlanPhase           `json:"phase,omitempty"`
	Reason      infrav1.PlanReason          `json:"reason"`
	Destructive bool                        `json:"destructive"`
	PlanHash    string                      `json:"planHash"`
	InputsHash  string                      `json:"inputsHash"`
	Summary     infrav1.PlanSummary         `json:"summary"`
	Approved    bool                        `json:"approved"`
	ApprovedBy  string                      `json:"approvedBy,omitempty"`
	Created     time.Time                   `json:"created"`
}

func newPlan(p *infrav1.TerraformPlan) Plan {
	return Plan{
		Namespace:   p.Namespace,
		Name:        p.Name,
		Target:      p.Spec.TargetRef,
		Phase:       phaseOf(p),
		Reason:      p.Spec.Reason,
		Destructive: p.Spec.Summary.Destructive(),
		PlanHash:    p.Spec.PlanHash,
		InputsHash:  p.Spec.InputsHash,
		Summary:     p.Spec.Summary,
		Approved:    p.Spec.Approved,
		ApprovedBy:  p.Spec.ApprovedBy,
		Created:     p.CreationTimestamp.UTC(),
	}
}

// phaseOf is status.phase, or the phase label while the manager has not
// written status yet (a new plan, or one that clusterctl move carried).
func phaseOf(p *infrav1.TerraformPlan) infrav1.PlanPhase {
	if p.Status.Phase != "" {
		return p.Status.Phase
	}
	return infrav1.PlanPhase(p.Labels[infrav1.LabelPlanPhase])
}

// changes is the summary in terraform's symbols: +create ~update
// -/+replace -delete.
func changes(s infrav1.PlanSummary) string {
	return fmt.Sprintf("+%d ~%d -/+%d -%d", s.Create, s.Update, s.Replace, s.Delete)
}

func age(created, now time.Time) string {
	if created.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(created))
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// forText is p with each string from the API server quoted when it holds a
// control character (terminal.Quote): the text output prints it, never
// acts on it. -o json and yaml escape it themselves.
func forText(p Plan) Plan {
	q := terminal.Quote
	p.Namespace, p.Name, p.ApprovedBy = q(p.Namespace), q(p.Name), q(p.ApprovedBy)
	p.Target.Kind, p.Target.Name = q(p.Target.Kind), q(p.Target.Name)
	p.Phase, p.Reason = infrav1.PlanPhase(q(string(p.Phase))), infrav1.PlanReason(q(string(p.Reason)))
	p.PlanHash, p.InputsHash = q(p.PlanHash), q(p.InputsHash)
	resources := make([]string, len(p.Summary.Resources))
	for i, r := range p.Summary.Resources {
		resources[i] = q(r)
	}
	p.Summary.Resources = resources
	return p
}

// writeTable prints plans as kubectl get does, with a NAMESPACE column
// when they come from every namespace.
func writeTable(w io.Writer, plans []Plan, allNamespaces bool, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	head := "NAME\tPHASE\tTARGET\tREASON\tCHANGES\tAPPROVED-BY\tAGE"
	if allNamespaces {
		head = "NAMESPACE\t" + head
	}
	fmt.Fprintln(tw, head)
	for _, p := range plans {
		p = forText(p)
		row := fmt.Sprintf("%s\t%s\t%s/%s\t%s\t%s\t%s\t%s", p.Name, orNone(string(p.Phase)),
			p.Target.Kind, p.Target.Name, p.Reason, changes(p.Summary), orNone(p.ApprovedBy), age(p.Created, now))
		if allNamespaces {
			row = p.Namespace + "\t" + row
		}
		fmt.Fprintln(tw, row)
	}
	return tw.Flush()
}

// writeDetail prints one plan for a reviewer: what it changes, why, and
// how to approve it.
func writeDetail(w io.Writer, p Plan, now time.Time) error {
	p = forText(p)
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 8, 1, ' ', 0)
	fmt.Fprintf(tw, "Name:\t%s\n", p.Name)
	fmt.Fprintf(tw, "Namespace:\t%s\n", p.Namespace)
	fmt.Fprintf(tw, "Target:\t%s/%s\n", p.Target.Kind, p.Target.Name)
	fmt.Fprintf(tw, "Phase:\t%s\n", orNone(string(p.Phase)))
	fmt.Fprintf(tw, "Reason:\t%s\n", p.Reason)
	fmt.Fprintf(tw, "Age:\t%s\n", age(p.Created, now))
	fmt.Fprintf(tw, "Plan hash:\t%s\n", p.PlanHash)
	destructive := ""
	if p.Destructive {
		destructive = " (destructive)"
	}
	fmt.Fprintf(tw, "Changes:\t%d to create, %d to update, %d to replace, %d to delete%s\n",
		p.Summary.Create, p.Summary.Update, p.Summary.Replace, p.Summary.Delete, destructive)
	if p.Summary.OutputChanges > 0 {
		fmt.Fprintf(tw, "Outputs:\t%d to change\n", p.Summary.OutputChanges)
	}
	switch {
	case p.Approved:
		fmt.Fprintf(tw, "Approved by:\t%s\n", p.ApprovedBy)
	case p.Phase.Terminal():
		fmt.Fprintf(tw, "Approved:\tno; the plan is finished and can no longer be approved\n")
	default:
		fmt.Fprintf(tw, "Approved:\tno; to approve: kubectl captf approve %s -n %s\n", p.Name, p.Namespace)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(p.Summary.Resources) > 0 {
		b.WriteString("Resources:\n")
		for _, r := range p.Summary.Resources {
			b.WriteString("  " + r + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
