// Command captf-runner is the entry point of captf's runner Jobs: it plans
// or applies the rendered root module with the core pipeline and reports to
// the manager through the container's termination message.
//
//	captf-runner --operation=plan|apply|destroy|drift|refresh|restore [flags]
//	captf-runner install DEST    copy itself to DEST (the Job's init container)
//	captf-runner --version
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/runner"
	"github.com/captf/captf/internal/version"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "install" {
		return install(args[1:], stderr)
	}
	j := runner.Job{Stdout: stdout, Stderr: stderr}
	fs := flag.NewFlagSet("captf-runner", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&j.Operation, "operation", "", "plan, apply, destroy, drift, refresh or restore")
	fs.StringVar(&j.Inputs, "inputs", infrav1.PathInputs, "folder of main.tf.json and terraform.tfvars.json")
	fs.StringVar(&j.Module, "module", infrav1.PathModule, "the module folder, linked as ./module in the work folder")
	fs.StringVar(&j.Workdir, "workdir", "/captf/work", "writable folder to run terraform in")
	fs.StringVar(&j.Runtime, "runtime", infrav1.PathRuntime, "folder holding terraform or tofu")
	fs.StringVar(&j.KeyFile, "plan-key-file", infrav1.PathPlanKey, "the plan key (plan and approved apply)")
	fs.StringVar(&j.ExpectPlan, "expect-plan", "", "the approved p2: hash")
	fs.BoolVar(&j.Guard, "guard", false, "an ungated apply: plan first, and apply nothing if the plan deletes or replaces a resource")
	fs.StringVar(&j.AllowDeletesHash, "allow-deletes-hash", "", "with --guard: the plan may delete or replace resources when the inputs' approval hash is this one (an approved ExportsChange plan)")
	fs.StringVar(&j.InputsDigest, "inputs-digest", "", "the keyed digest of the inputs the manager wrote for this Job; required with --allow-deletes-hash, and checked against the plan key")
	fs.StringVar(&j.AppliedInputs, "applied-inputs", "", "with --guard: the folder of the last applied inputs; apply a change only of --unapproved-vars, once shown to be only that")
	fs.Func("unapproved-vars", "with --applied-inputs: the variables whose values may differ from the last applied inputs (comma-separated)", func(v string) error {
		j.Unapproved = strings.Split(v, ",")
		return nil
	})
	fs.Func("reviewed-delete", "with --allow-deletes-hash: an address the approved plan deletes or replaces (repeated)", func(v string) error {
		j.ReviewedDeletes = append(j.ReviewedDeletes, v)
		return nil
	})
	fs.IntVar(&j.ReviewedDestroy, "reviewed-destroy", -1, "with --allow-deletes-hash: how many resources the approved plan deletes or replaces in all")
	fs.StringVar(&j.StateLineage, "state-lineage", "", "the lineage of the state the manager read when it started the Job: a plan of a state of another lineage applies nothing")
	fs.Func("replace-member", "with a plan or an apply: the provider ID of a pool's member whose resource the plan replaces, as the state's member_addresses output names it (repeated)", func(v string) error {
		j.ReplaceMembers = append(j.ReplaceMembers, v)
		return nil
	})
	fs.StringVar(&j.BackupDigests, "backup-digests", "", "restore: the backup's chunk digests (its captf.io/state-chunk-sha256 annotation)")
	fs.StringVar(&j.MessagePath, "termination-message-path", "/dev/termination-log", "where the report for the manager goes")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintln(stderr, err)
		return runner.ExitBadInput
	}
	if *showVersion {
		io.WriteString(stdout, version.Line("captf-runner"))
		return runner.ExitOK
	}
	return j.Run(ctx)
}

// install copies the running binary to the one argument, mode 0755.
func install(args []string, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "usage: captf-runner install DEST")
		return runner.ExitBadInput
	}
	self, err := os.Executable()
	if err == nil {
		err = runner.Install(self, args[0])
	}
	if err != nil {
		fmt.Fprintf(stderr, "captf-runner: %v\n", err)
		return runner.ExitFailure
	}
	return runner.ExitOK
}
