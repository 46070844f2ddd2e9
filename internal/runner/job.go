package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/captf/captf/internal/planlog"
	"github.com/captf/captf/internal/redact"
	"github.com/captf/captf/internal/render"
	"github.com/captf/captf/internal/tfexec"
	"github.com/captf/captf/pkg/fingerprint"
)

// InputFiles are the rendered inputs a Job receives (spec 004): the root
// module and its variables.
var InputFiles = []string{"main.tf.json", "terraform.tfvars.json"}

// Job is one run of a runner Job: the operation, where its inputs, runtime
// and key are mounted, and where the report for the manager goes.
type Job struct {
	Operation  string // plan, apply, destroy, drift, refresh or restore
	Inputs     string // folder holding InputFiles
	Module     string // the module folder; linked as ./module in Workdir
	Workdir    string // writable folder the root module runs in
	Runtime    string // folder holding the terraform or tofu binary
	KeyFile    string // the plan key; required for plan and approved apply
	ExpectPlan string // the approved hash; empty for an ungated apply
	// Guard has an ungated apply plan first and apply that plan only if it
	// deletes or replaces no resource (the destructive-plan guard).
	Guard bool
	// AllowDeletesHash, with Guard, lets the plan delete or replace
	// resources when the inputs' approval hash (what main.tf.json records)
	// is this one: the approval of a pool's ExportsChange plan binds that
	// input set, not a plan hash.
	AllowDeletesHash string
	// InputsDigest is render.RunDigest of the inputs the manager wrote for
	// this Job, keyed with the plan key: required with AllowDeletesHash,
	// so that what may delete is the input set the manager rendered, not
	// a copy someone edited in the per-run Secret.
	InputsDigest string
	// AppliedInputs, with Guard, is a folder holding the InputFiles of
	// the last successful apply: the Job applies a change of the values
	// of Unapproved alone, which needs no new approval, once it has shown
	// that it is only that (applyUnapproved).
	AppliedInputs string
	Unapproved    []string
	// ReviewedDeletes and ReviewedDestroy, with AllowDeletesHash, are
	// what the approved plan deletes or replaces: the addresses its
	// summary lists and how many in all (a summary lists up to 50
	// resources). The apply refuses a delete or replace of another
	// address, beyond the count the summary leaves unlisted.
	ReviewedDeletes []string
	ReviewedDestroy int
	// StateLineage is the lineage of the state the manager read when it
	// decided on this Job: a plan of a state of another lineage (one
	// deleted or replaced since) applies nothing (ErrStateReplaced); the
	// operations that run without a saved plan run with one when it is
	// set. Empty: no state was read, or none is expected (a first apply,
	// a restore).
	StateLineage string
	// ReplaceMembers, with a plan or an apply, are provider IDs of a
	// pool's members whose resources the plan replaces: the addresses
	// come from the state's member_addresses output (replaceFlags).
	ReplaceMembers []string
	// BackupDigests are the chunks' digests of the backup a restore Job
	// pushes (the backup's tfstate.AnnotationDigests); empty: unchecked.
	BackupDigests string
	// MessagePath receives the Message (the container's termination
	// message file).
	MessagePath string
	// Stdout and Stderr are the Job's log: terraform's own rendering,
	// with the values of the inputs' sensitive variables, and those a
	// plan marks sensitive, hidden (internal/redact).
	Stdout io.Writer
	Stderr io.Writer
}

// Run runs the Job, writes its Message and returns the exit code. A plan
// or approved-apply Job whose key is missing or short fails before any
// step runs.
func (j *Job) Run(ctx context.Context) int {
	log := redact.NewLog(j.Stdout, j.Stderr)
	defer log.Flush()
	msg, err := j.run(ctx, log)
	msg.Operation = j.Operation
	switch {
	case err == nil:
	case errors.Is(err, ErrPlanChanged):
		msg.Outcome = OutcomePlanChanged
	case errors.Is(err, ErrDestructive):
		msg.Outcome, msg.Error = OutcomeDestructive, err.Error()
	case errors.Is(err, ErrNeedsApproval):
		msg.Outcome, msg.Error = OutcomeNeedsApproval, err.Error()
	case ExitCode(err) == ExitBadInput:
		msg.Outcome, msg.Error = OutcomeBadInput, err.Error()
	default:
		msg.Outcome, msg.Error = OutcomeFailed, err.Error()
	}
	if err != nil {
		fmt.Fprintf(log.Stderr, "captf-runner: %v\n", err)
	}
	if werr := os.WriteFile(j.MessagePath, msg.Encode(), 0o644); werr != nil {
		fmt.Fprintf(log.Stderr, "captf-runner: write the report: %v\n", werr)
		return ExitFailure
	}
	return ExitCode(err)
}

func (j *Job) run(ctx context.Context, log *redact.Log) (Message, error) {
	var msg Message
	gated := j.Operation == "plan" || (j.Operation == "apply" && j.ExpectPlan != "")
	if !slices.Contains([]string{"plan", "apply", "destroy", "drift", "refresh", "restore"}, j.Operation) {
		return msg, fmt.Errorf("%w: unknown operation %q", ErrBadInput, j.Operation)
	}
	if err := CheckHash(j.ExpectPlan); err != nil {
		return msg, err
	}
	if j.AllowDeletesHash != "" && (!j.Guard || !inputsHashPattern.MatchString(j.AllowDeletesHash)) {
		return msg, fmt.Errorf("%w: --allow-deletes-hash %q: an inputs hash (h2: and 64 hex digits) with --guard is expected", ErrBadInput, j.AllowDeletesHash)
	}
	if j.AllowDeletesHash != "" && !digestPattern.MatchString(j.InputsDigest) {
		return msg, fmt.Errorf("%w: --allow-deletes-hash needs --inputs-digest (%s and 64 hex digits), got %q", ErrBadInput, render.DigestPrefix, j.InputsDigest)
	}
	if j.AllowDeletesHash != "" && (j.ReviewedDestroy < len(j.ReviewedDeletes) || slices.Contains(j.ReviewedDeletes, "")) {
		return msg, fmt.Errorf("%w: --allow-deletes-hash needs --reviewed-destroy (at least as many as the %d --reviewed-delete addresses, none empty)", ErrBadInput, len(j.ReviewedDeletes))
	}
	if j.AppliedInputs != "" && (!j.Guard || j.AllowDeletesHash != "" || len(j.Unapproved) == 0) {
		return msg, fmt.Errorf("%w: --applied-inputs is expected with --guard and --unapproved-vars, without --allow-deletes-hash", ErrBadInput)
	}
	if len(j.ReplaceMembers) > 0 && (j.Operation != "plan" && j.Operation != "apply" || j.AppliedInputs != "") {
		return msg, fmt.Errorf("%w: --replace-member is for a plan or an apply, without --applied-inputs", ErrBadInput)
	}
	if len(j.ReplaceMembers) > maxReplaceMembers || slices.Contains(j.ReplaceMembers, "") {
		return msg, fmt.Errorf("%w: --replace-member: up to %d provider IDs, none empty", ErrBadInput, maxReplaceMembers)
	}
	var key []byte
	if gated || j.InputsDigest != "" {
		var err error
		if key, err = ReadKey(ctx, j.KeyFile); err != nil {
			return msg, err
		}
	}
	var hasher *fingerprint.Hasher
	if gated {
		var err error
		if hasher, err = fingerprint.New(key); err != nil {
			return msg, fmt.Errorf("%w: %w", ErrBadInput, err)
		}
		// The inputs hash is captf's record in the state, not a change of
		// the module: it is neither counted, shown nor approved, and an
		// apply whose plan changes only it still applies (Runner.Apply).
		// So are the approval hash beside it and the record of the
		// members a root replaces.
		hasher.IgnoreOutputs = []string{render.ApprovalOutput, render.HashOutput, render.ReplacedOutput}
	}
	bin, err := j.binary()
	if err != nil {
		return msg, err
	}
	if err := j.stage(); err != nil {
		return msg, err
	}
	staged, err := readInputs(j.Workdir)
	if err != nil {
		return msg, err
	}
	if err := hideInputs(log, staged); err != nil {
		return msg, err
	}
	if err := j.checkDigest(key); err != nil {
		return msg, err
	}
	tf := &tfexec.Terraform{Bin: bin, Dir: j.Workdir, Stdout: log.Stdout, Stderr: log.Stderr}
	if j.Operation == "restore" {
		// Not gated either: no plan key is mounted, and the root module is
		// the backend alone, with no module and no endpoint to forward.
		restored, err := j.restore(ctx, tf)
		msg.Restored = restored
		if err == nil {
			msg.Outcome = OutcomeRestored
		}
		return msg, err
	}
	if err := j.passDeclared(); err != nil {
		return msg, err
	}
	if err := j.forwardEndpoint(); err != nil {
		return msg, err
	}
	r := &Runner{
		TF:       tf,
		Hasher:   hasher,
		Progress: log.Stderr,
		Log:      log,
		Lineage:  j.StateLineage,
	}
	if len(j.ReplaceMembers) > 0 {
		call, err := moduleCall(filepath.Join(j.Workdir, "main.tf.json"))
		if err != nil {
			return msg, err
		}
		r.replaceWith = func(ctx context.Context) ([]string, error) {
			return replaceFlags(ctx, r, j.Workdir, call, j.ReplaceMembers)
		}
	}
	switch {
	case j.Operation == "plan":
		p, err := r.Plan(ctx)
		if err != nil {
			return msg, err
		}
		defer p.Close()
		msg.Outcome, msg.Plan = OutcomePlanned, &p.Report
		// The log's closing section: what the review page shows of
		// each change, names only.
		// A log that cannot be written fails nothing, as terraform's own.
		_ = planlog.Write(log.Stdout, p.Changed)
		return msg, nil
	case j.Operation == "drift":
		// A drift check is not gated: it reports counts and addresses,
		// and no plan key is mounted (spec 004).
		d, err := r.Drift(ctx)
		if err != nil {
			return msg, err
		}
		msg.Outcome, msg.Drift = OutcomeChecked, d
		// The refresh brought the outputs up to date: sample the health.
		outs, err := forwardedOutputs(ctx, r.TF, j.Workdir)
		msg.Health = healthState(outs)
		return msg, err
	case j.Operation == "refresh":
		// A refresh (a pool's membership) is not gated either: a
		// refresh-only apply changes no infrastructure, and writes a new
		// state only when what it read changed.
		if err := r.prepareUnplanned(ctx); err != nil {
			return msg, err
		}
		if err := r.ApplyRefreshOnly(ctx); err != nil {
			return msg, err
		}
		msg.Outcome = OutcomeRefreshed
		return msg, nil
	case j.Operation == "destroy":
		// Destroy is not gated (spec 004 mounts no plan key on it).
		if err := r.prepareUnplanned(ctx); err != nil {
			return msg, err
		}
		if err := r.Destroy(ctx); err != nil {
			return msg, err
		}
		msg.Outcome = OutcomeDestroyed
		return msg, nil
	case gated:
		out, err := r.Apply(ctx, j.ExpectPlan)
		if out != nil {
			msg.Plan = &out.Fresh.Report
			msg.Outcome = OutcomeNoChanges
			if out.Applied {
				msg.Outcome = OutcomeApplied
			}
		}
		if err != nil {
			return msg, err
		}
		err = readContract(ctx, r.TF, j.Workdir, &msg)
		return msg, err
	case j.Guard:
		var c *Changes
		if j.AppliedInputs != "" {
			c, err = j.applyUnapproved(ctx, r)
		} else {
			var allow bool
			if allow, err = j.deletesAllowed(); err != nil {
				return msg, err
			}
			var deletes Deletes
			if allow {
				deletes = j.reviewed
			}
			c, err = r.Guarded(ctx, deletes)
		}
		msg.Guarded = c
		if err != nil {
			return msg, err
		}
		msg.Outcome = OutcomeApplied
		err = readContract(ctx, r.TF, j.Workdir, &msg)
		return msg, err
	default:
		if err := r.prepareUnplanned(ctx); err != nil {
			return msg, err
		}
		if err := r.ApplyAuto(ctx); err != nil {
			return msg, err
		}
		msg.Outcome = OutcomeApplied
		err = readContract(ctx, r.TF, j.Workdir, &msg)
		return msg, err
	}
}

// deletesAllowed reports whether the staged inputs are the input set
// --allow-deletes-hash allows to delete or replace: their root records
// that approval hash.
func (j *Job) deletesAllowed() (bool, error) {
	if j.AllowDeletesHash == "" {
		return false, nil
	}
	main, err := os.ReadFile(filepath.Join(j.Workdir, "main.tf.json"))
	if err != nil {
		return false, fmt.Errorf("%w: inputs: %w", ErrBadInput, err)
	}
	recorded, err := render.RootApprovalHash(main)
	if err != nil {
		return false, fmt.Errorf("%w: inputs: %w", ErrBadInput, err)
	}
	return recorded == j.AllowDeletesHash, nil
}

// reviewed allows the deletes and replacements of addresses that the
// approved plan's summary lists (ReviewedDeletes), and as many others as
// it counted without listing them (ReviewedDestroy beyond the list);
// otherwise it names those it did not review.
func (j *Job) reviewed(addresses []string) error {
	var extra []string
	for _, a := range addresses {
		if !slices.Contains(j.ReviewedDeletes, a) {
			extra = append(extra, a)
		}
	}
	if len(extra) <= j.ReviewedDestroy-len(j.ReviewedDeletes) {
		return nil
	}
	if len(extra) > MaxChangedResources {
		extra = append(extra[:MaxChangedResources], "…")
	}
	return fmt.Errorf("%w that the approved plan did not: %s; nothing was applied", ErrDestructive, strings.Join(extra, ", "))
}

// checkDigest checks the staged inputs against InputsDigest, when there
// is one.
func (j *Job) checkDigest(key []byte) error {
	if j.InputsDigest == "" {
		return nil
	}
	files, err := readInputs(j.Workdir)
	if err != nil {
		return err
	}
	if !render.CheckRunDigest(key, files[0], files[1], j.InputsDigest) {
		return fmt.Errorf("%w: the inputs are not those the manager wrote for this Job (--inputs-digest); nothing was applied", ErrBadInput)
	}
	return nil
}

// digestPattern is a render.RunDigest.
var digestPattern = regexp.MustCompile(`^` + render.DigestPrefix + `[0-9a-f]{64}$`)

// inputsHashPattern is an inputs or approval hash.
var inputsHashPattern = regexp.MustCompile(`^` + render.HashPrefix + `[0-9a-f]{64}$`)

// binary finds terraform or tofu in the runtime folder.
func (j *Job) binary() (string, error) {
	for _, name := range []string{"terraform", "tofu"} {
		p := filepath.Join(j.Runtime, name)
		if info, err := os.Stat(p); err == nil && !info.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: neither terraform nor tofu in %s", ErrBadInput, j.Runtime)
}

// stage copies the rendered inputs into the work folder and links the
// module there as ./module, the source the rendered root module names (so
// the rendered inputs carry no path of the image). The inputs are
// read-only and written once per Job; terraform runs in the copy.
func (j *Job) stage() error {
	if err := os.MkdirAll(j.Workdir, 0o700); err != nil {
		return fmt.Errorf("work folder: %w", err)
	}
	if j.Module != "" {
		link := filepath.Join(j.Workdir, "module")
		if err := os.Remove(link); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("link the module: %w", err)
		}
		if err := os.Symlink(j.Module, link); err != nil {
			return fmt.Errorf("link the module: %w", err)
		}
	}
	files, err := readInputs(j.Inputs)
	if err != nil {
		return err
	}
	return writeInputs(j.Workdir, files)
}
