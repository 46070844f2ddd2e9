package kubectlcaptf

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
)

func (o *options) logsCommand() *cobra.Command {
	var req logRequest
	cmd := &cobra.Command{
		Use:   "logs PLAN",
		Short: "Print terraform's output for a TerraformPlan: the log of the Job that made the plan, or of the one that applied it",
		Long: "kubectl captf logs prints the log of the runner Job that made the plan: terraform's own\n" +
			"rendering of it, with the values terraform shows (the runner hides every value the plan\n" +
			"marks sensitive). Read it before you approve. With --apply it prints the log of the Job that\n" +
			"applied the plan. A log lives as long as the Job's pod.",
		Example:           "  kubectl captf logs demo-3f9a1c07be -n default\n  kubectl captf logs demo-3f9a1c07be -n default --apply",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completePlans,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.structured() {
				return fmt.Errorf("logs prints text only: %s does not apply", o.outputFlag())
			}
			c, ns, err := o.client()
			if err != nil {
				return err
			}
			cfg, err := o.restConfig()
			if err != nil {
				return err
			}
			// The log streams for as long as it takes: Ctrl-C ends it.
			cfg.Timeout = 0
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return fmt.Errorf("API client: %w", err)
			}
			return planLog(cmd.Context(), c, cs, ns, args[0], req, o.streams.Out)
		},
	}
	cmd.Flags().BoolVarP(&req.follow, "follow", "f", false, "keep printing while the Job runs")
	cmd.Flags().BoolVar(&req.apply, "apply", false, "the log of the Job that applied the plan, not of the one that made it")
	return cmd
}

// logRequest says which log of a TerraformPlan to read, and how much.
type logRequest struct {
	// apply: the apply Job's log, not the plan Job's.
	apply, follow bool
	// limitBytes, when not 0, reads at most that many bytes from the start
	// (of the tail, with tailLines).
	limitBytes int64
	// tailLines, when not 0, reads the last lines only.
	tailLines int64
}

// errNoApplyJob says a TerraformPlan has no apply Job to read a log of.
var errNoApplyJob = errors.New("no apply Job")

// planLog copies the log of the runner container of the plan Job (or
// with req.apply the apply Job) of the TerraformPlan ns/name to out.
func planLog(ctx context.Context, c client.Client, cs kubernetes.Interface, ns, name string, req logRequest, out io.Writer) error {
	p, err := getPlan(ctx, c, ns, name)
	if err != nil {
		return err
	}
	return jobLog(ctx, c, cs, p, req, out)
}

// jobLog is planLog of the TerraformPlan p.
func jobLog(ctx context.Context, c client.Client, cs kubernetes.Interface, p *infrav1.TerraformPlan, req logRequest, out io.Writer) error {
	var pod *corev1.Pod
	var err error
	if req.apply {
		pod, err = applyPod(ctx, c, p)
	} else {
		pod, err = planPod(ctx, c, p)
	}
	if err != nil {
		return err
	}
	return podLog(ctx, cs, pod, "TerraformPlan "+p.Name, req, out)
}

// podLog copies the log of the runner container of pod, a pod of a Job
// of owner, to out.
func podLog(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, owner string, req logRequest, out io.Writer) error {
	ns := pod.Namespace
	opts := &corev1.PodLogOptions{Container: infrav1.RunnerContainer, Follow: req.follow}
	if req.limitBytes > 0 {
		opts.LimitBytes = &req.limitBytes
	}
	if req.tailLines > 0 {
		opts.TailLines = &req.tailLines
	}
	stream, err := cs.CoreV1().Pods(ns).GetLogs(pod.Name, opts).Stream(ctx)
	if err != nil {
		return fmt.Errorf("log of pod %s/%s of %s: %w", ns, pod.Name, owner, err)
	}
	defer stream.Close()
	if _, err := io.Copy(out, stream); err != nil {
		return fmt.Errorf("log of pod %s/%s: %w", ns, pod.Name, err)
	}
	return nil
}

// planPod is the newest pod of the plan Job that made p.
func planPod(ctx context.Context, c client.Client, p *infrav1.TerraformPlan) (*corev1.Pod, error) {
	jobName := p.Annotations[infrav1.AnnotationPlanJob]
	if jobName == "" {
		return nil, fmt.Errorf("TerraformPlan %s/%s names no plan Job (annotation %s)", p.Namespace, p.Name, infrav1.AnnotationPlanJob)
	}
	return jobPod(ctx, c, p.Namespace, jobName, "plan", "TerraformPlan "+p.Namespace+"/"+p.Name)
}

// jobPod is the newest pod of the Job ns/jobName, the role Job ("plan",
// "apply") of owner.
func jobPod(ctx context.Context, c client.Client, ns, jobName, role, owner string) (*corev1.Pod, error) {
	var job batchv1.Job
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: jobName}, &job); apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("the %s Job %s of %s is gone, and its log with it: the manager keeps the last Jobs of each object (spec.jobs history limits)", role, jobName, owner)
	} else if err != nil {
		return nil, fmt.Errorf("%s Job %s/%s: %w", role, ns, jobName, err)
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"batch.kubernetes.io/job-name": jobName}); err != nil {
		return nil, fmt.Errorf("pods of Job %s/%s: %w", ns, jobName, err)
	}
	if len(pods.Items) == 0 {
		return nil, fmt.Errorf("the %s Job %s/%s has no pod (yet, or any more)", role, ns, jobName)
	}
	return newest(pods.Items), nil
}

// applyPod is the newest pod of the apply Job of p: a Job the manager
// made after p whose annotation captf.io/plan names p. It is found from
// the manager's pods and a get of their Jobs, which is what the approver
// role grants (no list of Jobs).
func applyPod(ctx context.Context, c client.Client, p *infrav1.TerraformPlan) (*corev1.Pod, error) {
	ns, name := p.Namespace, p.Name
	if !p.Spec.Approved {
		return nil, fmt.Errorf("%w: TerraformPlan %s/%s is not approved, so nothing applies it", errNoApplyJob, ns, name)
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{infrav1.LabelManaged: "true"}); err != nil {
		return nil, fmt.Errorf("pods of namespace %s: %w", ns, err)
	}
	var mine []corev1.Pod
	isApply := map[string]bool{}
	for _, pod := range pods.Items {
		jobName := pod.Labels["batch.kubernetes.io/job-name"]
		if jobName == "" || pod.CreationTimestamp.Before(&p.CreationTimestamp) {
			continue
		}
		applies, seen := isApply[jobName]
		if !seen {
			var job batchv1.Job
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: jobName}, &job); err != nil && !apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("Job %s/%s: %w", ns, jobName, err)
			}
			applies = job.Annotations[infrav1.AnnotationPlan] == name
			isApply[jobName] = applies
		}
		if applies {
			mine = append(mine, pod)
		}
	}
	if len(mine) == 0 {
		return nil, fmt.Errorf("%w: TerraformPlan %s/%s has no apply Job with a pod (not yet, or any more: the manager keeps the last Jobs of each object)", errNoApplyJob, ns, name)
	}
	return newest(mine), nil
}

// newest is the newest of pods: a Job that retried has several.
func newest(pods []corev1.Pod) *corev1.Pod {
	pod := slices.MaxFunc(pods, func(a, b corev1.Pod) int {
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	return &pod
}
