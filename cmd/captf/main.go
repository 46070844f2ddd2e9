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
	code := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
