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
	// A closed stdout (captf plan | head) is a write error the command
	// reports and exits 1 on, after removing its private files, rather
	// than a SIGPIPE that kills it before they are removed.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	code := cli.RunPreview(ctx, os.Args[1:], os.Stdout, os.Stderr, capabilities.All(os.Stderr))
	stop()
	os.Exit(code)
}
