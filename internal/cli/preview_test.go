package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/captf/captf/internal/preview"
	"github.com/captf/captf/internal/preview/previewtest"
	"github.com/captf/captf/internal/runner"
	"github.com/captf/captf/pkg/changeset"
)

// The end-to-end test of captf preview runs the command line in-process on
// a fixture repository (testdata/preview, made a git repository with the
// real git) whose components have no step with plan: a real shell step, a
// component of s3-sync steps bound by its composition digest. The real
// capabilities (terraform, kubectl, CloudFormation) are tested end to end
// in preview_e2e_test.go.

const varCanary = "CANARY-VAR-3b8e"

// fixtureRepo copies the fixture src (e.g. testdata/preview) into a git
// repository, committed once, and makes it the current directory.
func fixtureRepo(t *testing.T, src string) string {
	t.Helper()
	root := t.TempDir()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if rel == "gitignore" {
			rel = ".gitignore" // kept under another name so it does not apply to captf's own tree
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dst := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	gitRun(t, root, "init", "-q", "-b", "main")
	gitCommit(t, root)
	t.Chdir(root)
	return root
}

func gitRun(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

func gitCommit(t *testing.T, dir string) {
	t.Helper()
	gitRun(t, dir, "add", "-A")
	gitRun(t, dir, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "c")
}

func readDocument(t *testing.T, path string) *changeset.Document {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d changeset.Document
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &d
}

func TestPreviewEndToEnd(t *testing.T) {
	goldenNote, err := filepath.Abs("testdata/preview-note.md")
	if err != nil {
		t.Fatal(err)
	}
	root := fixtureRepo(t, "testdata/preview")
	out := filepath.Join(root, ".captf", "preview")
	// A build output git ignores as a whole, which site syncs.
	if err := os.MkdirAll(filepath.Join(root, "dist"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(root, "dist", "app.js"), []byte("built"), 0o644)

	// Plan: the note is printed and written with the document.
	plan := captf(t, "preview", "plan", "--env", "prod").want(t, runner.ExitOK)
	note, err := os.ReadFile(filepath.Join(out, NoteFile))
	if err != nil {
		t.Fatal(err)
	}
	if plan.stdout != string(note) {
		t.Error("the printed note differs from note.md")
	}
	goldenFile(t, goldenNote, plan.stdout)
	doc := readDocument(t, filepath.Join(out, DocumentFile))
	if got, _ := doc.ComputeDigest(); got != doc.Digest || !strings.Contains(plan.stdout, "captf preview apply --env prod --expect-digest "+doc.Digest) {
		t.Fatalf("digest %s, recomputed %s; note:\n%s", doc.Digest, got, plan.stdout)
	}
	var got []string
	for _, m := range doc.Members {
		got = append(got, m.Name+" "+m.Capability+" "+m.Status)
		for _, h := range m.Holes {
			got = append(got, "  "+h.Address+" "+strings.SplitN(h.Reason, " ", 4)[0])
		}
	}
	want := []string{
		"announce composition planned", "  greet unbound:",
		"site composition planned", "  assets unbound:",
		"notify composition planned", "  shell unbound:",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("members (-want +got):\n%s", diff)
	}
	if j := captf(t, "preview", "plan", "--env", "prod", "--json").want(t, runner.ExitOK); !strings.Contains(j.stdout, `"digest": "`+doc.Digest+`"`) {
		t.Errorf("--json prints another document:\n%s", j.stdout)
	}
	if _, err := os.Stat("announced.txt"); err == nil {
		t.Fatal("a shell step ran at plan time")
	}

	// A digest that is not the plan's applies nothing and names both.
	other := changeset.DigestPrefix + strings.Repeat("0", 64)
	moved := captf(t, "preview", "apply", "--env", "prod", "--expect-digest", other).want(t, runner.ExitPlanChanged)
	if !strings.Contains(moved.stderr, other) || !strings.Contains(moved.stderr, doc.Digest) {
		t.Errorf("the refusal does not name both digests:\n%s", moved.stderr)
	}
	// A commit pushed after review that changes a deployed file moves it.
	write(t, filepath.Join(root, "site", "index.html"), []byte("<h1>v2</h1>\n"), 0o644)
	captf(t, "preview", "apply", "--env", "prod", "--expect-digest", doc.Digest).want(t, runner.ExitPlanChanged)
	if _, err := os.Stat("announced.txt"); err == nil {
		t.Fatal("a shell step ran although the digest moved")
	}
	write(t, filepath.Join(root, "site", "index.html"), []byte("<h1>v1</h1>\n"), 0o644)

	// The approved digest applies: the shell step runs with the
	// environment's vars; site cannot apply its s3-sync steps yet, which
	// blocks notify, its dependent, and only it.
	applied := captf(t, "preview", "apply", "--env", "prod", "--expect-digest", doc.Digest).want(t, runner.ExitFailure)
	greeting, err := os.ReadFile("announced.txt")
	if err != nil || string(greeting) != "hello-prod from announce\n" {
		t.Errorf("announced.txt = %q, %v", greeting, err)
	}
	if _, err := os.Stat("notified.txt"); err == nil {
		t.Error("notify ran although site, its upstream, did not apply")
	}
	for _, line := range []string{
		"captf: applied  announce",
		"captf: failed   site: step upload: captf cannot apply s3-sync steps yet (the digest binds them); nothing of site was applied",
		"captf: blocked  notify: upstream site did not apply",
	} {
		if !strings.Contains(applied.stdout, line) {
			t.Errorf("apply output lacks %q:\n%s", line, applied.stdout)
		}
	}

	// --changed-from plans only what a change touches; the approve command
	// names the merge base so it still selects it once merged.
	gitCommit(t, root)
	head := strings.TrimSpace(gitOutput(t, root, "rev-parse", "HEAD"))
	write(t, filepath.Join(root, "scripts", "announce.sh"), []byte("#!/bin/sh\necho changed > announced.txt\n"), 0o644)
	gitCommit(t, root)
	small := captf(t, "preview", "plan", "--env", "prod", "--changed-from", "HEAD~1").want(t, runner.ExitOK)
	doc2 := readDocument(t, filepath.Join(out, DocumentFile))
	if len(doc2.Members) != 1 || doc2.Members[0].Name != "announce" {
		t.Fatalf("members %+v, want announce alone", doc2.Members)
	}
	cmd := "captf preview apply --env prod --changed-from " + head + " --expect-digest " + doc2.Digest
	if !strings.Contains(small.stdout, cmd) {
		t.Fatalf("the note lacks %q:\n%s", cmd, small.stdout)
	}
	captf(t, strings.Fields(cmd)[1:]...).want(t, runner.ExitOK)
	if greeting, _ := os.ReadFile("announced.txt"); string(greeting) != "changed\n" {
		t.Errorf("announced.txt = %q after the second apply", greeting)
	}

	// No var value reached anything captf printed or wrote.
	for _, o := range []outcome{plan, moved, applied, small} {
		if strings.Contains(o.stdout+o.stderr, varCanary) {
			t.Errorf("a var's value was printed:\n%s\n%s", o.stdout, o.stderr)
		}
	}
	_ = filepath.WalkDir(filepath.Join(root, ".captf"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(path); strings.Contains(string(b), varCanary) {
				t.Errorf("%s holds a var's value", path)
			}
		}
		return nil
	})
}

func gitOutput(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return string(out)
}

func TestPreviewBadInput(t *testing.T) {
	root := fixtureRepo(t, "testdata/preview")
	cases := []struct {
		name string
		file string
		args []string
		want string
	}{
		{"unknown kind", "components:\n  a:\n    steps:\n      - kind: teleport\n", []string{"preview", "plan"},
			`captf.yaml:4: components.a.steps[0].kind: "teleport" is no step kind captf knows`},
		{"unknown environment", "", []string{"preview", "plan", "--env", "staging"}, `--env "staging"`},
		{"malformed digest", "", []string{"preview", "apply", "--expect-digest", "p2:abc"}, `--expect-digest "p2:abc"`},
		{"seed file missing", "", []string{"preview", "plan", "--seed-outputs", "nope.json"}, "seed outputs: open nope.json"},
		{"not a revision", "", []string{"preview", "plan", "--changed-from", "no-such-branch"}, "--changed-from no-such-branch"},
		{"unknown flag", "", []string{"preview", "plan", "--bogus"}, "unknown flag: --bogus"},
		{"note limit too small", "", []string{"preview", "plan", "--note-limit", "999"}, "--note-limit 999: a note needs at least 1000 characters"},
		{"digest of the right scheme, malformed", "", []string{"preview", "apply", "--expect-digest", "cs1:zz"}, `--expect-digest "cs1:zz": want the cs1: digest a preview plan printed (cs1: and 64 hex digits)`},
		{"a terraform root outside the repository", "components:\n  net:\n    steps:\n      - kind: terraform-apply\n        inputs: {root: ../outside}\n", []string{"preview", "plan"},
			`captf.yaml:4: components.net.steps[0]: input "root": ../outside leaves the repository`},
		{"a var file outside the repository", "components:\n  net:\n    steps:\n      - kind: terraform-apply\n        inputs: {root: site, varFiles: [/etc/passwd]}\n", []string{"preview", "apply", "--expect-digest", "cs1:" + strings.Repeat("0", 64)},
			`input "varFiles[0]": /etc/passwd is absolute`},
		{"a kubectl manifest outside the repository", "components:\n  app:\n    steps:\n      - kind: kubectl-apply\n        inputs: {manifest: ../outside/app.yaml}\n", []string{"preview", "plan"},
			`captf.yaml:4: components.app.steps[0]: inputs: manifest: ../outside/app.yaml leaves the repository`},
		{"a CloudFormation template outside the repository", "components:\n  stack:\n    steps:\n      - kind: cfn-deploy\n        inputs: {template: /etc/stack.yaml}\n", []string{"preview", "apply", "--expect-digest", "cs1:" + strings.Repeat("0", 64)},
			`captf.yaml:4: components.stack.steps[0]: input template: /etc/stack.yaml is absolute; want a path relative to the repository`},
		{"--root outside any repository", "", []string{"preview", "plan", "--root", filepath.Dir(root)}, "is not in a git work tree"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.file != "" {
				write(t, filepath.Join(root, "captf.yaml"), []byte(c.file), 0o644)
				defer gitRun(t, root, "checkout", "captf.yaml")
			}
			o := captf(t, c.args...).want(t, runner.ExitBadInput)
			if !strings.Contains(o.stderr, c.want) {
				t.Errorf("stderr lacks %q:\n%s", c.want, o.stderr)
			}
		})
	}
}

func goldenFile(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		write(t, path, []byte(got), 0o644)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden file (run go test -update once): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

// captfWith runs the command line with registry as its capabilities.
func captfWith(t *testing.T, registry preview.Registry, args ...string) outcome {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr, registry)
	return outcome{code, stdout.String(), stderr.String()}
}

// TestPreviewHeldAndFailed registers previewtest.Fake, a test double of a
// capability (the real ones are tested against their real servers), to
// drive the exit codes only a capability with plan reaches.
func TestPreviewHeldAndFailed(t *testing.T) {
	const canary = "CANARY-OUTPUT-77d0"
	root := t.TempDir()
	write(t, filepath.Join(root, "captf.yaml"), []byte(`
components:
  db:
    steps:
      - kind: fake-plan
        inputs:
          want: {db: "1"}
          lateOutputs: {host: db.internal, password: `+canary+`}
  app:
    steps:
      - kind: fake-plan
        inputs:
          want: {app: "1"}
          host: {stackOutput: {component: db, name: host}}
          password: {stackOutput: {component: db, name: password}}
`), 0o644)
	gitRun(t, root, "init", "-q", "-b", "main")
	gitCommit(t, root)
	t.Chdir(root)
	fake := previewtest.New("fake-plan")
	reg := preview.Registry{fake}
	out := filepath.Join(root, ".captf", "preview")

	plan := captfWith(t, reg, "preview", "plan").want(t, runner.ExitOK)
	doc := readDocument(t, filepath.Join(out, DocumentFile))
	if !strings.Contains(plan.stdout, "| `app` | fake-plan | held | ? | ? | ? | ? |") {
		t.Errorf("the note does not show app held:\n%s", plan.stdout)
	}

	apply := captfWith(t, reg, "preview", "apply", "--expect-digest", doc.Digest).want(t, ExitHeld)
	next := readDocument(t, filepath.Join(out, DocumentFile))
	if next.Digest == doc.Digest || !strings.Contains(apply.stdout, "captf preview apply --expect-digest "+next.Digest) {
		t.Fatalf("the next round's note and document disagree:\n%s", apply.stdout)
	}
	for _, line := range []string{"captf: applied  db", "captf: held     app", "| `app` | fake-plan | planned | 1 | 0 | 0 | 0 |"} {
		if !strings.Contains(apply.stdout, line) {
			t.Errorf("apply output lacks %q:\n%s", line, apply.stdout)
		}
	}
	final := captfWith(t, reg, "preview", "apply", "--expect-digest", next.Digest, "--json").want(t, runner.ExitOK)
	if diff := cmp.Diff([]string{"db", "db", "app"}, fake.Applied()); diff != "" {
		t.Errorf("applied (-want +got):\n%s", diff)
	}
	if got := fake.Request("app").Inputs["password"]; got != canary {
		t.Fatalf("app did not get db's output: %v", got)
	}

	// A member whose plan fails: plan exits 1, apply applies nothing.
	write(t, filepath.Join(root, "captf.yaml"), []byte("components:\n  db:\n    steps:\n      - kind: fake-plan\n        inputs: {fail: broken template}\n"), 0o644)
	failed := captfWith(t, reg, "preview", "plan").want(t, runner.ExitFailure)
	if !strings.Contains(failed.stdout, "- `db` (fake-plan): broken template") {
		t.Errorf("the note lacks the failure:\n%s", failed.stdout)
	}
	bad := readDocument(t, filepath.Join(out, DocumentFile))
	captfWith(t, reg, "preview", "apply", "--expect-digest", bad.Digest).want(t, runner.ExitFailure)
	if len(fake.Applied()) != 3 {
		t.Errorf("applied %v with a failed member", fake.Applied())
	}

	// Output values passed between components reach nothing captf
	// printed or wrote.
	for _, o := range []outcome{plan, apply, final, failed} {
		if strings.Contains(o.stdout+o.stderr, canary) {
			t.Errorf("an output value was printed:\n%s\n%s", o.stdout, o.stderr)
		}
	}
	_ = filepath.WalkDir(filepath.Join(root, ".captf"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(path); strings.Contains(string(b), canary) {
				t.Errorf("%s holds an output value", path)
			}
		}
		return nil
	})
}

// TestPreviewKey: the preview key is ROOT/.captf/preview-key, created on
// first use (32 bytes, mode 0600, ignored by git) and reused; --key-file
// names another. A plan and an apply under two keys digest apart: the
// apply exits 3, says why, and applies nothing. A key missing or short is
// refused before any member is planned (exit 2). No key reaches anything
// captf prints or writes. The capability is previewtest.Fake, which binds
// its sensitive value under the key as the real ones do (they are tested
// against their servers in TestPreviewAcrossTools).
func TestPreviewKey(t *testing.T) {
	const canary = "CANARY-FAKE-SECRET-41c7"
	root := t.TempDir()
	write(t, filepath.Join(root, "captf.yaml"), []byte("components:\n  a:\n    steps:\n      - kind: fake-plan\n        inputs: {want: {x: \"1\"}, secret: "+canary+"}\n"), 0o644)
	gitRun(t, root, "init", "-q", "-b", "main")
	gitCommit(t, root)
	t.Chdir(root)
	fake := previewtest.New("fake-plan")
	reg := preview.Registry{fake}
	out := filepath.Join(root, ".captf", "preview")
	var outcomes []outcome
	run := func(code int, args ...string) outcome {
		t.Helper()
		o := captfWith(t, reg, args...).want(t, code)
		outcomes = append(outcomes, o)
		return o
	}

	run(runner.ExitOK, "preview", "plan")
	first := readDocument(t, filepath.Join(out, DocumentFile))
	keyPath := filepath.Join(root, ".captf", PreviewKeyFile)
	info, err := os.Stat(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 || info.Size() != 32 {
		t.Errorf("%s: mode %v, %d bytes; want 0600 and 32", keyPath, info.Mode().Perm(), info.Size())
	}
	key, err := os.ReadFile(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	if status := gitOutput(t, root, "status", "--porcelain", "--untracked-files=all"); status != "" {
		t.Errorf("git sees captf's files:\n%s", status)
	}
	run(runner.ExitOK, "preview", "plan")
	if again, _ := os.ReadFile(keyPath); !bytes.Equal(again, key) {
		t.Error("a second plan replaced the preview key")
	}
	if d := readDocument(t, filepath.Join(out, DocumentFile)).Digest; d != first.Digest {
		t.Errorf("two plans under one key: %s and %s", first.Digest, d)
	}

	// Another key, as a CI job with another secret would have.
	other := filepath.Join(t.TempDir(), "other-key")
	write(t, other, previewtest.OtherKey(), 0o600)
	withOther := run(runner.ExitOK, "preview", "plan", "--key-file", other)
	second := readDocument(t, filepath.Join(out, DocumentFile))
	if second.Digest == first.Digest {
		t.Errorf("two keys, one digest %s", first.Digest)
	}
	if want := "captf preview apply --key-file " + other + " --expect-digest " + second.Digest; !strings.Contains(withOther.stdout, want) {
		t.Errorf("the note's apply command is not %q:\n%s", want, withOther.stdout)
	}
	moved := run(runner.ExitPlanChanged, "preview", "apply", "--key-file", other, "--expect-digest", first.Digest)
	for _, want := range []string{first.Digest, second.Digest, "plan and apply must read the same preview key"} {
		if !strings.Contains(moved.stderr, want) {
			t.Errorf("the refusal lacks %q:\n%s", want, moved.stderr)
		}
	}
	if got := fake.Applied(); len(got) != 0 {
		t.Fatalf("applied %v under another key", got)
	}

	// Missing and short keys: refused before any member is planned.
	short := filepath.Join(t.TempDir(), "short-key")
	write(t, short, previewtest.Key()[:31], 0o600)
	bad := []struct {
		args []string
		want string
	}{
		{[]string{"preview", "plan", "--key-file", short}, "preview key file " + short + " holds 31 bytes; at least 32 are needed"},
		{[]string{"preview", "apply", "--key-file", short, "--expect-digest", first.Digest}, "holds 31 bytes"},
		{[]string{"preview", "plan", "--key-file", short + "-none"}, "preview key file " + short + "-none does not exist"},
		{[]string{"preview", "apply", "--key-file", short + "-none", "--expect-digest", first.Digest}, "does not exist"},
	}
	// A key file without end, and a malformed digest, too.
	bad = append(bad, []struct {
		args []string
		want string
	}{
		{[]string{"preview", "plan", "--key-file", "/dev/zero"}, "preview key file /dev/zero holds more than 4096 bytes"},
		{[]string{"preview", "apply", "--expect-digest", "cs1:" + strings.Repeat("z", 64)}, "cs1: and 64 hex digits"},
	}...)
	for _, c := range bad {
		untouched := previewtest.New("fake-plan")
		o := captfWith(t, preview.Registry{untouched}, c.args...).want(t, runner.ExitBadInput)
		if !strings.Contains(o.stderr, c.want) {
			t.Errorf("%v: stderr lacks %q:\n%s", c.args, c.want, o.stderr)
		}
		if r := untouched.Request("a"); r.Component != "" {
			t.Errorf("%v: member a was planned", c.args)
		}
	}
	write(t, keyPath, key[:20], 0o600)
	if o := run(runner.ExitBadInput, "preview", "plan"); !strings.Contains(o.stderr, "preview key file "+keyPath+" holds 20 bytes") {
		t.Errorf("a short default key: %s", o.stderr)
	}
	if now, _ := os.ReadFile(keyPath); len(now) != 20 {
		t.Error("captf replaced a short preview key")
	}
	write(t, keyPath, key, 0o600)

	// A default key that is a link is not followed: it could make any
	// file (here /etc/passwd) the key.
	saved := keyPath + ".saved"
	if err := os.Rename(keyPath, saved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", keyPath); err != nil {
		t.Fatal(err)
	}
	if o := run(runner.ExitBadInput, "preview", "plan"); !strings.Contains(o.stderr, "preview key file "+keyPath+" is a symbolic link, not a regular file") {
		t.Errorf("a default key that is a link: %s", o.stderr)
	}
	if err := os.Remove(keyPath); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(saved, keyPath); err != nil {
		t.Fatal(err)
	}

	run(runner.ExitOK, "preview", "apply", "--expect-digest", first.Digest)
	if diff := cmp.Diff([]string{"a"}, fake.Applied()); diff != "" {
		t.Errorf("applied under the plan's key (-want +got):\n%s", diff)
	}

	// Neither key nor the secret reaches what captf printed or wrote.
	forms := append(previewtest.KeyForms(key), previewtest.KeyForms(previewtest.OtherKey())...)
	forms = append(forms, canary)
	for _, o := range outcomes {
		for _, f := range forms {
			if strings.Contains(o.stdout+o.stderr, f) {
				t.Errorf("captf printed %q", f)
			}
		}
	}
	_ = filepath.WalkDir(out, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(path)
			for _, f := range forms {
				if strings.Contains(string(b), f) {
					t.Errorf("%s holds %q", path, f)
				}
			}
		}
		return nil
	})
}
