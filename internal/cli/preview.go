package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"github.com/captf/captf/internal/inputfile"
	"github.com/captf/captf/internal/preview"
	"github.com/captf/captf/internal/preview/terraform"
	"github.com/captf/captf/internal/runner"
	"github.com/captf/captf/internal/version"
	"github.com/captf/captf/pkg/changeset"
)

// previewShort is the preview command's line in captf's help, the same
// for the command that hands off (captf) and the one that runs it.
const previewShort = "Plan a pull request across deploy tools and apply exactly what was approved"

// digestPattern is the shape of a change-set digest.
var digestPattern = regexp.MustCompile(`^` + regexp.QuoteMeta(changeset.DigestPrefix) + `[0-9a-f]{64}$`)

// ExitHeld: the preview apply applied what it could; members were held
// until their upstream applied and their new plan needs its own approval.
const ExitHeld = 4

// Files a preview writes into --out.
const (
	DocumentFile = "changeset.json"
	NoteFile     = "note.md"
)

const previewExitCodes = `Exit codes:
  0  planned (plan), or everything applied (apply)
  1  a member's plan failed, or an apply failed (its dependents were not
     applied); stdout could not be written; interrupted
  2  bad usage or bad input, before anything is planned: the project file (a
     terraform root outside the repository), a flag, a malformed
     --expect-digest, a --root outside a git work tree, the seed outputs
     file (also one that is not a regular file of at most 16 MiB), a
     changeset.json or note.md in --out that is not a regular file, the
     preview key
  3  the change-set digest (or a member's plan) moved, or plan and apply read
     different preview keys: nothing of it was applied
  4  apply only: members were held until their upstream applied; they were
     planned again, and that plan needs its own approval (its digest is printed)`

// exitCode maps an error to the documented exit code, preview errors
// included.
func exitCode(err error) int {
	switch {
	case err == nil:
		return runner.ExitOK
	case errors.Is(err, preview.ErrInvalid):
		return runner.ExitBadInput
	case errors.Is(err, preview.ErrMoved):
		return runner.ExitPlanChanged
	case errors.Is(err, preview.ErrPlanFailed), errors.Is(err, preview.ErrApplyFailed), errors.Is(err, errLintFindings):
		return runner.ExitFailure
	case errors.Is(err, preview.ErrHeld):
		return ExitHeld
	}
	return runner.ExitCode(err)
}

// previewOptions are the flags of preview plan and apply.
type previewOptions struct {
	root        string
	file        string
	env         string
	changedFrom string
	seedFile    string
	keyFile     string
	out         string
	noteLimit   int
	json        bool
	registry    preview.Registry
	// tmp is the command's private directory, set by options.
	tmp *runDir
}

func (o *previewOptions) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.root, "root", "", "the repository root (default: the top of the git work tree holding the current directory)")
	f.StringVar(&o.file, "file", "", "the project file (default: ROOT/"+preview.ProjectFile+")")
	f.StringVar(&o.env, "env", "", "the environment of the project file whose vars the steps get")
	f.StringVar(&o.changedFrom, "changed-from", "", "a git revision: plan only the components whose steps read a file changed since it, and their dependents (default: every component)")
	f.StringVar(&o.seedFile, "seed-outputs", "", `a JSON file {"component": {"output": value}} supplying outputs instead of reading them`)
	f.StringVar(&o.out, "out", "", "the directory that gets "+DocumentFile+" and "+NoteFile+" (default: ROOT/.captf/preview)")
	f.IntVar(&o.noteLimit, "note-limit", changeset.MaxNoteLength, "the most characters the note may hold (GitHub's comment limit by default; GitLab's is 1000000)")
	f.StringVar(&o.keyFile, "key-file", "", "file holding the preview key, at least 32 bytes, which binds sensitive values into the digest; plan and apply need the same key (default: ROOT/.captf/"+PreviewKeyFile+", created on first use)")
}

// minNoteLimit is the smallest --note-limit: room for the marker, the
// title, the digest and a line about what was left out.
const minNoteLimit = 1000

// PreviewKeyFile is the name of the default preview key in ROOT/.captf.
const PreviewKeyFile = "preview-key"

// keyHint follows a moved digest: the most common cause in CI besides a
// real change is a plan and an apply that read different keys.
const keyHint = "plan and apply must read the same preview key (--key-file, default ROOT/.captf/" + PreviewKeyFile + "); under another key the digest differs"

// key reads --key-file, or ROOT/.captf/preview-key, creating that on
// first use. A missing or short key is bad input (exit 2).
func (o *previewOptions) key(ctx context.Context, root string, stderr io.Writer) ([]byte, error) {
	if o.keyFile != "" {
		return runner.ReadKeyFile(ctx, o.keyFile, "preview key", stderr)
	}
	return runner.StateKey(ctx, root, PreviewKeyFile, "preview key", stderr)
}

// options checks the flags and loads the project file. Close the
// previewOptions after a nil error.
func (o *previewOptions) options(ctx context.Context, stderr io.Writer) (preview.Options, error) {
	if o.noteLimit < minNoteLimit {
		return preview.Options{}, fmt.Errorf("%w: --note-limit %d: a note needs at least %d characters", preview.ErrInvalid, o.noteLimit, minNoteLimit)
	}
	root := o.root
	if root == "" {
		out, err := exec.CommandContext(ctx, "git", "rev-parse", "--show-toplevel").Output()
		if err != nil {
			return preview.Options{}, fmt.Errorf("%w: not in a git work tree; name the repository with --root", preview.ErrInvalid)
		}
		root = strings.TrimSpace(string(out))
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return preview.Options{}, err
	}
	if err := checkDir(root, "--root"); err != nil {
		return preview.Options{}, fmt.Errorf("%w: %w", preview.ErrInvalid, err)
	}
	// A change set is read from a repository: what git ignores and what
	// changed since --changed-from come from git.
	var gitErr bytes.Buffer
	check := exec.CommandContext(ctx, "git", "-C", root, "rev-parse", "--show-toplevel")
	check.Stderr = &gitErr
	if err := check.Run(); err != nil {
		why := strings.TrimSpace(gitErr.String())
		if !strings.Contains(why, "not a git repository") {
			// Another refusal than no repository: git's own words say
			// which (a repository of another owner, say).
			return preview.Options{}, fmt.Errorf("%w: --root %s: git refuses it: %s", preview.ErrInvalid, root, firstLines(why, 4))
		}
		return preview.Options{}, fmt.Errorf("%w: --root %s is not in a git work tree", preview.ErrInvalid, root)
	}
	file := filepath.Join(root, preview.ProjectFile)
	if o.file != "" {
		if file, err = filepath.Abs(o.file); err != nil {
			return preview.Options{}, err
		}
	}
	proj, err := preview.LoadProject(file, o.registry.Known)
	if err != nil {
		return preview.Options{}, err
	}
	opts := preview.Options{Root: root, Project: proj, Env: o.env, ChangedFrom: o.changedFrom, Registry: o.registry, Log: stderr, Output: stderr}
	if o.seedFile != "" {
		if opts.Seed, err = preview.ReadSeed(ctx, o.seedFile); err != nil {
			return preview.Options{}, err
		}
	}
	if o.changedFrom != "" {
		// The apply command names the merge base, which still selects the
		// same components once the change merged.
		if opts.ChangedFrom, err = preview.MergeBase(ctx, root, o.changedFrom); err != nil {
			return preview.Options{}, err
		}
	}
	if o.out == "" {
		if err := runner.EnsureStateDir(root); err != nil {
			return preview.Options{}, err
		}
		o.out = filepath.Join(root, runner.StateDir, "preview")
	}
	if err := checkOut(o.out); err != nil {
		return preview.Options{}, err
	}
	if opts.Key, err = o.key(ctx, root, stderr); err != nil {
		return preview.Options{}, err
	}
	if o.tmp, err = openRunDir(root); err != nil {
		return preview.Options{}, err
	}
	opts.TempDir = o.tmp.path
	return opts, nil
}

// MaxDocumentBytes is the largest change-set document in --out that preview
// apply reads back.
const MaxDocumentBytes = 64 << 20

// checkOut refuses an --out whose document or note exists and is not a
// regular file: writing to a named pipe waits for a reader, and a device
// takes what is written and keeps nothing.
func checkOut(out string) error {
	for _, name := range []string{DocumentFile, NoteFile} {
		path := filepath.Join(out, name)
		info, err := os.Stat(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%w: --out: %w", preview.ErrInvalid, err)
		}
		if !info.Mode().IsRegular() {
			return fmt.Errorf("%w: --out: %s is %s: %w", preview.ErrInvalid, path, inputfile.Kind(info), inputfile.ErrNotRegular)
		}
	}
	return nil
}

// firstLines is the first n lines of s.
func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

// Close removes the command's private directory.
func (o *previewOptions) Close() {
	if o.tmp != nil {
		o.tmp.Close()
	}
}

// applyCommand is the exact command that applies digest with this run's
// flags.
func (o *previewOptions) applyCommand(opts preview.Options, digest string) string {
	args := []string{"captf", "preview", "apply"}
	if o.root != "" {
		args = append(args, "--root", o.root)
	}
	if o.file != "" {
		args = append(args, "--file", o.file)
	}
	if o.env != "" {
		args = append(args, "--env", o.env)
	}
	if opts.ChangedFrom != "" {
		args = append(args, "--changed-from", opts.ChangedFrom)
	}
	if o.seedFile != "" {
		args = append(args, "--seed-outputs", o.seedFile)
	}
	if o.keyFile != "" {
		args = append(args, "--key-file", o.keyFile)
	}
	return shellJoin(append(args, "--expect-digest", digest))
}

// write saves the document and the note into --out and returns the note.
func (o *previewOptions) write(opts preview.Options, doc *changeset.Document, title string) (string, error) {
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return "", fmt.Errorf("output directory: %w", err)
	}
	docPath := filepath.Join(o.out, DocumentFile)
	note := changeset.Note(doc, changeset.NoteOptions{
		ApplyCommand: o.applyCommand(opts, doc.Digest),
		DocumentFile: docPath,
		Title:        title,
		Limit:        o.noteLimit,
	})
	raw, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return "", fmt.Errorf("change-set document: %w", err)
	}
	if err := os.WriteFile(docPath, append(raw, '\n'), 0o644); err != nil {
		return "", fmt.Errorf("change-set document: %w", err)
	}
	if err := os.WriteFile(filepath.Join(o.out, NoteFile), []byte(note), 0o644); err != nil {
		return "", fmt.Errorf("note: %w", err)
	}
	return note, nil
}

func (o *previewOptions) title() string {
	if o.env != "" {
		return "captf preview: " + o.env
	}
	return "captf preview"
}

func newPreview(stdout, stderr io.Writer, registry preview.Registry) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "preview",
		Short: previewShort,
		Long: `captf preview plans every component of the project file (` + preview.ProjectFile + `) that a
change touches, across terraform, kubectl, CloudFormation, ARM templates and
Config Connector, and prints one digest over the whole change set. captf
preview apply plans again and applies only when that digest holds.

` + previewExitCodes,
		Args: cobra.ArbitraryArgs,
		RunE: group,
		// This command is the preview binary's whole command line, so
		// captf-preview --version (and captf preview --version, handed off)
		// names the preview binary and its own version.
		Version: version.Get(),
	}
	cmd.SetVersionTemplate(PreviewBinary + " version {{.Version}}\n")
	cmd.AddCommand(newPreviewPlan(stdout, stderr, registry), newPreviewApply(stdout, stderr, registry))
	return cmd
}

func newPreviewPlan(stdout, stderr io.Writer, registry preview.Registry) *cobra.Command {
	o := previewOptions{registry: registry}
	cmd := &cobra.Command{
		Use:   "plan",
		Short: "Plan the change set and print its note and digest",
		Long: `Plans every member of the change without changing anything, writes the
change-set document (` + DocumentFile + `) and the Markdown note (` + NoteFile + `) into --out, and
prints the note, or the document with --json.

` + previewExitCodes,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts, err := o.options(cmd.Context(), stderr)
			if err != nil {
				return err
			}
			defer o.Close()
			p, err := preview.PlanChangeSet(cmd.Context(), opts)
			if err != nil {
				return err
			}
			defer p.Close()
			note, err := o.write(opts, p.Document, o.title())
			if err != nil {
				return err
			}
			if o.json {
				err = printJSON(stdout, p.Document)
			} else {
				_, err = io.WriteString(stdout, note)
			}
			if err != nil {
				return err
			}
			return failedMembers(p.Document)
		},
	}
	o.register(cmd)
	cmd.Flags().BoolVar(&o.json, "json", false, "print the change-set document as JSON instead of the note")
	return cmd
}

// failedMembers is an error naming the members whose plan failed.
func failedMembers(doc *changeset.Document) error {
	var failed []string
	for _, m := range doc.Members {
		if m.Status == changeset.StatusFailed {
			failed = append(failed, m.Name)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", preview.ErrPlanFailed, strings.Join(failed, ", "))
}

// applyReport is preview apply's JSON output.
type applyReport struct {
	Approved   string                     `json:"approved"`
	Digest     string                     `json:"digest,omitempty"`
	Components []preview.ComponentOutcome `json:"components"`
	// Next is the plan of the held members' round, to approve next.
	Next *changeset.Document `json:"next,omitempty"`
	// Plan is the fresh plan when nothing was applied because it failed
	// or moved.
	Plan *changeset.Document `json:"plan,omitempty"`
	// RuntimeMoved names, when the digest moved, the blocks the fresh plan
	// runs at apply outside the plan (provisioners, provider
	// configurations) that are new or differ from the approved plan's, as
	// its document in --out records them: "<kind> <member>: <address>
	// <block>", never a value.
	RuntimeMoved []string `json:"runtimeMoved,omitempty"`
}

// runtimeMoved compares the approved document in --out, when it is the
// one approved, with the fresh plan's: which blocks that run at apply
// moved. Nothing when that document is not at hand.
func (o *previewOptions) runtimeMoved(ctx context.Context, expect string, fresh *changeset.Document) []string {
	raw, err := inputfile.Read(ctx, filepath.Join(o.out, DocumentFile), MaxDocumentBytes)
	if err != nil {
		return nil
	}
	var approved changeset.Document
	if json.Unmarshal(raw, &approved) != nil || approved.Digest != expect {
		return nil
	}
	return terraform.RuntimeMoved(&approved, fresh)
}

func newPreviewApply(stdout, stderr io.Writer, registry preview.Registry) *cobra.Command {
	o := previewOptions{registry: registry}
	var expect string
	cmd := &cobra.Command{
		Use:   "apply --expect-digest cs1:...",
		Short: "Plan again and apply only when the change set digests to the approved value",
		Long: `Plans every member again before applying any. When a member fails or the
digest is not --expect-digest, nothing is applied; the fresh note is printed.
Otherwise the components are applied in dependency order, each planning step
exactly as planned and shell steps run in the repository root; a failure
blocks only the components that depend on it. Members held until their
upstream applied are planned again; that plan's note and digest are printed
and written to --out for their own approval (exit 4).

` + previewExitCodes,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !digestPattern.MatchString(expect) {
				return fmt.Errorf("%w: --expect-digest %q: want the %s digest a preview plan printed (%s and 64 hex digits)", preview.ErrInvalid, expect, changeset.DigestPrefix, changeset.DigestPrefix)
			}
			opts, err := o.options(cmd.Context(), stderr)
			if err != nil {
				return err
			}
			defer o.Close()
			a, err := preview.ApplyChangeSet(cmd.Context(), opts, expect)
			if a == nil {
				return err
			}
			if errors.Is(err, preview.ErrMoved) && len(a.Components) == 0 {
				err = fmt.Errorf("%w (if the change did not move: %s)", err, keyHint)
			}
			defer a.Close()
			report := applyReport{Approved: expect, Digest: a.Fresh.Document.Digest, Components: a.Components}
			if errors.Is(err, preview.ErrMoved) && len(a.Components) == 0 {
				// Read before the fresh plan replaces the approved document.
				report.RuntimeMoved = o.runtimeMoved(cmd.Context(), expect, a.Fresh.Document)
			}
			var note string
			var werr error
			switch {
			case a.Next != nil:
				report.Next = a.Next.Document
				note, werr = o.write(opts, a.Next.Document, o.title()+" (held members, next round)")
			case errors.Is(err, preview.ErrPlanFailed), len(a.Components) == 0 && err != nil:
				report.Plan = a.Fresh.Document
				note, werr = o.write(opts, a.Fresh.Document, o.title())
			}
			if werr != nil {
				return errors.Join(err, werr)
			}
			if o.json {
				return errors.Join(err, printJSON(stdout, report))
			}
			printOutcomes(stdout, a.Components)
			if len(report.RuntimeMoved) > 0 {
				fmt.Fprintln(stdout, "What runs at apply outside the plan moved since the approved plan (blocks; values are never shown):")
				for _, l := range report.RuntimeMoved {
					fmt.Fprintf(stdout, "  %s\n", l)
				}
			}
			if note != "" {
				if a.Next != nil {
					fmt.Fprintln(stdout, "\nHeld members were planned again after their upstream applied; this plan needs its own approval:")
				} else {
					fmt.Fprintln(stdout, "\nNothing was applied. The fresh plan:")
				}
				fmt.Fprintf(stdout, "\n%s", note)
			}
			return err
		},
	}
	o.register(cmd)
	cmd.Flags().BoolVar(&o.json, "json", false, "print what was applied as JSON: {approved, digest, components, next, plan}")
	cmd.Flags().StringVar(&expect, "expect-digest", "", "the approved "+changeset.DigestPrefix+" change-set digest (required)")
	return cmd
}

func printOutcomes(w io.Writer, outcomes []preview.ComponentOutcome) {
	for _, c := range outcomes {
		line := fmt.Sprintf("captf: %-8s %s", c.Outcome, c.Component)
		if c.Error != "" {
			line += ": " + c.Error
		}
		fmt.Fprintln(w, line)
	}
}
