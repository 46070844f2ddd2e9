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
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// A closed stdout (kubectl captf plans | head) is a write error, not a
	// SIGPIPE.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	err := kubectlcaptf.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}).ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
}
