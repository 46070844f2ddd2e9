// Package cli is the captf command line: plan, apply and fingerprint on one
// root module, with no cluster.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/captf/captf/internal/inputfile"
	"github.com/captf/captf/internal/planconfig"
	"github.com/captf/captf/internal/planstore"
	"github.com/captf/captf/internal/preview"
	"github.com/captf/captf/internal/runner"
	"github.com/captf/captf/internal/terminal"
	"github.com/captf/captf/internal/tfexec"
	"github.com/captf/captf/internal/version"
	"github.com/captf/captf/pkg/fingerprint"
)

const exitCodesHelp = `Exit codes:
  0  planned, applied, or nothing to apply
  1  any other failure (terraform failed, an apply failed, stdout could not
     be written), or interrupted
  2  bad usage or bad input, before anything runs: an unknown command or
     flag, an extra argument, a DIR that cannot be used, a plan key missing,
     shorter than 32 bytes, longer than 4096 or a link at the default path,
     a var file that is a directory, a TF_CLI_CONFIG_FILE that is not a
     regular file of at most 1 MiB, a malformed plan document, a malformed
     --expect-plan value
  3  the plan moved: the fresh plan does not hash to the approved one (or
     nothing was approved), or a provisioner or provider configuration it
     runs at apply moved since the plan was approved; nothing was applied`

// Run runs the captf command line with args and returns its exit code. Its
// preview command hands off to the preview binary (see handOff).
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return run(ctx, args, stdout, stderr, nil)
}

// RunPreview runs `captf preview` with args and the deploy tools of
// registry, and returns its exit code: what the preview binary runs.
func RunPreview(ctx context.Context, args []string, stdout, stderr io.Writer, registry preview.Registry) int {
	warnVersionSkew(stderr)
	return run(ctx, append([]string{"preview"}, args...), stdout, stderr, registry)
}

// run runs the command line. With a registry its preview command plans
// and applies in this process with those deploy tools; without, it hands
// off to the preview binary.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, registry preview.Registry) int {
	out := &checkedWriter{w: stdout}
	cmd := newRoot(out, stderr, registry)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	if out.err != nil && !errors.Is(err, out.err) {
		err = errors.Join(err, fmt.Errorf("write stdout: %w", out.err))
	}
	if err != nil {
		// An error may name a file, whose name may hold an escape.
		fmt.Fprintf(stderr, "captf: %s\n", terminal.Escape(err.Error()))
	}
	return exitCode(err)
}

// checkedWriter keeps the first error a write to w returned, and refuses
// every write after it: a report lost to a full disk or a closed pipe
// fails the command, whichever print lost it.
type checkedWriter struct {
	w   io.Writer
	err error
}

func (c *checkedWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	if err != nil {
		c.err = err
	}
	return n, err
}

// options are the flags shared by plan and apply.
type options struct {
	binary   string
	keyFile  string
	varFiles []string
	json     bool
}

func newRoot(stdout, stderr io.Writer, registry preview.Registry) *cobra.Command {
	root := &cobra.Command{
		Use:   "captf",
		Short: "Apply exactly the terraform plan that was approved",
		Long: `captf plans a terraform or OpenTofu root module, fingerprints the plan with
a keyed hash (p2:) that binds what it will do but reveals no value, and
applies only when a fresh plan hashes to the approved value.

  captf plan DIR                         plan and print the hash to approve
  captf apply DIR --expect-plan p2:...   plan again; apply only if it hashes the same
  captf preview plan                     plan a change across deploy tools (captf.yaml)
  captf preview apply --expect-digest cs1:...
  captf lint [DIR] --role cluster        check a module against the manager's contract
  captf version                          print captf's version (also --version)

` + exitCodesHelp,
		Args:          cobra.ArbitraryArgs,
		RunE:          group,
		Version:       version.Get(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate(versionTemplate)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return fmt.Errorf("%w: %w", runner.ErrBadInput, err)
	})
	root.AddCommand(newPlan(stdout, stderr), newApply(stdout, stderr), newFingerprint(stdout), newLint(stdout), newVersion(stdout))
	if registry != nil {
		root.AddCommand(newPreview(stdout, stderr, registry))
	} else {
		root.AddCommand(newHandOff())
	}
	strictCompletion(root)
	return root
}

// strictCompletion makes cobra's completion command refuse what it does
// not know as bad usage, as captf's other groups do: a shell it has no
// script for, or an argument after the shell.
func strictCompletion(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() != "completion" {
			continue
		}
		c.Args, c.RunE = cobra.ArbitraryArgs, group
		for _, shell := range c.Commands() {
			shell.Args = noArgs
		}
	}
}

func (o *options) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.binary, "binary", "", "terraform, tofu or a path to either (default: terraform, else tofu, from PATH)")
	f.StringVar(&o.keyFile, "plan-key-file", "", "file holding the plan key, at least 32 bytes (default: DIR/.captf/plan-key, created on first use)")
	f.StringArrayVar(&o.varFiles, "var-file", nil, "a variables file passed to terraform plan (repeatable)")
	f.BoolVar(&o.json, "json", false, "print the report as JSON on stdout; terraform's output goes to stderr")
}

// group runs a command that only groups others: a missing or unknown
// command is bad usage, not a request for help.
func group(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(cmd.ErrOrStderr(), cmd.UsageString())
		return fmt.Errorf("%w: %s needs a command", runner.ErrBadInput, cmd.CommandPath())
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	cmd.SuggestionsMinimumDistance = 2
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return fmt.Errorf("%w: %s", runner.ErrBadInput, msg)
}

// noArgs refuses arguments to a command that takes none.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("%w: %s takes no arguments, got %q", runner.ErrBadInput, cmd.CommandPath(), args[0])
	}
	return nil
}

// dirArg takes the optional DIR argument.
func dirArg(_ *cobra.Command, args []string) error {
	if len(args) > 1 {
		return fmt.Errorf("%w: expected at most one DIR, got %d arguments", runner.ErrBadInput, len(args))
	}
	return nil
}

// session is everything one plan or apply needs, set up in the order that
// refuses bad input before anything runs.
type session struct {
	dir    string
	runner *runner.Runner
	store  planstore.Store
	tmp    *runDir
	// runtime is what an apply found of the blocks the plan runs outside
	// it, when they refused the apply.
	runtime *runtimeReport
}

// Close removes the session's private directory.
func (s *session) Close() { s.tmp.Close() }

func (o *options) open(ctx context.Context, args []string, stdout, stderr io.Writer) (*session, error) {
	dir := "."
	if len(args) == 1 {
		dir = args[0]
	}
	if err := checkDir(dir, ""); err != nil {
		return nil, err
	}
	var key []byte
	var err error
	if o.keyFile != "" {
		key, err = runner.ReadKeyFile(ctx, o.keyFile, "plan key", stderr)
	} else {
		key, err = runner.RootKey(ctx, dir, stderr)
	}
	if err != nil {
		return nil, err
	}
	hasher, err := fingerprint.New(key)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", runner.ErrBadInput, err)
	}
	hasher.Detail = true
	// What runs at apply outside the plan is bound from the plan's
	// variables and configuration (internal/planconfig).
	hasher.Sections = []string{"variables", "configuration"}
	bin, err := tfexec.Find(o.binary)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", runner.ErrBadInput, err)
	}
	varFiles := make([]string, len(o.varFiles))
	for i, f := range o.varFiles {
		if info, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("%w: var file: %w", runner.ErrBadInput, err)
		} else if info.IsDir() {
			return nil, fmt.Errorf("%w: var file %s is a directory", runner.ErrBadInput, f)
		}
		if varFiles[i], err = filepath.Abs(f); err != nil {
			return nil, err
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	tmp, err := openRunDir(abs)
	if err != nil {
		return nil, err
	}
	env, err := cliConfig(tmp.path)
	if err != nil {
		tmp.Close()
		return nil, err
	}
	tfOut := stdout
	if o.json {
		tfOut = stderr
	}
	return &session{
		dir: dir,
		runner: &runner.Runner{
			TF:       &tfexec.Terraform{Bin: bin, Dir: abs, Env: env, Stdout: tfOut, Stderr: stderr},
			Hasher:   hasher,
			VarFiles: varFiles,
			Progress: stderr,
			TempDir:  tmp.path,
			// The CLI plans the same root again and again (plan, then
			// apply): init only when what init reads changed, and let
			// plan validate.
			Init:       &runner.InitStamp{Path: filepath.Join(abs, runner.StateDir, runner.InitStampFile), Key: key},
			NoValidate: true,
			// Read saved plans here, not through show -json, which
			// starts every provider again for its schema.
			Schemas:    &runner.SchemaCache{Path: filepath.Join(abs, runner.StateDir, runner.SchemaCacheFile)},
			RuntimeKey: key,
		},
		store: planstore.Store{Dir: filepath.Join(dir, runner.StateDir, "plans")},
		tmp:   tmp,
	}, nil
}

// checkDir refuses a dir (named by flag, or an argument when flag is "")
// that is missing or not a directory, and one it cannot use with the
// cause: unreadable, a link loop.
func checkDir(dir, flag string) error {
	what := dir
	if flag != "" {
		what = flag + " " + dir
	}
	info, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: %s is not a directory", runner.ErrBadInput, what)
	case err != nil:
		var pathErr *fs.PathError
		if errors.As(err, &pathErr) {
			err = pathErr.Err
		}
		return fmt.Errorf("%w: %s: %w", runner.ErrBadInput, what, err)
	case !info.IsDir():
		return fmt.Errorf("%w: %s is not a directory", runner.ErrBadInput, what)
	}
	return nil
}

// cliConfig keeps a TF_CLI_CONFIG_FILE that names an existing file (it may
// carry provider mirrors the user needs) and otherwise gives terraform a
// config of captf's own, in dir, that disables the checkpoint call. An
// existing one that is not a regular file, or is larger than
// runner.MaxCLIConfigBytes, is refused: captf hashes it to know whether
// init must run again.
func cliConfig(dir string) ([]string, error) {
	if p := os.Getenv("TF_CLI_CONFIG_FILE"); p != "" {
		if info, err := os.Stat(p); err == nil {
			if !info.Mode().IsRegular() {
				return nil, fmt.Errorf("%w: TF_CLI_CONFIG_FILE: %s is %s: %w", runner.ErrBadInput, p, inputfile.Kind(info), inputfile.ErrNotRegular)
			}
			if info.Size() > runner.MaxCLIConfigBytes {
				return nil, fmt.Errorf("%w: TF_CLI_CONFIG_FILE: %s holds more than %s: %w", runner.ErrBadInput, p, inputfile.Size(runner.MaxCLIConfigBytes), inputfile.ErrTooLarge)
			}
			return nil, nil
		}
	}
	path := filepath.Join(dir, "terraform.rc")
	if err := os.WriteFile(path, []byte("disable_checkpoint = true\n"), 0o600); err != nil {
		return nil, fmt.Errorf("terraform CLI config: %w", err)
	}
	return []string{"TF_CLI_CONFIG_FILE=" + path}, nil
}

// saveRecord keeps the value-free record of a plan and of what it runs at
// apply outside the plan; failing to is worth a warning, not a failed
// plan. What runs at apply is recorded by the first plan of a hash only:
// when this plan of the hash runs something else, captf apply will refuse
// it, and the warning says so.
func (s *session) saveRecord(r *fingerprint.Result, runtime []planconfig.Block, stderr io.Writer) {
	if err := runner.EnsureStateDir(s.dir); err != nil {
		fmt.Fprintf(stderr, "captf: warning: %v\n", err)
		return
	}
	if err := s.store.Save(r, time.Now()); err != nil {
		fmt.Fprintf(stderr, "captf: warning: %v\n", err)
	}
	hash := r.Report.PlanHash
	recorded, err := s.store.SaveRuntime(hash, runtime)
	if err != nil {
		fmt.Fprintf(stderr, "captf: warning: %v\n", err)
		return
	}
	if moved := planconfig.Compare(recorded, runtime); len(moved) > 0 {
		fmt.Fprintf(stderr, "captf: warning: what this plan runs at apply outside the plan differs from what %s ran when it was first planned here; captf apply refuses it:\n", hash)
		printMovedBlocks(stderr, moved)
		fmt.Fprintf(stderr, "An approval of %s covers what was first planned. To have this configuration approved, remove %s, plan again and have the plan approved again.\n", hash, s.store.RuntimeFile(hash))
	}
}

// checkRuntime refuses an apply whose plan runs, outside the plan, a block
// that moved since the approved plan was recorded, or whose approved plan
// has no such record while this one runs something.
func (s *session) checkRuntime(approved string, fresh *runner.Planned) error {
	if len(fresh.Runtime) == 0 {
		return nil
	}
	recorded, err := s.store.LoadRuntime(approved)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		s.runtime = &runtimeReport{Unknown: "no record in " + s.store.Dir + " of what the approved plan runs at apply (was it planned on another machine, or by an older captf?)"}
	case err != nil:
		s.runtime = &runtimeReport{Unknown: err.Error()}
	default:
		moved := planconfig.Compare(recorded, fresh.Runtime)
		if len(moved) == 0 {
			return nil
		}
		s.runtime = &runtimeReport{Moved: moved}
	}
	s.runtime.Record = s.store.RuntimeFile(approved)
	return fmt.Errorf("%w since %s was approved; nothing was applied", runner.ErrRuntimeChanged, approved)
}

func newPlan(stdout, stderr io.Writer) *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:   "plan [DIR]",
		Short: "Plan a root module and print the hash that approves it",
		Long: `Runs init (unless nothing init reads changed since the last one) and plan
-out, reads the plan file (or show -json of it) in memory only, and prints
terraform's plan, the counts, the changed resources, the p2: hash and the
exact command that applies this plan.

` + exitCodesHelp,
		Args: dirArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := o.open(cmd.Context(), args, stdout, stderr)
			if err != nil {
				return err
			}
			defer s.Close()
			p, err := s.runner.Plan(cmd.Context())
			if err != nil {
				return err
			}
			defer p.Close()
			s.saveRecord(p.Result, p.Runtime, stderr)
			if o.json {
				return printJSON(stdout, p.Report)
			}
			printReport(stdout, &p.Report, o.applyCommand(s.dir, p.Report.PlanHash))
			return nil
		},
	}
	o.register(cmd)
	return cmd
}

func newApply(stdout, stderr io.Writer) *cobra.Command {
	var o options
	var expect string
	cmd := &cobra.Command{
		Use:   "apply [DIR] --expect-plan p2:...",
		Short: "Plan again and apply only if the plan hashes to the approved value",
		Long: `Plans again, with refresh, and fingerprints the fresh plan. When it hashes to
the --expect-plan value, exactly that saved plan is applied. Otherwise nothing
is applied: captf says what moved relative to the approved plan (addresses
and attribute paths, never values), prints the new plan and its approve
command, and exits 3. An empty plan needs no approval and applies nothing.

` + exitCodesHelp,
		Args: dirArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := runner.CheckHash(expect); err != nil {
				return err
			}
			s, err := o.open(cmd.Context(), args, stdout, stderr)
			if err != nil {
				return err
			}
			defer s.Close()
			s.runner.CheckRuntime = s.checkRuntime
			out, err := s.runner.Apply(cmd.Context(), expect)
			if out == nil {
				return err
			}
			report := &out.Fresh.Report
			switch {
			case errors.Is(err, runner.ErrRuntimeChanged):
				doc := refusal{Reason: ReasonRuntimeChanged, Approved: expect, Runtime: s.runtime, Plan: *report}
				if o.json {
					return errors.Join(err, printJSON(stdout, doc))
				}
				printRuntimeRefusal(stdout, &doc)
				return err
			case errors.Is(err, runner.ErrPlanChanged):
				s.saveRecord(out.Fresh, out.Runtime, stderr)
				doc := refusal{Reason: refusedFor(expect), Approved: expect, Plan: *report}
				if doc.Reason == ReasonPlanChanged {
					doc.Moved = s.moved(expect, out.Fresh)
				}
				if o.json {
					return errors.Join(err, printJSON(stdout, doc))
				}
				printRefusal(stdout, &doc, o.applyCommand(s.dir, report.PlanHash))
				return err
			case errors.Is(err, tfexec.ErrStalePlan):
				if o.json {
					return errors.Join(err, printJSON(stdout, refusal{Reason: ReasonStalePlan, Approved: expect, Plan: *report}))
				}
				return err
			case err != nil:
				return err
			case o.json:
				doc := refusal{Applied: out.Applied, Approved: expect, Plan: *report}
				if !out.Applied {
					doc.Reason = ReasonNoChanges
				}
				return printJSON(stdout, doc)
			case out.Applied:
				fmt.Fprintf(stdout, "\ncaptf: applied the approved plan %s.\n", report.PlanHash)
			default:
				fmt.Fprintf(stdout, "\ncaptf: no changes; nothing to apply (%s).\n", report.PlanHash)
			}
			return nil
		},
	}
	o.register(cmd)
	cmd.Flags().StringVar(&expect, "expect-plan", "", "the approved p2: plan hash")
	return cmd
}

// moved compares the fresh plan with the record of the approved one, when
// this root has it.
func (s *session) moved(approved string, fresh *fingerprint.Result) *movedReport {
	if approved == "" {
		return nil
	}
	diffs, err := s.store.Compare(approved, fresh.Changes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &movedReport{Unknown: "no record of the approved plan in " + s.store.Dir + " (was it planned on another machine?)"}
	case err != nil:
		return &movedReport{Unknown: err.Error()}
	}
	return &movedReport{Differences: diffs}
}

func newFingerprint(stdout io.Writer) *cobra.Command {
	var keyFile string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "fingerprint --plan-key-file FILE [PLAN.json|-]",
		Short: "Print the p2: hash of a plan document (terraform show -json)",
		Long: `Reads the JSON of terraform show -json from a file or stdin and prints the p2:
hash alone on the first line of stdout, or with --json the whole report.

` + exitCodesHelp,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 {
				return fmt.Errorf("%w: expected at most one plan file, got %d arguments", runner.ErrBadInput, len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if keyFile == "" {
				return fmt.Errorf("%w: --plan-key-file is required", runner.ErrBadInput)
			}
			key, err := runner.ReadKeyFile(cmd.Context(), keyFile, "plan key", cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			in := cmd.InOrStdin()
			if len(args) == 1 && args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return fmt.Errorf("%w: %w", runner.ErrBadInput, err)
				}
				defer f.Close()
				in = f
			}
			res, err := fingerprint.Compute(key, in)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(stdout, res.Report)
			}
			_, err = fmt.Fprintln(stdout, res.Report.PlanHash)
			return err
		},
	}
	cmd.Flags().StringVar(&keyFile, "plan-key-file", "", "file holding the plan key, at least 32 bytes (required)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the whole report as JSON")
	return cmd
}

// applyCommand is the exact command that applies hash in dir with the same
// flags this run had, written so that it can be pasted into a shell.
func (o *options) applyCommand(dir, hash string) string {
	if strings.HasPrefix(dir, "-") {
		// Pasted as it is, it would read as a flag.
		dir = "./" + dir
	}
	args := []string{"captf", "apply", dir}
	if o.binary != "" {
		args = append(args, "--binary", o.binary)
	}
	if o.keyFile != "" {
		args = append(args, "--plan-key-file", o.keyFile)
	}
	for _, f := range o.varFiles {
		args = append(args, "--var-file", f)
	}
	args = append(args, "--expect-plan", hash)
	return shellJoin(args)
}
