package terraform

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/captf/captf/internal/preview"
	"github.com/captf/captf/internal/preview/previewtest"
	"github.com/captf/captf/internal/tfexec"
	"github.com/captf/captf/internal/tftest"
	"github.com/captf/captf/pkg/changeset"
)

// The canaries are values of the sensitive variable "secret" of
// testdata/basic; no Plan, error, output or file left behind may hold them.
const (
	canaryA = "canary-7f3a9c1e"
	canaryB = "canary-b20d4e55"
)

// repo is a copy of testdata, the repository root of a test's requests,
// planned and applied with one real binary.
type repo struct {
	t   *testing.T
	bin tftest.Binary
	dir string
	cap *Capability
}

func newRepo(t *testing.T, bin tftest.Binary) *repo {
	t.Helper()
	return &repo{t: t, bin: bin, dir: tftest.CopyRoot(t, "testdata"), cap: &Capability{Env: tftest.Env(t), Stderr: testLog{t}}}
}

// testLog passes terraform's diagnostics to the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(b []byte) (int, error) {
	l.t.Helper()
	l.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// request is a step on root with vars (nil for none) and var files.
func (r *repo) request(root string, vars map[string]any, varFiles ...string) preview.Request {
	inputs := map[string]any{"root": root, "binary": r.bin.Path}
	if vars != nil {
		inputs["vars"] = vars
	}
	if len(varFiles) > 0 {
		var list []any
		for _, f := range varFiles {
			list = append(list, f)
		}
		inputs["varFiles"] = list
	}
	return preview.Request{Component: "network", Environment: "test", Inputs: inputs, Root: r.dir, WorkDir: r.t.TempDir(), Key: previewtest.Key()}
}

func (r *repo) plan(req preview.Request) *preview.Plan {
	r.t.Helper()
	p, err := r.cap.Plan(context.Background(), req)
	if err != nil {
		r.t.Fatalf("plan: %v", err)
	}
	return p
}

// apply plans req and applies that plan.
func (r *repo) apply(req preview.Request) preview.Outputs {
	r.t.Helper()
	out, err := r.cap.Apply(context.Background(), req, r.plan(req))
	if err != nil {
		r.t.Fatalf("apply: %v", err)
	}
	return out
}

func (r *repo) state(root string) []byte {
	r.t.Helper()
	b, err := os.ReadFile(filepath.Join(r.dir, root, "terraform.tfstate"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		r.t.Fatal(err)
	}
	return b
}

// eachBinary runs test once with terraform and once with tofu.
func eachBinary(t *testing.T, test func(t *testing.T, r *repo)) {
	for _, bin := range tftest.Binaries(t) {
		t.Run(bin.Name, func(t *testing.T) { test(t, newRepo(t, bin)) })
	}
}

// withoutIDs replaces the random ids terraform_data makes with "<id>".
func withoutIDs(entries []changeset.Entry) []changeset.Entry {
	var out []changeset.Entry
	for _, e := range entries {
		var attrs []changeset.Attribute
		for _, a := range e.Attributes {
			if a.Name == "id" && a.Before != nil {
				a.Before = raw(`"<id>"`)
			}
			attrs = append(attrs, a)
		}
		e.Attributes = attrs
		out = append(out, e)
	}
	return out
}

func outputsText(o preview.Outputs) map[string]string {
	out := map[string]string{}
	for k, v := range o {
		out[k] = string(v)
	}
	return out
}

func basicVars(name, size, secret string, extra bool) map[string]any {
	return map[string]any{"name": name, "size": json.Number(size), "secret": secret, "extra": extra}
}

func TestPlanCreate(t *testing.T) {
	eachBinary(t, func(t *testing.T, r *repo) {
		p := r.plan(r.request("basic", basicVars("a", "1", canaryA, true)))
		want := []changeset.Entry{
			{Member: "basic", Address: "terraform_data.config", Action: "create", Attributes: []changeset.Attribute{
				{Name: "id", Unknown: true},
				{Name: "input", After: raw(`{"name":"a","size":1}`)},
				{Name: "output", Unknown: true},
			}},
			{Member: "basic", Address: "terraform_data.derived", Action: "create", Attributes: []changeset.Attribute{
				{Name: "id", Unknown: true},
				{Name: "input", Unknown: true},
				{Name: "output", Unknown: true},
			}},
			{Member: "basic", Address: "terraform_data.extra[0]", Action: "create", Attributes: []changeset.Attribute{
				{Name: "id", Unknown: true},
				{Name: "input", After: raw(`"extra"`)},
				{Name: "output", Unknown: true},
			}},
			{Member: "basic", Address: "terraform_data.keep", Action: "create", Attributes: []changeset.Attribute{
				{Name: "id", Unknown: true},
				{Name: "input", After: raw(`"steady"`)},
				{Name: "output", Unknown: true},
			}},
			{Member: "basic", Address: "terraform_data.replaced", Action: "create", Attributes: []changeset.Attribute{
				{Name: "id", Unknown: true},
				{Name: "input", After: raw(`"fixed"`)},
				{Name: "output", Unknown: true},
				{Name: "triggers_replace", After: raw(`["a"]`)},
			}},
			{Member: "basic", Address: "terraform_data.secret", Action: "create", Attributes: []changeset.Attribute{
				{Name: "id", Unknown: true},
				{Name: "input", Sensitive: true},
				{Name: "output", Unknown: true},
			}},
		}
		if diff := cmp.Diff(want, p.Entries); diff != "" {
			t.Errorf("entries (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string]string{"name": `"a"`, "size": `1`}, outputsText(p.PlannedOutputs)); diff != "" {
			t.Errorf("planned outputs (-want +got):\n%s", diff)
		}
		// Declared: known now or not, sensitive or not.
		if diff := cmp.Diff([]string{"derived", "name", "secret", "size"}, p.DeclaredOutputs); diff != "" {
			t.Errorf("declared outputs (-want +got):\n%s", diff)
		}
		wantMember := changeset.Member{Name: "basic", Component: "network", Capability: "terraform-apply", Status: "planned", PlanDigest: p.Member.PlanDigest}
		if diff := cmp.Diff(wantMember, p.Member); diff != "" {
			t.Errorf("member (-want +got):\n%s", diff)
		}
		if !strings.HasPrefix(p.Member.PlanDigest, "tf2:") || len(p.Member.PlanDigest) != len("tf2:")+64 {
			t.Errorf("plan digest %q is not tf2: and a SHA-256", p.Member.PlanDigest)
		}
	})
}

func TestPlanChanges(t *testing.T) {
	eachBinary(t, func(t *testing.T, r *repo) {
		r.apply(r.request("basic", basicVars("a", "1", canaryA, true)))
		p := r.plan(r.request("basic", basicVars("b", "12345678901234567891", canaryB, false)))
		want := []changeset.Entry{
			{Member: "basic", Address: "terraform_data.config", Action: "update", Attributes: []changeset.Attribute{
				{Name: "input", Before: raw(`{"name":"a","size":1}`), After: raw(`{"name":"b","size":12345678901234567891}`)},
				{Name: "output", Before: raw(`{"name":"a","size":1}`), Unknown: true},
			}},
			{Member: "basic", Address: "terraform_data.derived", Action: "update", Attributes: []changeset.Attribute{
				{Name: "input", Before: raw(`{"name":"a","size":1}`), Unknown: true},
				{Name: "output", Before: raw(`{"name":"a","size":1}`), Unknown: true},
			}},
			{Member: "basic", Address: "terraform_data.extra[0]", Action: "delete"},
			{Member: "basic", Address: "terraform_data.keep", Action: "no-op"},
			{Member: "basic", Address: "terraform_data.replaced", Action: "replace", Attributes: []changeset.Attribute{
				{Name: "id", Before: raw(`"<id>"`), Unknown: true},
				{Name: "output", Before: raw(`"fixed"`), Unknown: true},
				{Name: "triggers_replace", Before: raw(`["a"]`), After: raw(`["b"]`), ForcesReplacement: true},
			}},
			// terraform_data's output holds the secret unmarked once
			// applied; it is hidden because it holds a sensitive value.
			{Member: "basic", Address: "terraform_data.secret", Action: "update", Attributes: []changeset.Attribute{
				{Name: "input", Sensitive: true},
				{Name: "output", Unknown: true, Sensitive: true},
			}},
		}
		if diff := cmp.Diff(want, withoutIDs(p.Entries)); diff != "" {
			t.Errorf("entries (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(map[string]string{"name": `"b"`, "size": `12345678901234567891`}, outputsText(p.PlannedOutputs)); diff != "" {
			t.Errorf("planned outputs (-want +got):\n%s", diff)
		}
		if len(p.SideEffects) != 0 {
			t.Errorf("side effects %v, want none", p.SideEffects)
		}
	})
}

func TestPlanSideEffects(t *testing.T) {
	eachBinary(t, func(t *testing.T, r *repo) {
		r.apply(r.request("sideeffects", nil))
		next, err := os.ReadFile(filepath.Join(r.dir, "sideeffects-next", "main.tf"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(r.dir, "sideeffects", "main.tf"), next, 0o644); err != nil {
			t.Fatal(err)
		}
		p := r.plan(r.request("sideeffects", nil))
		wantEntries := []changeset.Entry{
			{Member: "sideeffects", Address: "terraform_data.gone", Action: "forget"},
			{Member: "sideeffects", Address: "terraform_data.imported", Action: "no-op", Importing: true},
			{Member: "sideeffects", Address: "terraform_data.new", Action: "no-op"},
		}
		if diff := cmp.Diff(wantEntries, p.Entries); diff != "" {
			t.Errorf("entries (-want +got):\n%s", diff)
		}
		wantEffects := []changeset.SideEffect{
			{Member: "sideeffects", Kind: "forget", Address: "terraform_data.gone", Detail: "removed from state, left in place"},
			{Member: "sideeffects", Kind: "import", Address: "terraform_data.imported", Detail: "id imported-id"},
			{Member: "sideeffects", Kind: "move", Address: "terraform_data.new", Detail: "moved from terraform_data.old"},
		}
		if diff := cmp.Diff(wantEffects, p.SideEffects); diff != "" {
			t.Errorf("side effects (-want +got):\n%s", diff)
		}
	})
}

func TestPlanDeposed(t *testing.T) {
	eachBinary(t, func(t *testing.T, r *repo) {
		r.apply(r.request("deposed", map[string]any{"generation": 1}))
		// The replacement's provisioner fails: the new object stays
		// tainted, the old one deposed.
		failing := r.request("deposed", map[string]any{"generation": 2, "fail": true})
		if _, err := r.cap.Apply(context.Background(), failing, r.plan(failing)); err == nil {
			t.Fatal("apply with a failing provisioner succeeded")
		}
		p := r.plan(r.request("deposed", map[string]any{"generation": 2}))
		if len(p.Entries) != 2 {
			t.Fatalf("entries %+v, want the tainted replace and the deposed delete", p.Entries)
		}
		if got := p.Entries[0]; got.Address != "terraform_data.cbd" || got.Action != "replace" {
			t.Errorf("first entry %s %s, want terraform_data.cbd replace", got.Address, got.Action)
		}
		deposed := p.Entries[1]
		key, ok := strings.CutPrefix(deposed.Address, "terraform_data.cbd (deposed object ")
		if !ok || deposed.Action != "delete" || len(key) != len("12345678)") {
			t.Errorf("second entry %s %s, want terraform_data.cbd (deposed object <key>) delete", deposed.Address, deposed.Action)
		}
		// The replacement runs the create-time provisioner again; its
		// keyed digest is left out here.
		want := []changeset.SideEffect{
			{Member: "deposed", Kind: "deposed", Address: "terraform_data.cbd", Detail: "deposed object " + strings.TrimSuffix(key, ")") + ": delete"},
			{Member: "deposed", Kind: SideEffectRunsAtApply, Address: "terraform_data.cbd", Detail: `provisioner "local-exec" #0`},
		}
		got := slices.Clone(p.SideEffects)
		for i := range got {
			got[i].Detail, _, _ = strings.Cut(got[i].Detail, "; keyed digest ")
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("side effects (-want +got):\n%s", diff)
		}
	})
}

func TestPlanHoles(t *testing.T) {
	r := newRepo(t, tftest.Terraform(t))
	req := r.request("basic", nil)
	req.Missing = []string{"database", "dns"}
	p := r.plan(req)
	want := &preview.Plan{
		Member: changeset.Member{Name: "basic", Component: "network", Capability: "terraform-apply", Status: "planned",
			PlanDigest: p.Member.PlanDigest,
			Holes: []changeset.Hole{
				{Reason: "inputs from database; planned again once they apply"},
				{Reason: "inputs from dns; planned again once they apply"},
			}},
		PlannedOutputs: preview.Outputs{},
	}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(p.Member.PlanDigest, "tf2:") {
		t.Errorf("plan digest %q", p.Member.PlanDigest)
	}
	if files, _ := os.ReadDir(req.WorkDir); len(files) != 0 {
		t.Errorf("work dir holds %d files, want no plan file", len(files))
	}
	if _, err := os.Stat(filepath.Join(r.dir, "basic", ".terraform")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("terraform ran in the root (.terraform: %v)", err)
	}
	req.Missing = []string{"dns"}
	if r.plan(req).Member.PlanDigest == p.Member.PlanDigest {
		t.Error("other holes, same digest")
	}
}

func TestDigest(t *testing.T) {
	var byBinary []string
	eachBinary(t, func(t *testing.T, r *repo) {
		vars := basicVars("a", "1", canaryA, true)
		first := r.plan(r.request("basic", vars)).Member.PlanDigest
		if again := r.plan(r.request("basic", vars)).Member.PlanDigest; again != first {
			t.Errorf("two plans of one change digest %s and %s", first, again)
		}
		if err := os.RemoveAll(filepath.Join(r.dir, "basic", ".terraform")); err != nil {
			t.Fatal(err)
		}
		if reinit := r.plan(r.request("basic", vars)).Member.PlanDigest; reinit != first {
			t.Errorf("after a fresh init %s, before %s", reinit, first)
		}
		moved := r.plan(r.request("basic", basicVars("a", "2", canaryA, true))).Member.PlanDigest
		if moved == first {
			t.Errorf("another size, same digest %s", first)
		}
		byBinary = append(byBinary, first)
	})
	if len(byBinary) == 2 && byBinary[0] != byBinary[1] {
		t.Errorf("the same create planned by terraform and tofu digests %s and %s", byBinary[0], byBinary[1])
	}
}

func TestApply(t *testing.T) {
	eachBinary(t, func(t *testing.T, r *repo) {
		req := r.request("basic", basicVars("a", "12345678901234567891", canaryA, true))
		out := r.apply(req)
		want := map[string]string{"name": `"a"`, "size": `12345678901234567891`, "derived": `{"name":"a","size":12345678901234567891}`}
		if diff := cmp.Diff(want, outputsText(out)); diff != "" {
			t.Errorf("outputs after apply (-want +got):\n%s", diff)
		}
		for _, e := range r.plan(req).Entries {
			if e.Action != "no-op" {
				t.Errorf("after the apply %s plans %s, want no-op", e.Address, e.Action)
			}
		}
	})
}

func TestApplyRefusesMovedPlan(t *testing.T) {
	eachBinary(t, func(t *testing.T, r *repo) {
		r.apply(r.request("basic", basicVars("a", "1", canaryA, true)))
		cases := []struct {
			reason string
			// between changes the repository or the state after the plan.
			between func(t *testing.T)
			varFile string
		}{
			{
				reason:  "a var file changed",
				varFile: "vars/prod.tfvars",
				between: func(t *testing.T) {
					if err := os.WriteFile(filepath.Join(r.dir, "vars", "prod.tfvars"), []byte("name = \"prod\"\nsize = 4\n"), 0o644); err != nil {
						t.Fatal(err)
					}
				},
			},
			{
				reason: "the state drifted",
				between: func(t *testing.T) {
					r.apply(r.request("basic", basicVars("drift", "1", canaryA, true)))
				},
			},
		}
		for _, c := range cases {
			t.Run(c.reason, func(t *testing.T) {
				var files []string
				var vars map[string]any
				if c.varFile != "" {
					files = []string{c.varFile}
					vars = map[string]any{"secret": canaryA}
				} else {
					vars = basicVars("b", "1", canaryA, true)
				}
				req := r.request("basic", vars, files...)
				approved := r.plan(req)
				c.between(t)
				before := r.state("basic")
				_, err := r.cap.Apply(context.Background(), req, approved)
				if !errors.Is(err, preview.ErrMoved) {
					t.Fatalf("apply: %v, want ErrMoved", err)
				}
				if !strings.Contains(err.Error(), approved.Member.PlanDigest) || strings.Count(err.Error(), "tf2:") != 2 {
					t.Errorf("error %q does not name the approved and the new digest", err)
				}
				if !bytes.Equal(before, r.state("basic")) {
					t.Error("the refused apply changed the state")
				}
			})
		}
	})
}

func TestApplyRefusesStalePlanFile(t *testing.T) {
	eachBinary(t, func(t *testing.T, r *repo) {
		r.apply(r.request("basic", basicVars("a", "1", canaryA, true)))
		req := r.request("basic", basicVars("b", "1", canaryA, true))
		approved := r.plan(req)
		var between []byte
		// Another apply lands after the digest check, before the apply.
		r.cap.beforeApply = func() {
			other := &Capability{Env: r.cap.Env, Stderr: r.cap.Stderr}
			concurrent := r.request("basic", basicVars("c", "1", canaryA, true))
			p, err := other.Plan(context.Background(), concurrent)
			if err == nil {
				_, err = other.Apply(context.Background(), concurrent, p)
			}
			if err != nil {
				t.Errorf("concurrent apply: %v", err)
			}
			between = r.state("basic")
		}
		_, err := r.cap.Apply(context.Background(), req, approved)
		if !errors.Is(err, preview.ErrMoved) || !errors.Is(err, tfexec.ErrStalePlan) {
			t.Fatalf("apply of a stale plan file: %v, want ErrMoved and ErrStalePlan", err)
		}
		if !bytes.Equal(between, r.state("basic")) {
			t.Error("the refused apply changed the state")
		}
	})
}

// TestDigestBindsSensitiveValues plans the sensitive variable's value in
// separate Plan calls of fresh capabilities, as a review job and an apply
// job would: another value moves the digest though the entries show no
// difference, the same value twice does not, another key moves it, and
// the key shows up nowhere in the plans.
func TestDigestBindsSensitiveValues(t *testing.T) {
	eachBinary(t, func(t *testing.T, r *repo) {
		planFresh := func(t *testing.T, req preview.Request) *preview.Plan {
			t.Helper()
			c := &Capability{Env: r.cap.Env, Stderr: r.cap.Stderr}
			p, err := c.Plan(context.Background(), req)
			if err != nil {
				t.Fatalf("plan: %v", err)
			}
			return p
		}
		check := func(t *testing.T, secret, moved string) {
			t.Helper()
			reviewed := planFresh(t, r.request("basic", basicVars("b", "1", secret, true)))
			again := planFresh(t, r.request("basic", basicVars("b", "1", secret, true)))
			changed := planFresh(t, r.request("basic", basicVars("b", "1", moved, true)))
			otherKey := r.request("basic", basicVars("b", "1", secret, true))
			otherKey.Key = previewtest.OtherKey()
			underOtherKey := planFresh(t, otherKey)
			if again.Member.PlanDigest != reviewed.Member.PlanDigest {
				t.Errorf("the same sensitive value digests %s, then %s", reviewed.Member.PlanDigest, again.Member.PlanDigest)
			}
			if changed.Member.PlanDigest == reviewed.Member.PlanDigest {
				t.Errorf("another sensitive value, same digest %s", reviewed.Member.PlanDigest)
			}
			if underOtherKey.Member.PlanDigest == reviewed.Member.PlanDigest {
				t.Errorf("another key, same digest %s", reviewed.Member.PlanDigest)
			}
			// The document cannot show the change: only the digest does.
			if diff := cmp.Diff(withoutIDs(reviewed.Entries), withoutIDs(changed.Entries)); diff != "" {
				t.Errorf("the entries show the sensitive change (-reviewed +changed):\n%s", diff)
			}
			for _, p := range []*preview.Plan{reviewed, changed, underOtherKey} {
				b, err := json.Marshal(struct {
					M changeset.Member
					E []changeset.Entry
					S []changeset.SideEffect
					O preview.Outputs
				}{p.Member, p.Entries, p.SideEffects, p.PlannedOutputs})
				if err != nil {
					t.Fatal(err)
				}
				text := string(b) + fmt.Sprintf("%#v", p.Private)
				for _, k := range append(previewtest.KeyForms(previewtest.Key()), previewtest.KeyForms(previewtest.OtherKey())...) {
					if strings.Contains(text, k) {
						t.Errorf("the plan holds the key as %q", k)
					}
				}
				for _, c := range []string{secret, moved} {
					if strings.Contains(text, c) {
						t.Errorf("the plan holds the sensitive value %q", c)
					}
				}
			}
		}
		// A create binds the value after; an update binds it before and
		// after (the secret resource's input and output, the output).
		t.Run("create", func(t *testing.T) { check(t, canaryA, canaryB) })
		r.apply(r.request("basic", basicVars("a", "1", canaryA, true)))
		t.Run("update", func(t *testing.T) { check(t, canaryB, canaryB+"-other") })
	})
}

// TestApplyRefusesChangedSensitiveValue applies in a fresh capability with
// only the approved document, as a later CI job does: a sensitive value
// changed since the review refuses the apply; the reviewed value applies.
func TestApplyRefusesChangedSensitiveValue(t *testing.T) {
	eachBinary(t, func(t *testing.T, r *repo) {
		r.apply(r.request("basic", basicVars("a", "1", canaryA, true)))
		reviewed := r.plan(r.request("basic", basicVars("a", "1", canaryB, true)))
		// Another process knows the approved member from the document;
		// Private does not cross processes.
		approved := &preview.Plan{Member: reviewed.Member, Entries: reviewed.Entries, SideEffects: reviewed.SideEffects}
		applier := &Capability{Env: r.cap.Env, Stderr: r.cap.Stderr}
		changed := r.request("basic", basicVars("a", "1", canaryB+"-other", true))
		before := r.state("basic")
		_, err := applier.Apply(context.Background(), changed, approved)
		if !errors.Is(err, preview.ErrMoved) || strings.Count(err.Error(), "tf2:") != 2 {
			t.Fatalf("apply: %v, want ErrMoved naming both digests", err)
		}
		if !bytes.Equal(before, r.state("basic")) {
			t.Error("the refused apply changed the state")
		}
		if strings.Contains(err.Error(), "canary") {
			t.Errorf("error %q holds a canary", err)
		}
		if _, err := applier.Apply(context.Background(), r.request("basic", basicVars("a", "1", canaryB, true)), approved); err != nil {
			t.Fatalf("apply of the reviewed value: %v", err)
		}
		if bytes.Equal(before, r.state("basic")) {
			t.Error("the apply of the reviewed value left the state as it was")
		}
	})
}

// TestShortKey: a key missing or shorter than 32 bytes is refused before
// terraform runs, by Plan and by Apply.
func TestShortKey(t *testing.T) {
	r := newRepo(t, tftest.Terraform(t))
	for _, key := range [][]byte{nil, previewtest.Key()[:31]} {
		req := r.request("basic", basicVars("a", "1", canaryA, true))
		req.Key = key
		_, err := r.cap.Plan(context.Background(), req)
		if !errors.Is(err, preview.ErrShortKey) || !strings.Contains(err.Error(), fmt.Sprintf("holds %d bytes", len(key))) {
			t.Errorf("plan with a %d-byte key: %v, want ErrShortKey", len(key), err)
		}
		_, err = r.cap.Apply(context.Background(), req, &preview.Plan{Member: changeset.Member{PlanDigest: "tf2:approved"}})
		if !errors.Is(err, preview.ErrShortKey) {
			t.Errorf("apply with a %d-byte key: %v, want ErrShortKey", len(key), err)
		}
	}
	if _, err := os.Stat(filepath.Join(r.dir, "basic", ".terraform")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("terraform ran in the root (.terraform: %v)", err)
	}
}

func TestOutputs(t *testing.T) {
	eachBinary(t, func(t *testing.T, r *repo) {
		// terraform writes numbers in its own shortest form (1.50 as
		// 1.5); what is kept is its text, not a float64's.
		req := r.request("basic", basicVars("a", "1.50", canaryA, true))
		out, err := r.cap.Outputs(context.Background(), req)
		if err != nil {
			t.Fatalf("outputs before any apply: %v", err)
		}
		if len(out) != 0 {
			t.Errorf("outputs before any apply: %v, want none", outputsText(out))
		}
		r.apply(req)
		out, err = r.cap.Outputs(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"name": `"a"`, "size": `1.5`, "derived": `{"name":"a","size":1.5}`}
		if diff := cmp.Diff(want, outputsText(out)); diff != "" {
			t.Errorf("outputs (-want +got):\n%s", diff)
		}
	})
}

// TestCanary plans, applies and plans again a root whose sensitive variable
// is copied into a resource and a sensitive output, and looks for its value
// in everything the capability returns or leaves behind.
func TestCanary(t *testing.T) {
	eachBinary(t, func(t *testing.T, r *repo) {
		var seen []string
		look := func(what string, v any) {
			t.Helper()
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			seen = append(seen, what)
			for _, c := range []string{canaryA, canaryB} {
				if bytes.Contains(b, []byte(c)) {
					t.Errorf("%s holds the canary: %s", what, b)
				}
			}
		}
		lookPlan := func(what string, p *preview.Plan) {
			t.Helper()
			look(what+" member", p.Member)
			look(what+" entries", p.Entries)
			look(what+" side effects", p.SideEffects)
			look(what+" planned outputs", p.PlannedOutputs)
		}
		lookDir := func(dir string) {
			t.Helper()
			err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				b, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				look("file "+path, string(b))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}

		first := r.request("basic", basicVars("a", "1", canaryA, true))
		p := r.plan(first)
		lookPlan("create plan", p)
		out, err := r.cap.Apply(context.Background(), first, p)
		if err != nil {
			t.Fatal(err)
		}
		look("outputs after apply", out)
		// The caller removes the plan file; nothing else may be left.
		if err := os.Remove(p.Private.(*private).planFile); err != nil {
			t.Fatal(err)
		}
		lookDir(first.WorkDir)

		second := r.request("basic", basicVars("b", "1", canaryB, true))
		p = r.plan(second)
		lookPlan("update plan", p)
		if err := os.Remove(p.Private.(*private).planFile); err != nil {
			t.Fatal(err)
		}
		lookDir(second.WorkDir)
		out, err = r.cap.Outputs(context.Background(), second)
		if err != nil {
			t.Fatal(err)
		}
		look("outputs", out)

		// A refused apply and a failed plan name no value.
		_, err = r.cap.Apply(context.Background(), second, &preview.Plan{Member: changeset.Member{PlanDigest: "tf2:approved"}})
		if !errors.Is(err, preview.ErrMoved) {
			t.Fatalf("apply of another digest: %v", err)
		}
		look("apply error", err.Error())
		_, err = r.cap.Plan(context.Background(), r.request("basic", map[string]any{"name": "a", "size": canaryA, "secret": canaryB}))
		if err == nil {
			t.Fatal("a plan with a size that is not a number succeeded")
		}
		look("plan error", err.Error())
		if len(seen) < 12 {
			t.Errorf("looked at %d things", len(seen))
		}
	})
}

func TestInputErrors(t *testing.T) {
	dir := tftest.CopyRoot(t, "testdata")
	terraform := tftest.Terraform(t).Path
	cases := []struct {
		reason string
		inputs map[string]any
		want   string
	}{
		{"no root", map[string]any{}, `terraform-apply: input "root": required: the root module's directory, relative to the repository`},
		{"a misspelt input", map[string]any{"root": "basic", "varfiles": []any{"x"}}, `terraform-apply: input "varfiles": unknown (want one of binary, name, root, varFiles, vars)`},
		{"root not a string", map[string]any{"root": 3}, `terraform-apply: input "root": want a string, got a number`},
		{"root outside the repository", map[string]any{"root": "../etc"}, `terraform-apply: input "root": ../etc leaves the repository`},
		{"root absolute", map[string]any{"root": "/etc"}, `terraform-apply: input "root": /etc is absolute; want a path relative to the repository`},
		{"root missing", map[string]any{"root": "nowhere"}, `terraform-apply: input "root": nowhere is not a directory`},
		{"an unknown binary", map[string]any{"root": "basic", "binary": "choudoufu"}, `terraform-apply: input "binary": binary "choudoufu": exec: "choudoufu": executable file not found in $PATH`},
		{"varFiles not a list", map[string]any{"root": "basic", "binary": terraform, "varFiles": "vars/prod.tfvars"}, `terraform-apply: input "varFiles": want a list of paths, got a string`},
		{"a var file missing", map[string]any{"root": "basic", "binary": terraform, "varFiles": []any{"vars/prod.tfvars", "vars/none.tfvars"}}, `terraform-apply: input "varFiles[1]": vars/none.tfvars is not a file`},
		{"a var file not a string", map[string]any{"root": "basic", "binary": terraform, "varFiles": []any{7}}, `terraform-apply: input "varFiles[0]": want a path, got a number`},
		{"vars not a map", map[string]any{"root": "basic", "binary": terraform, "vars": []any{"a"}}, `terraform-apply: input "vars": want a map of variable names to values, got a list`},
		{"a vars key not a string", map[string]any{"root": "basic", "binary": terraform, "vars": map[string]any{"tags": map[any]any{1: "x"}}}, `terraform-apply: input "vars.tags": a key is a number; want a string`},
		{"name not a string", map[string]any{"root": "basic", "binary": terraform, "name": true}, `terraform-apply: input "name": want a string, got a boolean`},
	}
	if err := os.Symlink(t.TempDir(), filepath.Join(dir, "elsewhere")); err != nil {
		t.Fatal(err)
	}
	cases = append(cases, struct {
		reason string
		inputs map[string]any
		want   string
	}{"root a link out of the repository", map[string]any{"root": "elsewhere"}, `terraform-apply: input "root": elsewhere leaves the repository through a symbolic link`})
	c := &Capability{Env: tftest.Env(t)}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			_, err := c.Plan(context.Background(), preview.Request{Inputs: tc.inputs, Root: dir, WorkDir: t.TempDir()})
			got := "<nil>"
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("error\n %s\nwant\n %s", got, tc.want)
			}
		})
	}
}

func TestPlanNeedsAWorkDirectory(t *testing.T) {
	r := newRepo(t, tftest.Terraform(t))
	req := r.request("basic", nil)
	req.WorkDir = filepath.Join(req.WorkDir, "missing")
	_, err := r.cap.Plan(context.Background(), req)
	want := "terraform-apply basic: work directory " + req.WorkDir + " is not a directory"
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}

func TestMemberName(t *testing.T) {
	r := newRepo(t, tftest.Terraform(t))
	req := r.request("basic", nil)
	req.Missing = []string{"upstream"}
	req.Inputs["name"] = "edge-network"
	if got := r.plan(req).Member.Name; got != "edge-network" {
		t.Errorf("member %q, want the name input", got)
	}
}

// TestEnvironmentVars: the environment's vars reach a variable the root
// declares as TF_VAR_<name>; the step's vars win over them, and a var the
// root does not declare, or whose name no variable can have, is ignored.
func TestEnvironmentVars(t *testing.T) {
	eachBinary(t, func(t *testing.T, r *repo) {
		vars := map[string]any{"secret": canaryA, "extra": false, "size": json.Number("2")}
		req := r.request("basic", vars)
		req.Vars = map[string]string{"name": "from-env", "size": "7", "undeclared": "x", "not a name": "y"}
		p := r.plan(req)
		want := map[string]string{"name": `"from-env"`, "size": `2`}
		if diff := cmp.Diff(want, outputsText(p.PlannedOutputs)); diff != "" {
			t.Errorf("planned outputs (-want +got):\n%s", diff)
		}
	})
}

// TestNumbersReachTerraformAsWritten: a number written in the project file
// reaches terraform with every digit (decoded as a float64 it would have
// been 123456789012345680000000000000).
func TestNumbersReachTerraformAsWritten(t *testing.T) {
	const big = "123456789012345678901234567890"
	proj, err := preview.ParseProject("captf.yaml", []byte("components:\n  network:\n    steps:\n      - kind: terraform-apply\n        inputs: {root: basic, vars: {name: a, size: "+big+"}}\n"),
		func(string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	eachBinary(t, func(t *testing.T, r *repo) {
		req := r.request("basic", proj.Components[0].Steps[0].Inputs["vars"].(map[string]any))
		p := r.plan(req)
		if got := string(p.PlannedOutputs["size"]); got != big {
			t.Errorf("planned output size = %s, want %s", got, big)
		}
	})
}

// TestApplyRefusesMovedRuntime: a provisioner that the plan runs and that
// changed after the plan moves the member digest: Apply applies nothing,
// runs nothing, and names the block and no value. A provisioner of a
// resource the plan leaves alone does not run and may change.
func TestApplyRefusesMovedRuntime(t *testing.T) {
	eachBinary(t, func(t *testing.T, r *repo) {
		main := filepath.Join(r.dir, "runtime", "main.tf")
		edit := func(old, new string) {
			t.Helper()
			src, err := os.ReadFile(main)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(main, bytes.Replace(src, []byte(old), []byte(new), 1), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		ran := func() bool {
			_, err := os.Stat(filepath.Join(r.dir, "runtime", "ran-a"))
			return err == nil
		}
		r.apply(r.request("runtime", map[string]any{"n": 0}))
		req := r.request("runtime", map[string]any{"n": 1})
		approved := r.plan(req)
		before := r.state("runtime")

		edit("CANARY-A-1", "CANARY-A-2")
		_, err := r.cap.Apply(context.Background(), req, approved)
		if !errors.Is(err, preview.ErrMoved) || !strings.Contains(err.Error(), `what runs at apply moved: terraform_data.a[0] provisioner "local-exec" #0 (changed)`) {
			t.Fatalf("apply after the command changed: %v", err)
		}
		if strings.Contains(err.Error(), "CANARY") {
			t.Errorf("the error holds a value: %v", err)
		}
		if ran() || !bytes.Equal(before, r.state("runtime")) {
			t.Fatal("a refused apply ran the provisioner or changed the state")
		}
		edit("CANARY-A-2", "CANARY-A-1")

		edit("CANARY-KEEP-1", "CANARY-KEEP-2")
		if _, err := r.cap.Apply(context.Background(), req, approved); err != nil {
			t.Fatalf("apply with only an untouched resource's provisioner changed: %v", err)
		}
		if !ran() {
			t.Error("the approved apply did not run a's provisioner")
		}
	})
}
