package kubectlcaptf

import (
	"context"
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
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs PLAN",
		Short: "Print terraform's output for a TerraformPlan: the log of the Job that made the plan",
		Long: "kubectl captf logs prints the log of the runner Job that made the plan: terraform's own\n" +
			"rendering of it, with the values terraform shows (the runner hides every value the plan\n" +
			"marks sensitive). Read it before you approve. The log lives as long as the Job's pod.",
		Example:           "  kubectl captf logs demo-3f9a1c07be -n default",
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
			return planLog(cmd.Context(), c, cs, ns, args[0], follow, o.streams.Out)
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing while the plan Job runs")
	return cmd
}

// planLog copies the log of the runner container of the plan Job of the
// TerraformPlan ns/name to out.
func planLog(ctx context.Context, c client.Client, cs kubernetes.Interface, ns, name string, follow bool, out io.Writer) error {
	p, err := getPlan(ctx, c, ns, name)
	if err != nil {
		return err
	}
	jobName := p.Annotations[infrav1.AnnotationPlanJob]
	if jobName == "" {
		return fmt.Errorf("TerraformPlan %s/%s names no plan Job (annotation %s)", ns, name, infrav1.AnnotationPlanJob)
	}
	var job batchv1.Job
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: jobName}, &job); apierrors.IsNotFound(err) {
		return fmt.Errorf("the plan Job %s of TerraformPlan %s/%s is gone, and its log with it: the manager keeps the last Jobs of each object (spec.jobs history limits)", jobName, ns, name)
	} else if err != nil {
		return fmt.Errorf("plan Job %s/%s: %w", ns, jobName, err)
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"batch.kubernetes.io/job-name": jobName}); err != nil {
		return fmt.Errorf("pods of Job %s/%s: %w", ns, jobName, err)
	}
	if len(pods.Items) == 0 {
		return fmt.Errorf("the plan Job %s/%s has no pod (yet, or any more)", ns, jobName)
	}
	// The newest pod: a Job that retried has several.
	pod := slices.MaxFunc(pods.Items, func(a, b corev1.Pod) int {
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	stream, err := cs.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: infrav1.RunnerContainer, Follow: follow}).Stream(ctx)
	if err != nil {
		return fmt.Errorf("log of pod %s/%s: %w", ns, pod.Name, err)
	}
	defer stream.Close()
	if _, err := io.Copy(out, stream); err != nil {
		return fmt.Errorf("log of pod %s/%s: %w", ns, pod.Name, err)
	}
	return nil
}
