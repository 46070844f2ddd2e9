package preview_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/captf/captf/internal/preview"
	"github.com/captf/captf/internal/preview/previewtest"
	"github.com/captf/captf/pkg/changeset"
)

// These tests drive the orchestration with previewtest.Fake, a test double
// of a capability: the real capabilities are tested against real
// terraform, kube-apiserver and moto_server in their own packages. git,
// sh and the file system are real.

// repo makes a git repository holding files, committed once.
func repo(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	writeFiles(t, root, files)
	run(t, root, "git", "init", "-q", "-b", "main")
	commit(t, root)
	return root
}

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func commit(t *testing.T, root string) {
	t.Helper()
	run(t, root, "git", "add", "-A")
	run(t, root, "git", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "c")
}

func run(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

type fixture struct {
	root string
	fake *previewtest.Fake
	opts preview.Options
	log  *bytes.Buffer
}

func setup(t *testing.T, files map[string]string) *fixture {
	t.Helper()
	root := repo(t, files)
	f := &fixture{root: root, fake: previewtest.New("fake-plan"), log: &bytes.Buffer{}}
	f.opts = preview.Options{Root: root, Registry: preview.Registry{f.fake}, Log: f.log, Output: f.log, Key: previewtest.Key()}
	f.load(t)
	return f
}

func (f *fixture) load(t *testing.T) {
	t.Helper()
	proj, err := preview.LoadProject(filepath.Join(f.root, preview.ProjectFile), f.opts.Registry.Known)
	if err != nil {
		t.Fatal(err)
	}
	f.opts.Project = proj
}

func (f *fixture) plan(t *testing.T) *preview.Preview {
	t.Helper()
	p, err := preview.PlanChangeSet(context.Background(), f.opts)
	if err != nil {
		t.Fatalf("plan: %v\n%s", err, f.log)
	}
	t.Cleanup(p.Close)
	return p
}

func (f *fixture) apply(t *testing.T, digest string) (*preview.Applied, error) {
	t.Helper()
	a, err := preview.ApplyChangeSet(context.Background(), f.opts, digest)
	if a != nil {
		t.Cleanup(a.Close)
	}
	return a, err
}

func memberOf(t *testing.T, p *preview.Preview, name string) changeset.Member {
	t.Helper()
	for _, m := range p.Document.Members {
		if m.Name == name {
			return m
		}
	}
	t.Fatalf("no member %q in %+v", name, p.Document.Members)
	return changeset.Member{}
}

func names(levels [][]*preview.Component) [][]string {
	out := make([][]string, len(levels))
	for i, l := range levels {
		for _, c := range l {
			out[i] = append(out[i], c.Name)
		}
	}
	return out
}

const threeComponents = `
components:
  a:
    steps:
      - kind: fake-plan
        inputs:
          want: {x: "1"}
          outputs: {url: "https://a.example"}
  b:
    steps:
      - kind: fake-plan
        inputs:
          want: {y: "1"}
          source: src/b
  c:
    dependsOn: [b]
    steps:
      - kind: fake-plan
        inputs:
          want: {z: "1"}
          url: {stackOutput: {component: a, name: url}}
`

func TestLevelsPlanConcurrently(t *testing.T) {
	f := setup(t, map[string]string{preview.ProjectFile: threeComponents, "src/b/main.txt": "b"})
	f.fake.Meet = 2
	p := f.plan(t)
	if diff := cmp.Diff([][]string{{"a", "b"}, {"c"}}, names(p.Components)); diff != "" {
		t.Errorf("levels (-want +got):\n%s", diff)
	}
	if f.fake.MaxActive() < 2 {
		t.Errorf("at most %d plans ran at once; a and b are one level and should plan together", f.fake.MaxActive())
	}
	var got []string
	for _, m := range p.Document.Members {
		got = append(got, m.Name+":"+m.Status)
	}
	if diff := cmp.Diff([]string{"a:planned", "b:planned", "c:planned"}, got); diff != "" {
		t.Errorf("members (-want +got):\n%s", diff)
	}
	// a is in the change: c reads what a's plan says it will expose.
	if diff := cmp.Diff(map[string]any{"want": map[string]any{"z": "1"}, "url": "https://a.example"}, f.fake.Request("c").Inputs); diff != "" {
		t.Errorf("inputs of c (-want +got):\n%s", diff)
	}
}

func TestChangedFromPlansTouchedAndDependents(t *testing.T) {
	f := setup(t, map[string]string{preview.ProjectFile: threeComponents, "src/b/main.txt": "b"})
	// a was applied earlier with another url: c must read it live.
	f.fake.SetOutputs("a", preview.Outputs{"url": json.RawMessage(`"https://live.example"`)})
	writeFiles(t, f.root, map[string]string{"src/b/main.txt": "b2"})
	commit(t, f.root)
	f.opts.ChangedFrom = "HEAD~1"
	p := f.plan(t)
	if diff := cmp.Diff([][]string{{"b"}, {"c"}}, names(p.Components)); diff != "" {
		t.Errorf("levels (-want +got):\n%s", diff)
	}
	if got := f.fake.Request("c").Inputs["url"]; got != "https://live.example" {
		t.Errorf("c read url %v, want the live output of a (not in the change)", got)
	}

	// An untracked file counts too; a change to nothing any step reads
	// plans nothing.
	f.opts.ChangedFrom = "HEAD"
	writeFiles(t, f.root, map[string]string{"README": "x"})
	if p := f.plan(t); len(p.Document.Members) != 0 {
		t.Errorf("members %+v for a change no step reads", p.Document.Members)
	}
	writeFiles(t, f.root, map[string]string{"src/b/new.txt": "n"})
	if p := f.plan(t); len(p.Components) != 2 {
		t.Errorf("levels %v; an untracked file under src/b touches b", names(p.Components))
	}
	if err := os.Remove(filepath.Join(f.root, "src/b/new.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(f.root, "src/b/main.txt")); err != nil {
		t.Fatal(err)
	}
	if p := f.plan(t); len(p.Components) != 2 {
		t.Errorf("levels %v; a deleted file under src/b touches b", names(p.Components))
	}
}

func TestChangedFromProjectFile(t *testing.T) {
	f := setup(t, map[string]string{preview.ProjectFile: threeComponents, "src/b/main.txt": "b"})
	writeFiles(t, f.root, map[string]string{preview.ProjectFile: strings.Replace(threeComponents, `want: {x: "1"}`, `want: {x: "2"}`, 1)})
	f.load(t)
	f.opts.ChangedFrom = "HEAD"
	p := f.plan(t)
	// c reads an output of a: it is a dependent.
	if diff := cmp.Diff([][]string{{"a"}, {"c"}}, names(p.Components)); diff != "" {
		t.Errorf("levels (-want +got):\n%s", diff)
	}

	// A change to the selected environment's vars touches every component.
	commit(t, f.root)
	writeFiles(t, f.root, map[string]string{preview.ProjectFile: strings.Replace(threeComponents, `want: {x: "1"}`, `want: {x: "2"}`, 1) + "environments:\n  prod:\n    vars: {tier: gold}\n"})
	f.load(t)
	f.opts.Env = "prod"
	if p := f.plan(t); len(p.Document.Members) != 3 {
		t.Errorf("members %+v, want all three after the environment changed", p.Document.Members)
	}
	// Another environment's change touches none.
	commit(t, f.root)
	writeFiles(t, f.root, map[string]string{preview.ProjectFile: strings.Replace(threeComponents, `want: {x: "1"}`, `want: {x: "2"}`, 1) + "environments:\n  prod:\n    vars: {tier: gold}\n  dev:\n    vars: {tier: tin}\n"})
	f.load(t)
	if p := f.plan(t); len(p.Document.Members) != 0 {
		t.Errorf("members %+v, want none: only another environment changed", p.Document.Members)
	}
}

func TestOutputsResolution(t *testing.T) {
	f := setup(t, map[string]string{preview.ProjectFile: threeComponents, "src/b/main.txt": "b"})
	f.opts.ChangedFrom = "HEAD"
	writeFiles(t, f.root, map[string]string{"src/b/main.txt": "b2"})

	// a is not in the change and never ran: c's reference has no value.
	p := f.plan(t)
	c := memberOf(t, p, "c")
	if diff := cmp.Diff([]string{"a"}, f.fake.Request("c").Missing); diff != "" {
		t.Errorf("missing (-want +got):\n%s", diff)
	}
	if c.Status != changeset.StatusPlanned || len(c.UnknownInputs) != 0 || len(c.Holes) != 1 {
		t.Errorf("c = %+v; want planned with the capability's hole, not held (a is not in the change)", c)
	}
	if _, ok := f.fake.Request("c").Inputs["url"]; ok {
		t.Error("an unresolved reference is in Inputs")
	}

	// A seed supplies the value instead.
	f.opts.Seed = map[string]preview.Outputs{"a": {"url": json.RawMessage(`"https://seed.example"`)}}
	f.plan(t)
	if got := f.fake.Request("c").Inputs["url"]; got != "https://seed.example" {
		t.Errorf("c read url %v, want the seeded value", got)
	}
	if len(f.fake.Request("c").Missing) != 0 {
		t.Errorf("missing %v with a seed", f.fake.Request("c").Missing)
	}

	f.opts.Seed = map[string]preview.Outputs{"nope": {}}
	if _, err := preview.PlanChangeSet(context.Background(), f.opts); !errors.Is(err, preview.ErrInvalid) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("seed of an unknown component: %v", err)
	}
}

// TestOutputsReadAreReported: the document says, per member, which
// upstream outputs it read and from where — the plan of a component in the
// change, what one outside the change deployed, or a seed — by name only.
func TestOutputsReadAreReported(t *testing.T) {
	f := setup(t, map[string]string{preview.ProjectFile: threeComponents, "src/b/main.txt": "b"})
	type read struct{ Deployed, Planned, Seeded []string }
	readOf := func(p *preview.Preview) read {
		c := memberOf(t, p, "c")
		return read{c.DeployedOutputs, c.PlannedOutputs, c.SeededOutputs}
	}

	p := f.plan(t)
	if diff := cmp.Diff(read{Planned: []string{"a.url"}}, readOf(p)); diff != "" {
		t.Errorf("a in the change (-want +got):\n%s", diff)
	}
	if _, err := f.apply(t, p.Document.Digest); err != nil {
		t.Fatalf("apply: %v\n%s", err, f.log)
	}

	f.opts.ChangedFrom = "HEAD"
	writeFiles(t, f.root, map[string]string{"src/b/main.txt": "b2"})
	if diff := cmp.Diff(read{Deployed: []string{"a.url"}}, readOf(f.plan(t))); diff != "" {
		t.Errorf("a deployed, outside the change (-want +got):\n%s", diff)
	}

	f.opts.Seed = map[string]preview.Outputs{"a": {"url": json.RawMessage(`"https://seed.example"`)}}
	if diff := cmp.Diff(read{Seeded: []string{"a.url"}}, readOf(f.plan(t))); diff != "" {
		t.Errorf("a seeded (-want +got):\n%s", diff)
	}
	raw, err := json.Marshal(memberOf(t, f.plan(t), "c"))
	if err != nil || !strings.Contains(string(raw), `"seededOutputs":["a.url"]`) || strings.Contains(string(raw), "seed.example") {
		t.Errorf("c in the document: %s (%v); want the reference named and no value", raw, err)
	}
}

// TestUndeclaredOutputRefused: a stackOutput naming an output its upstream
// in the change never declares is refused, naming it and what the
// upstream declares, before any member is held for a value that will not
// come.
func TestUndeclaredOutputRefused(t *testing.T) {
	f := setup(t, map[string]string{preview.ProjectFile: strings.Replace(threeComponents, "name: url", "name: uri", 1), "src/b/main.txt": "b"})
	_, err := preview.PlanChangeSet(context.Background(), f.opts)
	want := `component c, step fake-plan: stackOutput {component: a, name: uri}: a has no output "uri" (it declares url)`
	if !errors.Is(err, preview.ErrInvalid) || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want ErrInvalid naming %q", err, want)
	}
	// A seed of that name stands in for the upstream.
	f.opts.Seed = map[string]preview.Outputs{"a": {"uri": json.RawMessage(`"https://seed.example"`)}}
	f.plan(t)
}

const heldProject = `
components:
  db:
    steps:
      - kind: fake-plan
        inputs:
          want: {db: "1"}
          lateOutputs: {host: db.internal}
  app:
    steps:
      - kind: fake-plan
        inputs:
          want: {app: "1"}
          host: {stackOutput: {component: db, name: host}}
  other:
    steps:
      - kind: fake-plan
        inputs:
          want: {o: "1"}
`

func TestHeldMemberNeedsItsOwnApproval(t *testing.T) {
	f := setup(t, map[string]string{preview.ProjectFile: heldProject})
	p := f.plan(t)
	app := memberOf(t, p, "app")
	if app.Status != changeset.StatusHeld {
		t.Fatalf("app = %+v, want held", app)
	}
	if diff := cmp.Diff([]string{"db.host"}, app.UnknownInputs); diff != "" {
		t.Errorf("unknown inputs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([][]string{{"db", "other"}, {"app"}}, names(p.Components)); diff != "" {
		t.Errorf("a stackOutput makes a dependency (-want +got):\n%s", diff)
	}

	a, err := f.apply(t, p.Document.Digest)
	if !errors.Is(err, preview.ErrHeld) {
		t.Fatalf("apply: %v, want preview.ErrHeld", err)
	}
	if diff := cmp.Diff([]string{"db", "other"}, f.fake.Applied()); diff != "" {
		t.Errorf("applied (-want +got):\n%s", diff)
	}
	if a.Next == nil {
		t.Fatal("no plan for the held members")
	}
	next := memberOf(t, a.Next, "app")
	if next.Status != changeset.StatusPlanned || a.Next.Document.Digest == p.Document.Digest {
		t.Fatalf("next round: app %+v, digest %s", next, a.Next.Document.Digest)
	}
	if got := f.fake.Request("app").Inputs["host"]; got != "db.internal" {
		t.Errorf("app planned with host %v, want db's applied output", got)
	}

	// The first digest no longer holds; the second applies app.
	if _, err := f.apply(t, p.Document.Digest); !errors.Is(err, preview.ErrMoved) {
		t.Errorf("apply of the first digest again: %v, want preview.ErrMoved", err)
	}
	if _, err := f.apply(t, a.Next.Document.Digest); err != nil {
		t.Fatalf("apply of the second digest: %v", err)
	}
	if diff := cmp.Diff([]string{"db", "other", "db", "other", "app"}, f.fake.Applied()); diff != "" {
		t.Errorf("applied (-want +got):\n%s", diff)
	}
}

func TestFailureBlocksOnlyDependents(t *testing.T) {
	f := setup(t, map[string]string{preview.ProjectFile: `
components:
  a:
    steps:
      - kind: fake-plan
        inputs: {want: {x: "1"}, failApply: "quota exceeded"}
  b:
    steps:
      - kind: fake-plan
        inputs: {want: {y: "1"}}
  c:
    dependsOn: [a]
    steps:
      - kind: fake-plan
        inputs: {want: {z: "1"}}
  d:
    dependsOn: [c]
    steps:
      - kind: shell
        inputs: {run: "touch d-ran"}
`})
	p := f.plan(t)
	a, err := f.apply(t, p.Document.Digest)
	if !errors.Is(err, preview.ErrApplyFailed) {
		t.Fatalf("apply: %v, want preview.ErrApplyFailed", err)
	}
	if diff := cmp.Diff([]string{"b"}, f.fake.Applied()); diff != "" {
		t.Errorf("applied (-want +got):\n%s", diff)
	}
	want := []preview.ComponentOutcome{
		{Component: "a", Outcome: preview.OutcomeFailed, Error: "step fake-plan: quota exceeded"},
		{Component: "b", Outcome: preview.OutcomeApplied},
		{Component: "c", Outcome: preview.OutcomeBlocked, Error: "upstream a did not apply"},
		{Component: "d", Outcome: preview.OutcomeBlocked, Error: "upstream c did not apply"},
	}
	if diff := cmp.Diff(want, a.Components); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(filepath.Join(f.root, "d-ran")); err == nil {
		t.Error("the shell step of a blocked component ran")
	}
}

func TestDigestMovedAppliesNothing(t *testing.T) {
	f := setup(t, map[string]string{
		preview.ProjectFile: `
components:
  a:
    steps:
      - kind: fake-plan
        inputs: {want: {x: "1"}}
  site:
    steps:
      - kind: shell
        inputs: {run: "touch shell-ran"}
      - kind: s3-sync
        inputs: {from: site}
`,
		"site/index.html": "v1",
	})
	p := f.plan(t)
	writeFiles(t, f.root, map[string]string{"site/index.html": "v2"})
	a, err := f.apply(t, p.Document.Digest)
	if !errors.Is(err, preview.ErrMoved) {
		t.Fatalf("apply: %v, want preview.ErrMoved", err)
	}
	for _, d := range []string{p.Document.Digest, a.Fresh.Document.Digest} {
		if !strings.Contains(err.Error(), d) {
			t.Errorf("the error does not name %s: %v", d, err)
		}
	}
	if got := f.fake.Applied(); len(got) != 0 {
		t.Errorf("applied %v after the digest moved", got)
	}
	if _, err := os.Stat(filepath.Join(f.root, "shell-ran")); err == nil {
		t.Error("a shell step ran after the digest moved")
	}
}

// TestPreviewKey: every request a capability gets carries the preview key
// (plan, outputs and apply); a key missing or shorter than 32 bytes is
// refused before any capability is asked.
func TestPreviewKey(t *testing.T) {
	f := setup(t, map[string]string{
		preview.ProjectFile: `
components:
  a:
    steps:
      - kind: fake-plan
        inputs: {want: {x: "1"}}
`,
	})
	p := f.plan(t)
	if got := f.fake.Request("a").Key; !bytes.Equal(got, previewtest.Key()) {
		t.Errorf("the plan request's key is %d bytes, not the preview key", len(got))
	}
	for _, key := range [][]byte{nil, previewtest.Key()[:31]} {
		f.opts.Key = key
		_, err := preview.PlanChangeSet(context.Background(), f.opts)
		if !errors.Is(err, preview.ErrInvalid) || !errors.Is(err, preview.ErrShortKey) {
			t.Errorf("plan with a %d-byte key: %v, want ErrInvalid and ErrShortKey", len(key), err)
		}
		a, err := f.apply(t, p.Document.Digest)
		if a != nil || !errors.Is(err, preview.ErrShortKey) {
			t.Errorf("apply with a %d-byte key: %v, want ErrShortKey and nothing planned", len(key), err)
		}
	}
	if got := f.fake.Applied(); len(got) != 0 {
		t.Errorf("applied %v without a key", got)
	}
}

func TestFailedPlanAppliesNothing(t *testing.T) {
	f := setup(t, map[string]string{preview.ProjectFile: `
components:
  a:
    steps:
      - kind: fake-plan
        inputs: {want: {x: "1"}}
  b:
    steps:
      - kind: fake-plan
        inputs: {fail: "template is not valid"}
      - kind: fake-plan
        name: second
        inputs: {name: b2, want: {y: "1"}}
  z:
    steps:
      - kind: arm-deploy
        inputs: {template: main.json}
`})
	p := f.plan(t)
	if m := memberOf(t, p, "b/fake-plan"); m.Status != changeset.StatusFailed || m.Error != "template is not valid" {
		t.Errorf("b = %+v", m)
	}
	// The other member of the failed step's component fails with it.
	if m := memberOf(t, p, "b2"); m.Status != changeset.StatusFailed || m.Error != "member b/fake-plan of component b failed to plan" {
		t.Errorf("b2 = %+v", m)
	}
	for _, e := range p.Document.Entries {
		if e.Member == "b2" {
			t.Errorf("entry %+v of a failed member", e)
		}
	}
	if m := memberOf(t, p, "a"); m.Status != changeset.StatusPlanned {
		t.Errorf("a = %+v; another component's failure fails only its own members", m)
	}
	if m := memberOf(t, p, "z"); m.Status != changeset.StatusFailed || !strings.Contains(m.Error, "no capability") {
		t.Errorf("a kind that plans in spec 003 without a capability: %+v", m)
	}
	if _, err := f.apply(t, p.Document.Digest); !errors.Is(err, preview.ErrPlanFailed) {
		t.Fatalf("apply: %v, want preview.ErrPlanFailed", err)
	}
	if got := f.fake.Applied(); len(got) != 0 {
		t.Errorf("applied %v with a failed member", got)
	}
}

func TestShellStepRunsOnApply(t *testing.T) {
	f := setup(t, map[string]string{preview.ProjectFile: `
environments:
  prod:
    vars: {REGION: eu-west-1}
components:
  notify:
    steps:
      - kind: shell
        name: announce
        inputs: {run: 'echo "$REGION $CAPTF_COMPONENT $CAPTF_STEP $CAPTF_ENVIRONMENT" > shell-ran'}
`})
	f.opts.Env = "prod"
	p := f.plan(t)
	if _, err := os.Stat(filepath.Join(f.root, "shell-ran")); err == nil {
		t.Fatal("the shell step ran at plan time")
	}
	m := memberOf(t, p, "notify")
	if m.Capability != preview.CompositionCapability || len(m.Holes) != 1 || !strings.HasPrefix(m.Holes[0].Reason, "unbound:") {
		t.Errorf("a shell-only component: %+v, want a composition member with an unbound: hole", m)
	}
	if _, err := f.apply(t, p.Document.Digest); err != nil {
		t.Fatalf("apply: %v\n%s", err, f.log)
	}
	got, err := os.ReadFile(filepath.Join(f.root, "shell-ran"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "eu-west-1 notify announce prod\n" {
		t.Errorf("the shell step wrote %q", got)
	}
}

func TestStepWithoutApplyRefuses(t *testing.T) {
	f := setup(t, map[string]string{preview.ProjectFile: `
components:
  site:
    steps:
      - kind: shell
        inputs: {run: "touch shell-ran"}
      - kind: s3-sync
        inputs: {from: site}
`, "site/index.html": "v1"})
	p := f.plan(t)
	a, err := f.apply(t, p.Document.Digest)
	if !errors.Is(err, preview.ErrApplyFailed) || a.Components[0].Outcome != preview.OutcomeFailed || !strings.Contains(a.Components[0].Error, "cannot apply s3-sync steps yet") {
		t.Fatalf("apply: %v %+v", err, a.Components)
	}
	if _, err := os.Stat(filepath.Join(f.root, "shell-ran")); err == nil {
		t.Error("a step of a component that cannot apply whole ran")
	}
}

func TestCompositionDigest(t *testing.T) {
	f := setup(t, map[string]string{
		preview.ProjectFile: `
components:
  site:
    steps:
      - kind: docker-build
        inputs: {context: app, dockerfile: Dockerfile}
      - kind: s3-sync
        inputs: {from: public}
      - kind: helm-upgrade
        inputs: {chart: charts/web, values: values.yaml}
`,
		"app/Dockerfile":          "FROM scratch",
		"app/main.go":             "package main",
		"app/.gitignore":          "node_modules/\n",
		"public/index.html":       "<h1>v1</h1>",
		"charts/web/Chart.yaml":   "name: web",
		"charts/web/templates/x":  "x",
		"unrelated/file.txt":      "u",
		"app/node_modules/.keep2": "",
	})
	digest := func() string {
		p := f.plan(t)
		m := memberOf(t, p, "site")
		if !strings.HasPrefix(m.PlanDigest, preview.CompositionPrefix) || m.Status != changeset.StatusPlanned {
			t.Fatalf("site = %+v", m)
		}
		return m.PlanDigest
	}
	base := digest()
	steps := []struct {
		reason string
		files  map[string]string
		moves  bool
	}{
		{"a file outside every deployed path", map[string]string{"unrelated/file.txt": "u2"}, false},
		{"a file git ignores in a deployed directory", map[string]string{"app/node_modules/lib.js": "x"}, false},
		{"a deployed file", map[string]string{"public/index.html": "<h1>v2</h1>"}, true},
		{"a new file in a deployed directory, not yet committed", map[string]string{"charts/web/templates/y": "y"}, true},
		{"the Dockerfile", map[string]string{"app/Dockerfile": "FROM busybox"}, true},
		{"a values file that did not exist appears", map[string]string{"values.yaml": "replicas: 2"}, true},
		{"the component's declaration", map[string]string{preview.ProjectFile: strings.Replace(string(must(os.ReadFile(filepath.Join(f.root, preview.ProjectFile)))), "public", "public/", 1)}, true},
	}
	for _, s := range steps {
		writeFiles(t, f.root, s.files)
		f.load(t)
		got := digest()
		if moved := got != base; moved != s.moves {
			t.Errorf("%s: digest moved = %v, want %v", s.reason, moved, s.moves)
		}
		base = got
	}

	// The environment and its vars are bound too.
	writeFiles(t, f.root, map[string]string{preview.ProjectFile: string(must(os.ReadFile(filepath.Join(f.root, preview.ProjectFile)))) + "environments:\n  prod:\n    vars: {tier: gold}\n"})
	f.load(t)
	noEnv := digest()
	f.opts.Env = "prod"
	if digest() == noEnv {
		t.Error("the digest does not bind the environment")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestIgnoredDirectoryIsUnboundHole(t *testing.T) {
	f := setup(t, map[string]string{
		preview.ProjectFile: `
components:
  web:
    steps:
      - kind: fake-plan
        inputs: {want: {w: "1"}}
      - kind: s3-sync
        name: upload
        inputs: {from: dist}
  api:
    steps:
      - kind: fake-plan
        inputs: {want: {a: "1"}}
      - kind: health-gate
        inputs: {url: "https://api.example/health"}
`,
		".gitignore": "dist/\n",
	})
	writeFiles(t, f.root, map[string]string{"dist/app.js": "built"})
	p := f.plan(t)
	var got []string
	for _, m := range p.Document.Members {
		got = append(got, m.Name+" "+m.Capability)
	}
	if diff := cmp.Diff([]string{"web fake-plan", "web#inputs composition", "api fake-plan"}, got); diff != "" {
		t.Errorf("members (-want +got):\n%s", diff)
	}
	holes := memberOf(t, p, "web#inputs").Holes
	if len(holes) != 1 || holes[0].Address != "upload" || !strings.HasPrefix(holes[0].Reason, "unbound: from dist is a directory git ignores") {
		t.Errorf("holes %+v", holes)
	}
}

func TestSensitiveValuesNeverLeak(t *testing.T) {
	const canary = "CANARY-PREVIEW-91c4"
	f := setup(t, map[string]string{preview.ProjectFile: `
components:
  db:
    steps:
      - kind: fake-plan
        inputs:
          want: {db: "1"}
          secret: ` + canary + `
          outputs: {password: ` + canary + `-out}
  app:
    steps:
      - kind: fake-plan
        inputs:
          want: {app: "1"}
          password: {stackOutput: {component: db, name: password}}
`})
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	p := f.plan(t)
	if got := f.fake.Request("app").Inputs["password"]; got != canary+"-out" {
		t.Fatalf("app did not get db's output: %v", got)
	}
	doc, err := json.Marshal(p.Document)
	if err != nil {
		t.Fatal(err)
	}
	note := changeset.Note(p.Document, changeset.NoteOptions{})
	for what, s := range map[string]string{"document": string(doc), "note": note, "log": f.log.String()} {
		if strings.Contains(s, canary) {
			t.Errorf("the canary reached the %s", what)
		}
	}
	if !strings.Contains(note, "`password`: (sensitive)") {
		t.Errorf("the note does not show the sensitive attribute by name:\n%s", note)
	}
	work := f.fake.Request("app").WorkDir
	if !strings.HasPrefix(work, tmp) {
		t.Fatalf("work directory %s is not under TMPDIR", work)
	}
	p.Close()
	if _, err := os.Stat(work); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the work directory %s is left after Close", work)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("files left in TMPDIR after Close: %v", left)
	}
}

func TestOutputOfComponentWithoutOutputs(t *testing.T) {
	f := setup(t, map[string]string{preview.ProjectFile: `
components:
  site:
    steps:
      - kind: shell
        inputs: {run: "true"}
  app:
    steps:
      - kind: fake-plan
        inputs: {url: {stackOutput: {component: site, name: url}}}
`})
	_, err := preview.PlanChangeSet(context.Background(), f.opts)
	want := `captf.yaml:9: components.app.steps[0].inputs: stackOutput reads component "site", none of whose steps has outputs`
	if !errors.Is(err, preview.ErrInvalid) || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want one containing %q", err, want)
	}
}

func TestProjectErrors(t *testing.T) {
	known := preview.Registry{previewtest.New("fake-plan")}.Known
	cases := []struct {
		name, yaml, want string
	}{
		{"empty", "", "captf.yaml: the file is empty"},
		{"no components", "environments: {}\n", "captf.yaml:1:1: components: missing"},
		{"unknown top field", "components: {}\nextra: 1\n", "captf.yaml:2:1: extra: unknown field (allowed: components, environments)"},
		{"unknown kind", "components:\n  a:\n    steps:\n      - kind: teleport\n", `captf.yaml:4: components.a.steps[0].kind: "teleport" is no step kind captf knows`},
		{"kind not a string", "components:\n  a:\n    steps:\n      - kind: [x]\n", "captf.yaml:4:15: components.a.steps[0].kind: want a string, got a list"},
		{"no steps", "components:\n  a:\n    dependsOn: []\n", "captf.yaml:2:3: components.a.steps: missing"},
		{"unknown step field", "components:\n  a:\n    steps:\n      - kind: shell\n        run: x\n", "captf.yaml:5:9: components.a.steps[0].run: unknown field (allowed: kind, name, inputs)"},
		{"shell without run", "components:\n  a:\n    steps:\n      - kind: shell\n", "captf.yaml:4:9: components.a.steps[0].inputs.run: a shell step needs the command"},
		{"unknown shell input", "components:\n  a:\n    steps:\n      - kind: shell\n        inputs: {run: x, script: y}\n", "captf.yaml:4:9: components.a.steps[0].inputs.script: unknown input of a shell step (allowed: run, template, manifest, values)"},
		{"unknown dependency", "components:\n  a:\n    dependsOn: [b]\n    steps:\n      - kind: shell\n        inputs: {run: x}\n", `captf.yaml:2: components.a.dependsOn[0]: no component is named "b"`},
		{"stackOutput of nothing", "components:\n  a:\n    steps:\n      - kind: fake-plan\n        inputs: {v: {stackOutput: {component: b, name: x}}}\n", `captf.yaml:4: components.a.steps[0].inputs: stackOutput names component "b"`},
		{"stackOutput without name", "components:\n  a:\n    steps:\n      - kind: fake-plan\n        inputs: {v: {stackOutput: {component: b}}}\n", "captf.yaml:5:35: components.a.steps[0].inputs.v.stackOutput: needs both component and name"},
		{"cycle", "components:\n  a:\n    dependsOn: [b]\n    steps: [{kind: shell, inputs: {run: x}}]\n  b:\n    dependsOn: [a]\n    steps: [{kind: shell, inputs: {run: x}}]\n", "captf.yaml: dependsOn: the components depend on each other in a cycle: a → b → a"},
		{"duplicate step names", "components:\n  a:\n    steps:\n      - kind: shell\n        inputs: {run: x}\n      - kind: shell\n        inputs: {run: y}\n", `captf.yaml:6:9: components.a.steps[1].name: two steps are named "shell"`},
		{"bad component name", "components:\n  a b:\n    steps: [{kind: shell, inputs: {run: x}}]\n", `captf.yaml:2:3: components: "a b" is not a name`},
		{"var not scalar", "components:\n  a:\n    steps: [{kind: shell, inputs: {run: x}}]\nenvironments:\n  prod:\n    vars: {a: [1]}\n", "captf.yaml:6:15: environments.prod.vars.a: want a string, number or boolean, got a list"},
		{"not yaml", "components: [\n", "captf.yaml: yaml: line 1"},
		{"step output of the same component", "components:\n  a:\n    steps:\n      - kind: docker-build\n        name: build\n        inputs: {context: .}\n      - kind: cfn-deploy\n        inputs: {parameters: {Image: \"@build.uri\"}}\n",
			`captf.yaml:7: components.a.steps[1].inputs.parameters.Image: "@build.uri" reads a step of the same component, and captf passes no outputs between the steps of one component`},
		{"two documents", "components: {}\n---\ncomponents: {}\n", "captf.yaml:2: the file holds more than one YAML document"},
		{"build output of another component", "components:\n  web:\n    steps: [{kind: docker-build, inputs: {context: .}}]\n  app:\n    steps:\n      - kind: cfn-deploy\n        inputs: {parameters: {Image: \"@web.publish.uri\"}}\n",
			`captf.yaml:6: components.app.steps[0].inputs.parameters.Image: "@web.publish.uri" reads a build output of component "web", which captf cannot resolve and will not deploy as literal text`},
		{"infinite number", "components:\n  a:\n    steps:\n      - kind: fake-plan\n        inputs: {n: .inf}\n", "captf.yaml:5:21: components.a.steps[0].inputs.n: .inf is no number a deploy tool takes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := preview.ParseProject("captf.yaml", []byte(c.yaml), known)
			if err == nil || !errors.Is(err, preview.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// TestNumbersAsWritten: a number in the project file reaches the deploy
// tools as written: 1.10 stays 1.10 (a float64 would make it 1.1), a big
// integer keeps every digit, and numbers JSON does not write (0x1F, +5)
// are decoded.
func TestNumbersAsWritten(t *testing.T) {
	known := preview.Registry{previewtest.New("fake-plan")}.Known
	yaml := "components:\n  a:\n    steps:\n      - kind: fake-plan\n        inputs: {version: 1.10, big: 123456789012345678901234567890, exp: 1.50e+3, neg: -0.0, hex: 0x1F, plus: +5, list: [2.50]}\n"
	proj, err := preview.ParseProject("captf.yaml", []byte(yaml), known)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(proj.Components[0].Steps[0].Inputs)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"big":123456789012345678901234567890,"exp":1.50e+3,"hex":31,"list":[2.50],"neg":-0.0,"plus":5,"version":1.10}`
	if string(got) != want {
		t.Errorf("inputs %s, want %s", got, want)
	}
}

// TestStepReferenceWithoutPlan: a step without plan may name a value wired
// from another step ("@build.uri", spec 003's codeRef): the composition
// digest leaves it out as a build output, and nothing resolves it.
func TestStepReferenceWithoutPlan(t *testing.T) {
	known := preview.Registry{previewtest.New("fake-plan")}.Known
	yaml := "components:\n  a:\n    steps:\n      - kind: zip-package\n        name: build\n        inputs: {source: src}\n      - kind: lambda-deploy\n        inputs: {codeRef: \"@build.uri\"}\n"
	if _, err := preview.ParseProject("captf.yaml", []byte(yaml), known); err != nil {
		t.Fatal(err)
	}
}
