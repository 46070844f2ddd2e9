// Package tfexec drives a terraform or tofu binary for captf: init,
// validate, plan to a file, show -json streamed into a reader, and apply of
// a saved plan file.
//
// It runs the binary directly rather than through hashicorp/terraform-exec
// because that library's ShowPlanFile unmarshals the whole plan into
// tfjson.Plan (all of it in memory, numbers as float64), where captf needs
// the JSON as a stream with numbers as written. The plan JSON never reaches
// a file or a log: Show hands the live stdout pipe to the caller.
package tfexec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// ErrStalePlan is returned by Apply when terraform refuses a saved plan
// because the state changed after it was made; nothing was applied.
var ErrStalePlan = errors.New("saved plan is stale: the state changed after the plan was made")

// ErrNotFound is returned by Find when no binary is found.
var ErrNotFound = errors.New("neither terraform nor tofu found in PATH")

// Terraform runs one binary in one root module directory.
type Terraform struct {
	// Bin is the path of the terraform or tofu binary.
	Bin string
	// Dir is the root module.
	Dir string
	// Env is added to the environment of every command, after captf's own
	// settings, so it can override them.
	Env []string
	// Stdout receives the human-readable output of init, plan and apply.
	Stdout io.Writer
	// Stderr receives terraform's diagnostics.
	Stderr io.Writer
}

// DataDir is terraform's data directory for the root: the last
// TF_DATA_DIR of the process's environment and Env, else .terraform,
// relative to Dir.
func (t *Terraform) DataDir() string {
	d := ".terraform"
	for _, kv := range slices.Concat(os.Environ(), t.Env) {
		if v, ok := strings.CutPrefix(kv, "TF_DATA_DIR="); ok && v != "" {
			d = v
		}
	}
	if !filepath.IsAbs(d) {
		d = filepath.Join(t.Dir, d)
	}
	return d
}

// Find resolves a binary by name or path: "terraform", "tofu", a path, or
// "" to take terraform and then tofu from PATH.
func Find(name string) (string, error) {
	if name == "" {
		for _, n := range []string{"terraform", "tofu"} {
			if p, err := exec.LookPath(n); err == nil {
				return p, nil
			}
		}
		return "", ErrNotFound
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("binary %q: %w", name, err)
	}
	return filepath.Abs(p)
}

// Init runs init without input.
func (t *Terraform) Init(ctx context.Context) error {
	return t.run(ctx, t.Stdout, "init", "-input=false", "-no-color")
}

// Validate checks the configuration.
func (t *Terraform) Validate(ctx context.Context) error {
	return t.run(ctx, t.Stdout, "validate", "-no-color")
}

// Plan writes a plan to the file out (an absolute path). Extra arguments
// (-var, -var-file, -refresh=false …) are passed through.
func (t *Terraform) Plan(ctx context.Context, out string, extra ...string) error {
	args := append([]string{"plan", "-input=false", "-no-color", "-out=" + out}, extra...)
	return t.run(ctx, t.Stdout, args...)
}

// PlanChanges is Plan with -detailed-exitcode: it reports whether the plan
// has changes (terraform's exit code 2) instead of failing on it.
func (t *Terraform) PlanChanges(ctx context.Context, out string, extra ...string) (bool, error) {
	args := append([]string{"plan", "-input=false", "-no-color", "-detailed-exitcode", "-out=" + out}, extra...)
	err := t.run(ctx, t.Stdout, args...)
	if exit, ok := errors.AsType[*exec.ExitError](err); ok && exit.ExitCode() == 2 {
		return true, nil
	}
	return false, err
}

// Show runs show -json on a saved plan and passes its stdout, as it is
// produced, to read. Nothing of it is stored or logged.
func (t *Terraform) Show(ctx context.Context, planFile string, read func(io.Reader) error) error {
	return t.stream(ctx, read, "show", "-json", "-no-color", planFile)
}

// ShowState runs show -json without a plan and passes its stdout, the
// state with every value, as it is produced, to read. Nothing of it is
// stored or logged.
func (t *Terraform) ShowState(ctx context.Context, read func(io.Reader) error) error {
	return t.stream(ctx, read, "show", "-json", "-no-color")
}

// Output runs output -json and passes its stdout, as it is produced, to
// read: every root output with its value, sensitive ones included, so
// nothing of it is stored or logged.
func (t *Terraform) Output(ctx context.Context, read func(io.Reader) error) error {
	return t.stream(ctx, read, "output", "-json", "-no-color")
}

// stream runs a command whose stdout may hold values and hands the live
// pipe to read.
func (t *Terraform) stream(ctx context.Context, read func(io.Reader) error, args ...string) error {
	cmd := t.command(ctx, args...)
	noLog(cmd)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	readErr := read(out)
	// Drain what read left so the process can finish, then reap it.
	_, _ = io.Copy(io.Discard, out)
	waitErr := cmd.Wait()
	if waitErr != nil {
		// terraform's diagnostics go to the log, not into the error: an
		// error may travel into a report or a status.
		t.stderr().Write(stderr.Bytes())
		return fmt.Errorf("%s %s: %w", filepath.Base(t.Bin), args[0], waitErr)
	}
	return readErr
}

// Apply applies exactly the saved plan file.
func (t *Terraform) Apply(ctx context.Context, planFile string) error {
	var stderr bytes.Buffer
	err := t.runTo(ctx, t.Stdout, io.MultiWriter(t.stderr(), &stderr), "apply", "-input=false", "-no-color", "-auto-approve", planFile)
	if err != nil && bytes.Contains(stderr.Bytes(), []byte("Saved plan is stale")) {
		return ErrStalePlan
	}
	return err
}

// ApplyAuto plans and applies in one step, with no saved plan: the ungated
// apply of applyPolicy Automatic and of a first apply.
func (t *Terraform) ApplyAuto(ctx context.Context) error {
	return t.run(ctx, t.Stdout, "apply", "-input=false", "-no-color", "-auto-approve")
}

// ApplyRefreshOnly records in the state what every resource really is,
// and changes no infrastructure: a drift check's first step.
func (t *Terraform) ApplyRefreshOnly(ctx context.Context) error {
	return t.run(ctx, t.Stdout, "apply", "-refresh-only", "-input=false", "-no-color", "-auto-approve")
}

// Destroy destroys everything the state holds, with no saved plan.
func (t *Terraform) Destroy(ctx context.Context) error {
	return t.run(ctx, t.Stdout, "apply", "-destroy", "-input=false", "-no-color", "-auto-approve")
}

// StatePush replaces the backend's state with the state JSON read from
// state, whatever its lineage and serial (-force). The state goes through
// stdin only: no file, no command line, no log (TF_LOG is dropped).
// terraform and tofu keep its lineage and write its serial+1 unless the
// backend holds that very state already (internal/tfstate).
func (t *Terraform) StatePush(ctx context.Context, state io.Reader) error {
	cmd := t.command(ctx, "state", "push", "-force", "-")
	noLog(cmd)
	cmd.Stdin = state
	return t.runCmd(cmd, t.Stdout, t.stderr(), "state push")
}

// StatePull runs state pull and passes its stdout, the whole state with
// every value, as it is produced, to read. Nothing of it is stored or
// logged.
func (t *Terraform) StatePull(ctx context.Context, read func(io.Reader) error) error {
	return t.stream(ctx, read, "state", "pull")
}

// StateList runs state list and passes its stdout, one resource address
// a line, to read.
func (t *Terraform) StateList(ctx context.Context, read func(io.Reader) error) error {
	return t.stream(ctx, read, "state", "list")
}

func (t *Terraform) run(ctx context.Context, stdout io.Writer, args ...string) error {
	return t.runTo(ctx, stdout, t.stderr(), args...)
}

func (t *Terraform) runTo(ctx context.Context, stdout, stderr io.Writer, args ...string) error {
	return t.runCmd(t.command(ctx, args...), stdout, stderr, args[0])
}

// runCmd runs cmd; name is the command in an error: terraform's diagnostics
// go to stderr, only an invalid input's summary into the error.
func (t *Terraform) runCmd(cmd *exec.Cmd, stdout, stderr io.Writer, name string) error {
	cmd.Stdout = orDiscard(stdout)
	diags := &tail{max: 64 << 10}
	cmd.Stderr = io.MultiWriter(stderr, diags)
	if err := cmd.Run(); err != nil {
		op := filepath.Base(t.Bin) + " " + name
		return inputError(op, diags.buf, fmt.Errorf("%s: %w", op, err))
	}
	return nil
}

func (t *Terraform) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, t.Bin, args...)
	// On cancel, interrupt terraform so it can stop cleanly and release the
	// state lock; kill it only if it has not stopped a minute later.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = time.Minute
	cmd.Dir = t.Dir
	cmd.Env = append(os.Environ(),
		"CHECKPOINT_DISABLE=1",
		"TF_IN_AUTOMATION=1",
		"TF_INPUT=0",
	)
	cmd.Env = append(cmd.Env, t.Env...)
	return cmd
}

func (t *Terraform) stderr() io.Writer { return orDiscard(t.Stderr) }

// noLog drops terraform's own logging from cmd's environment: it could
// copy values into a log.
func noLog(cmd *exec.Cmd) {
	cmd.Env = slices.DeleteFunc(cmd.Env, func(kv string) bool { return strings.HasPrefix(kv, "TF_LOG") })
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// ProvidersSchema runs providers schema -json and passes its stdout, the
// schemas of the providers the root requires, to read.
func (t *Terraform) ProvidersSchema(ctx context.Context, read func(io.Reader) error) error {
	return t.stream(ctx, read, "providers", "schema", "-json")
}

// Version returns the first line of the binary's version output, such as
// "Terraform v1.11.4" or "OpenTofu v1.12.6".
func (t *Terraform) Version(ctx context.Context) (string, error) {
	var out bytes.Buffer
	if err := t.runTo(ctx, &out, io.Discard, "version"); err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(out.String(), "\n")
	return strings.TrimSpace(line), nil
}
