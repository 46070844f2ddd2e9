// Command captf-preview runs `captf preview`: it plans a pull request's
// change across deploy tools, prints one digest over the whole change set,
// and applies only a fresh plan that digests to the approved value. captf
// hands `captf preview ARGS` to it; `captf-preview ARGS` is the same
// command.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/captf/captf/internal/cli"
	"github.com/captf/captf/internal/preview/capabilities"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.RunPreview(ctx, os.Args[1:], os.Stdout, os.Stderr, capabilities.All(os.Stderr))
	stop()
	os.Exit(code)
}
