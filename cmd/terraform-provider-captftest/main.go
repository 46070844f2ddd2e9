// Command terraform-provider-captftest is the test provider of
// internal/testprovider, served over the plugin protocol.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"github.com/captf/captf/internal/testprovider"
)

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "terraform-provider-captftest:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("terraform-provider-captftest", flag.ContinueOnError)
	debug := fs.Bool("debug", false, "serve for a debugger (prints TF_REATTACH_PROVIDERS)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return providerserver.Serve(ctx, testprovider.New(testprovider.Version), providerserver.ServeOpts{
		Address: testprovider.Address,
		Debug:   *debug,
	})
}
