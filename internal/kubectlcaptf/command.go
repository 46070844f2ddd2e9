// Package kubectlcaptf is the kubectl plugin "kubectl captf": it lists the
// TerraformPlans that wait for an approval, shows one, and approves one as
// the user the API server knows, so nobody writes spec 002's patch by hand.
// It loads the kubeconfig as kubectl does (--kubeconfig, --context, -n).
package kubectlcaptf

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/version"
)

// options are what every command shares.
type options struct {
	streams genericiooptions.IOStreams
	config  *genericclioptions.ConfigFlags
	// output is -o: "", json or yaml; json is --json, the same as -o json.
	output string
	json   bool
	// now is the clock ages are measured against.
	now func() time.Time
	// server says the command serves until Ctrl-C (review): its watches
	// have no request timeout, and it stops itself when its context ends.
	server bool
}

// NewCommand returns the root command "kubectl captf" writing to streams.
func NewCommand(streams genericiooptions.IOStreams) *cobra.Command {
	return newCommand(streams, time.Now)
}

func newCommand(streams genericiooptions.IOStreams, now func() time.Time) *cobra.Command {
	o := &options{streams: streams, config: genericclioptions.NewConfigFlags(true), now: now}
	root := &cobra.Command{
		Use:   "kubectl-captf",
		Short: "List, show, read the log of and approve captf's TerraformPlans",
		Long: "kubectl captf lists the TerraformPlans that wait for an approval, shows what one changes,\n" +
			"and approves one in your own name (spec.approvedBy is filled from the API server's\n" +
			"answer to who you are, as kubectl auth whoami reports it).",
		Annotations: map[string]string{
			cobra.CommandDisplayNameAnnotation: "kubectl captf",
		},
		Version:       version.Get(),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			o.server = cmd.Name() == serverCommand
			return o.checkOutput()
		},
	}
	root.SetVersionTemplate("{{.Name}} version {{.Version}}\n")
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	o.config.AddFlags(root.PersistentFlags())
	o.addOutputFlags(root)
	root.AddCommand(o.plansCommand(), o.showCommand(), o.approveCommand(), o.logsCommand(), o.reviewCommand())
	root.Args, root.RunE = cobra.ArbitraryArgs, group
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return fmt.Errorf("%w: %w", ErrUsage, err)
	})
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.Args, c.RunE = cobra.ArbitraryArgs, group
			for _, shell := range c.Commands() {
				shell.Args = usageArgs(shell)
			}
			continue
		}
		c.Args = usageArgs(c)
		if c.RunE != nil && c.Name() != serverCommand {
			c.RunE = untilDone(c.RunE)
		}
	}
	return root
}

// Exit codes of kubectl captf.
const (
	// ExitFailure: the command failed, or was interrupted.
	ExitFailure = 1
	// ExitUsage: bad usage, before anything is read: an unknown command
	// or flag, a missing or extra argument.
	ExitUsage = 2
)

// ErrUsage marks errors of bad usage; they exit with ExitUsage.
var ErrUsage = errors.New("bad usage")

// ExitCode maps an error of the command to its exit code.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrUsage):
		return ExitUsage
	}
	return ExitFailure
}

// group runs a command that only groups others: a missing or unknown
// command is bad usage, not a request for help.
func group(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(cmd.ErrOrStderr(), cmd.UsageString())
		return fmt.Errorf("%w: %s needs a command", ErrUsage, cmd.CommandPath())
	}
	return fmt.Errorf("%w: unknown command %q for %q", ErrUsage, args[0], cmd.CommandPath())
}

// usageArgs is c's argument check with its errors marked as bad usage.
func usageArgs(c *cobra.Command) cobra.PositionalArgs {
	check := c.Args
	if check == nil {
		check = cobra.ArbitraryArgs
	}
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			if len(args) > 0 && cmd.Name() != "" && cmd.Parent() != nil && cmd.Parent().Name() == "completion" {
				return fmt.Errorf("%w: %s takes no arguments, got %q", ErrUsage, cmd.CommandPath(), args[0])
			}
			return fmt.Errorf("%w: %w", ErrUsage, err)
		}
		return nil
	}
}

// untilDone runs a command and returns as soon as its context ends (Ctrl-C),
// with the context's cause: client-go's discovery of the API server's kinds
// takes no context, and waits on a server that never answers for as long
// as the request timeout. The abandoned request ends with the process.
func untilDone(run func(*cobra.Command, []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		if ctx == nil {
			return run(cmd, args)
		}
		done := make(chan error, 1)
		go func() { done <- run(cmd, args) }()
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// serverCommand is the command that serves until Ctrl-C and shuts its
// server down itself when its context ends.
const serverCommand = "review"

// DefaultRequestTimeout is how long a request to the API server may take
// when --request-timeout does not say: a server that accepts and never
// answers fails the command after it. A log stream and review's watches
// have no timeout.
const DefaultRequestTimeout = 30 * time.Second

// restConfig is the client configuration the kubeconfig and the flags
// give, with DefaultRequestTimeout when --request-timeout is not set.
func (o *options) restConfig() (*rest.Config, error) {
	cfg, err := o.config.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	if cfg.Timeout == 0 && !o.server {
		cfg.Timeout = DefaultRequestTimeout
	}
	return cfg, nil
}

// client returns a client for the API server of the kubeconfig and the
// namespace the flags and the kubeconfig name.
func (o *options) client() (client.WithWatch, string, error) {
	cfg, err := o.restConfig()
	if err != nil {
		return nil, "", err
	}
	ns, _, err := o.config.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("kubeconfig namespace: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, "", err
	}
	if err := infrav1.AddToScheme(scheme); err != nil {
		return nil, "", err
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, "", fmt.Errorf("API client: %w", err)
	}
	return c, ns, nil
}

// completePlans completes the PLAN argument of show, approve and logs with
// the names of the TerraformPlans in the namespace the flags name, as
// kubectl completes the names of objects.
func (o *options) completePlans(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	c, ns, err := o.client()
	if err != nil {
		cobra.CompErrorln(err.Error())
		return nil, cobra.ShellCompDirectiveError
	}
	var list infrav1.TerraformPlanList
	if err := c.List(cmd.Context(), &list, client.InNamespace(ns)); err != nil {
		cobra.CompErrorln(err.Error())
		return nil, cobra.ShellCompDirectiveError
	}
	var names []cobra.Completion
	for _, p := range list.Items {
		if strings.HasPrefix(p.Name, toComplete) {
			names = append(names, p.Name)
		}
	}
	slices.Sort(names)
	return names, cobra.ShellCompDirectiveNoFileComp
}

// getPlan reads the plan name in ns.
func getPlan(ctx context.Context, c client.Client, ns, name string) (*infrav1.TerraformPlan, error) {
	var p infrav1.TerraformPlan
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
		return nil, fmt.Errorf("TerraformPlan %s/%s: %w", ns, name, err)
	}
	return &p, nil
}
