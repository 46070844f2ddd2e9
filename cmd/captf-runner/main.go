// Command captf-runner is the entry point of captf's runner Jobs: it plans
// or applies the rendered root module with the core pipeline and reports to
// the manager through the container's termination message.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/runner"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string) int {
	j := runner.Job{Stdout: os.Stdout, Stderr: os.Stderr}
	fs := flag.NewFlagSet("captf-runner", flag.ContinueOnError)
	fs.StringVar(&j.Operation, "operation", "", "plan, apply or destroy")
	fs.StringVar(&j.Inputs, "inputs", infrav1.PathInputs, "folder of main.tf.json and terraform.tfvars.json")
	fs.StringVar(&j.Module, "module", infrav1.PathModule, "the module folder, linked as ./module in the work folder")
	fs.StringVar(&j.Workdir, "workdir", "/captf/work", "writable folder to run terraform in")
	fs.StringVar(&j.Runtime, "runtime", infrav1.PathRuntime, "folder holding terraform or tofu")
	fs.StringVar(&j.KeyFile, "plan-key-file", infrav1.PathPlanKey, "the plan key (plan and approved apply)")
	fs.StringVar(&j.ExpectPlan, "expect-plan", "", "the approved p2: hash")
	fs.StringVar(&j.MessagePath, "termination-message-path", "/dev/termination-log", "where the report for the manager goes")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return runner.ExitBadInput
	}
	return j.Run(ctx)
}
