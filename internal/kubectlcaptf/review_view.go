package kubectlcaptf

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/pkg/fingerprint"
)

// waitingRow is one plan that waits for an approval, as the review page's
// list shows it: a TerraformPlan, or the plan a TerraformMachine holds in
// status.plan (a machine takes no TerraformPlan).
type waitingRow struct {
	Namespace, Name string
	// Kind and Target name the object the plan was made for.
	Kind, Target string
	Reason       infrav1.PlanReason
	Created      time.Time
	Age          string
	Counts       counts
	Outputs      int32
	// Path is the plan page's path, without the token.
	Path string
}

// counts are a plan's resource changes by action.
type counts struct {
	Create, Update, Replace, Delete int32
}

// Destructive reports whether the plan deletes or replaces a resource.
func (c counts) Destructive() bool { return c.Replace+c.Delete > 0 }

// planRow is the row of a TerraformPlan.
func planRow(p *infrav1.TerraformPlan, now time.Time) waitingRow {
	s := p.Spec.Summary
	return waitingRow{
		Namespace: p.Namespace, Name: p.Name,
		Kind: p.Spec.TargetRef.Kind, Target: p.Spec.TargetRef.Name,
		Reason: p.Spec.Reason, Created: p.CreationTimestamp.UTC(), Age: age(p.CreationTimestamp.UTC(), now),
		Counts:  counts{Create: s.Create, Update: s.Update, Replace: s.Replace, Delete: s.Delete},
		Outputs: s.OutputChanges,
		Path:    planPath(p.Namespace, p.Name),
	}
}

// machineRow is the row of the plan a TerraformMachine holds in status.
// status.plan counts a replacement as one add and one destroy; the
// entries' labels tell replacements apart.
func machineRow(m *infrav1.TerraformMachine, now time.Time) waitingRow {
	p := m.Status.Plan
	var replace int32
	for _, r := range parseResources(p.Resources) {
		if r.Action == "replace" {
			replace++
		}
	}
	return waitingRow{
		Namespace: m.Namespace, Name: m.Name,
		Kind: "TerraformMachine", Target: m.Name,
		Reason: cmp.Or(p.Reason, infrav1.ReasonManual), Created: p.CreatedAt.UTC(), Age: age(p.CreatedAt.UTC(), now),
		Counts:  counts{Create: p.Add - replace, Update: p.Change, Replace: replace, Delete: p.Destroy - replace},
		Outputs: p.OutputChanges,
		Path:    machinePath(m.Namespace, m.Name),
	}
}

func planPath(ns, name string) string {
	return "/plans/" + url.PathEscape(ns) + "/" + url.PathEscape(name)
}

func machinePath(ns, name string) string {
	return "/machines/" + url.PathEscape(ns) + "/" + url.PathEscape(name)
}

// sortRows orders rows as kubectl captf plans does: by namespace, then
// oldest first.
func sortRows(rows []waitingRow) {
	slices.SortStableFunc(rows, func(a, b waitingRow) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), a.Created.Compare(b.Created),
			strings.Compare(a.Kind, b.Kind), strings.Compare(a.Name, b.Name))
	})
}

// resourceRow is one changed resource of a plan: its address, what the
// plan does to it, and the provider its type names. A plan records no
// value, so none can be shown.
type resourceRow struct {
	Address string
	// Labels are the plan's labels of the change as recorded ("replace",
	// "create, import", …); Action is the first of them.
	Labels, Action string
	// Provider is the local name terraform infers from the resource type
	// (aws_instance → aws, terraform_data → terraform).
	Provider    string
	Destructive bool
	// Attributes names the top-level attributes the change changes, from
	// the plan Job's log ("" when it does not say).
	Attributes string
}

// parseResources reads entries "<address> (<labels>)" into rows, the
// destructive ones first, each group in the recorded order (by address).
func parseResources(entries []string) []resourceRow {
	rows := make([]resourceRow, 0, len(entries))
	for _, e := range entries {
		r := resourceRow{Address: e}
		if i := strings.LastIndex(e, " ("); i > 0 && strings.HasSuffix(e, ")") {
			r.Address, r.Labels = e[:i], e[i+2:len(e)-1]
		}
		r.Action, _, _ = strings.Cut(r.Labels, ",")
		r.Action = strings.TrimSpace(r.Action)
		r.Destructive = r.Action == "replace" || r.Action == "delete"
		r.Provider = providerOf(r.Address)
		rows = append(rows, r)
	}
	slices.SortStableFunc(rows, func(a, b resourceRow) int {
		switch {
		case a.Destructive == b.Destructive:
			return 0
		case a.Destructive:
			return -1
		}
		return 1
	})
	return rows
}

// providerOf is the provider's local name terraform infers from the type
// of the resource at address: the type up to its first underscore.
func providerOf(address string) string {
	parts := strings.Split(address, ".")
	for i := 0; i < len(parts); i++ {
		switch {
		case parts[i] == "module":
			i++ // the module's name
		case parts[i] == "data" && i+1 < len(parts):
			return typePrefix(parts[i+1])
		default:
			return typePrefix(parts[i])
		}
	}
	return ""
}

func typePrefix(typ string) string {
	p, _, _ := strings.Cut(typ, "_")
	return p
}

// resourceTable is the resources a plan page shows, with the attributes
// each change changes when the plan Job's log says.
type resourceTable struct {
	Resources []resourceRow
	Truncated bool
	// ShowAttributes: the plan Job's log said which attributes change.
	ShowAttributes bool
}

// planPage is what a TerraformPlan's page shows.
type planPage struct {
	Row        waitingRow
	Phase      infrav1.PlanPhase
	Approved   bool
	ApprovedBy string
	Status     string
	PlanHash   string
	InputsHash string
	resourceTable
	Destructive int
	Command     string
	// Approvable is set while the plan waits: the page offers Approve.
	Approvable bool
	Recent     []recentPlan
	// LogCommand prints terraform's own rendering of the plan.
	LogCommand string
	// PlanLog is the plan Job's log; ApplyLog the apply Job's, once the
	// plan is approved. The server reads them; newPlanPage names them.
	PlanLog, ApplyLog jobLogView
	plan              *infrav1.TerraformPlan
}

// jobLogView is a runner Job's log as a page shows it: up to logLimit
// bytes of it, or why it cannot be shown.
type jobLogView struct {
	// Test names the log on the page (data-test).
	Test  string
	Text  string
	Cut   bool
	Error string
	// Command prints the whole log.
	Command string
}

// logLimit is how much of a log a page shows: kubectl captf logs prints
// the rest.
const logLimit = 1 << 20

// recentPlan is an earlier (or later) plan of the same target.
type recentPlan struct {
	Name, Path, Age string
	Phase           infrav1.PlanPhase
	Changes         string
	ApprovedBy      string
	Current         bool
}

// newPlanPage fills the page of p; recent are the plans of the namespace.
func newPlanPage(p *infrav1.TerraformPlan, recent []infrav1.TerraformPlan, now time.Time) planPage {
	phase := phaseOf(p)
	page := planPage{
		Row: planRow(p, now), Phase: phase, Approved: p.Spec.Approved, ApprovedBy: p.Spec.ApprovedBy,
		Status:   planStatus(p),
		PlanHash: p.Spec.PlanHash, InputsHash: p.Spec.InputsHash,
		resourceTable: resourceTable{Resources: parseResources(p.Spec.Summary.Resources)},
		Command:       fmt.Sprintf("kubectl captf approve %s -n %s --plan-hash %s", p.Name, p.Namespace, p.Spec.PlanHash),
		Approvable:    !p.Spec.Approved && !phase.Terminal(),
		LogCommand:    fmt.Sprintf("kubectl captf logs %s -n %s", p.Name, p.Namespace),
	}
	page.plan = p
	page.PlanLog = jobLogView{Test: "plan-log", Command: page.LogCommand}
	page.ApplyLog = jobLogView{Test: "apply-log", Command: page.LogCommand + " --apply"}
	page.Truncated = int32(len(page.Resources)) < p.Spec.Summary.Create+p.Spec.Summary.Update+p.Spec.Summary.Replace+p.Spec.Summary.Delete
	for _, r := range page.Resources {
		if r.Destructive {
			page.Destructive++
		}
	}
	var same []infrav1.TerraformPlan
	for _, o := range recent {
		if o.Spec.TargetRef == p.Spec.TargetRef {
			same = append(same, o)
		}
	}
	slices.SortFunc(same, func(a, b infrav1.TerraformPlan) int {
		return cmp.Or(b.CreationTimestamp.Compare(a.CreationTimestamp.Time), strings.Compare(b.Name, a.Name))
	})
	for _, o := range same[:min(len(same), 10)] {
		page.Recent = append(page.Recent, recentPlan{
			Name: o.Name, Path: planPath(o.Namespace, o.Name), Age: age(o.CreationTimestamp.UTC(), now),
			Phase: phaseOf(&o), Changes: changes(o.Spec.Summary), ApprovedBy: o.Spec.ApprovedBy, Current: o.Name == p.Name,
		})
	}
	return page
}

// planStatus says in a sentence where the plan is, from its phase and
// its conditions' reasons (never their messages, which the manager
// writes for a terminal).
func planStatus(p *infrav1.TerraformPlan) string {
	switch phaseOf(p) {
	case infrav1.PlanPending:
		return "Waiting for an approval."
	case infrav1.PlanApproved:
		return "Approved by " + p.Spec.ApprovedBy + ": the apply is due or running."
	case infrav1.PlanApplied:
		return "Applied: the apply planned exactly these changes and applied them."
	case infrav1.PlanFailed:
		return "Failed: the apply found other changes than the approved ones and applied nothing; a new plan waits."
	case infrav1.PlanSuperseded:
		return "Superseded: a newer plan replaced this one, or it became moot. It can no longer be approved."
	}
	if p.Spec.Approved {
		return "Approved by " + p.Spec.ApprovedBy + "; the manager has not acted on it yet."
	}
	return "The manager has not written the plan's status yet."
}

// setAttributes puts on each row of p the attributes changed names for
// its address and action.
func (p *resourceTable) setAttributes(changed []fingerprint.Attributes) {
	for i := range p.Resources {
		r := &p.Resources[i]
		for _, c := range changed {
			if c.Address == r.Address && c.Action == r.Action {
				r.Attributes = strings.Join(c.Names, ", ")
				p.ShowAttributes = true
			}
		}
	}
}

// machinePage is what the page of a TerraformMachine's plan shows: the
// plan that waits in status.plan, and the apply of an approved plan.
type machinePage struct {
	// Waiting: a plan waits in status.plan; the facts below are its.
	Waiting    bool
	Row        waitingRow
	PlanHash   string
	InputsHash string
	resourceTable
	Command string
	// Approvable is set while the annotation that approves the waiting
	// plan does not name its hash yet: the page offers Approve. Status
	// says where the waiting plan is.
	Approvable bool
	Status     string
	// Apply says how the apply of the approved plan stands, "" when none
	// runs or ran. The server fills it and the logs.
	Apply             string
	PlanLog, ApplyLog jobLogView
}

func newMachinePage(m *infrav1.TerraformMachine, now time.Time) machinePage {
	p := m.Status.Plan
	if p == nil {
		return machinePage{Row: waitingRow{Namespace: m.Namespace, Name: m.Name, Kind: "TerraformMachine", Target: m.Name,
			Path: machinePath(m.Namespace, m.Name)}, Status: "No plan waits for an approval now."}
	}
	annotation := approvalAnnotation(m)
	approved := m.Annotations[annotation] == p.PlanHash
	status := "Waiting for an approval."
	if approved {
		status = "Approved: the apply of " + p.PlanHash + " is due."
	}
	return machinePage{
		Waiting: true,
		Row:     machineRow(m, now), PlanHash: p.PlanHash, InputsHash: p.InputsHash,
		resourceTable: resourceTable{Resources: parseResources(p.Resources), Truncated: p.Truncated},
		Command:       fmt.Sprintf("kubectl annotate terraformmachine %s -n %s %s=%s --overwrite", m.Name, m.Namespace, annotation, p.PlanHash),
		Approvable:    !approved,
		Status:        status,
		PlanLog:       jobLogView{Test: "plan-log", Command: kubectlLogs(m.Namespace, p.Job)},
	}
}

// approvalAnnotation is the annotation that approves the plan waiting in
// m's status: the destructive-plan guard's own for a plan it stopped,
// captf.io/approve-plan for any other.
func approvalAnnotation(m *infrav1.TerraformMachine) string {
	if m.Status.Plan != nil && m.Status.Plan.Reason == infrav1.ReasonDestructive {
		return infrav1.AnnotationApproveDestructivePlan
	}
	return infrav1.AnnotationApprovePlan
}

// kubectlLogs is the command that prints the log of the runner Job
// ns/job.
func kubectlLogs(ns, job string) string {
	return fmt.Sprintf("kubectl logs job/%s -n %s -c %s", job, ns, infrav1.RunnerContainer)
}

// machineApplyJob is the Job status names that applies, or last
// applied, m: the one that runs, else the last that ran; "" for none.
func machineApplyJob(m *infrav1.TerraformMachine) string {
	st := m.Status
	if st.ActiveJob != nil {
		if st.ActiveJob.Operation == infrav1.OperationApply {
			return st.ActiveJob.Name
		}
		return ""
	}
	if st.LastRun != nil && st.LastRun.Operation == infrav1.OperationApply {
		return st.LastRun.Job
	}
	return ""
}

// applyStatus says in a sentence how the apply Job job of the approved
// plan hash stands, from m's status.
func applyStatus(m *infrav1.TerraformMachine, job, hash string) string {
	run := m.Status.LastRun
	switch {
	case m.Status.ActiveJob != nil || run == nil || run.Job != job:
		return "Approved: the apply of " + hash + " runs."
	case run.Succeeded:
		return "Applied: the apply of " + hash + " planned exactly the approved changes and applied them."
	case run.Error != nil && run.Error.Kind == infrav1.ErrorKindPlanChanged:
		return "Failed: the apply of " + hash + " found other changes than the approved ones and applied nothing."
	}
	return "Failed: the apply of " + hash + " did not succeed; the machine's conditions say why."
}
