// Command kubectl-captf is the kubectl plugin "kubectl captf": put it on
// PATH and run kubectl captf plans, show PLAN or approve PLAN.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/captf/captf/internal/kubectlcaptf"
	"github.com/captf/captf/internal/terminal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// A closed stdout (kubectl captf plans | head) is a write error, not a
	// SIGPIPE.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	err := kubectlcaptf.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}).ExecuteContext(ctx)
	stop()
	if err != nil {
		// An error may quote what the API server answered.
		fmt.Fprintf(os.Stderr, "error: %s\n", terminal.Escape(err.Error()))
		os.Exit(kubectlcaptf.ExitCode(err))
	}
}
