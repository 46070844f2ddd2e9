// Command captf plans a terraform or OpenTofu root module, prints the keyed
// p2: hash that approves exactly that plan, and applies only a fresh plan
// that hashes to the approved value.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/captf/captf/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// A closed stdout (captf plan | head) is a write error the command
	// reports and exits 1 on, after removing its private files, rather
	// than a SIGPIPE that kills it before they are removed.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	code := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
