package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/captf/captf/internal/planlog"
	"github.com/captf/captf/internal/render"
	"github.com/captf/captf/internal/tftest"
	"github.com/captf/captf/pkg/fingerprint"
)

const (
	canarySecret = "CANARY-JOB-SECRET-5e1f"
	canaryPlain  = "CANARY-JOB-PLAIN-90ab"
)

// jobFixture lays out what a runner Job's pod would mount: the rendered
// inputs, the runtime folder with the real binary, the plan key, and a
// work folder that keeps the local state from Job to Job.
type jobFixture struct {
	t                                           *testing.T
	inputs, work, runtime, key, message, module string
}

func newJobFixture(t *testing.T, bin tftest.Binary) *jobFixture {
	root := t.TempDir()
	f := &jobFixture{t: t,
		inputs: filepath.Join(root, "inputs"), work: filepath.Join(root, "work"),
		runtime: filepath.Join(root, "runtime"), key: filepath.Join(root, "plan-key", "key"),
		message: filepath.Join(root, "termination-log"),
	}
	for _, d := range []string{f.inputs, f.runtime, filepath.Dir(f.key)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(bin.Path, filepath.Join(f.runtime, bin.Name)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.key, bytes.Repeat([]byte{9}, 32), 0o440); err != nil {
		t.Fatal(err)
	}
	var err error
	if f.module, err = filepath.Abs("testdata/module"); err != nil {
		t.Fatal(err)
	}
	mainTF := `{"variable":{"size":{"type":"string"},"token":{"type":"string","sensitive":true}},` +
		`"module":{"m":{"source":"./module","size":"${var.size}","token":"${var.token}"}},` +
		`"output":{"size":{"value":"${module.m.size}"}}}`
	f.write("main.tf.json", mainTF)
	f.vars(canaryPlain + "-1")
	for _, kv := range tftest.Env(t) {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	return f
}

func (f *jobFixture) write(name, data string) {
	if err := os.WriteFile(filepath.Join(f.inputs, name), []byte(data), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *jobFixture) vars(size string) {
	f.write("terraform.tfvars.json", `{"size":"`+size+`","token":"`+canarySecret+`"}`)
}

func (f *jobFixture) run(op, expect string) (int, Message, string) {
	f.t.Helper()
	return f.runWith(op, expect, func(*Job) {})
}

// runWith is run with the Job edited first.
func (f *jobFixture) runWith(op, expect string, edit func(*Job)) (int, Message, string) {
	f.t.Helper()
	// One log for both streams, as a container's: written from two
	// goroutines (terraform's stdout and stderr), so under a lock.
	var out lockedBuffer
	j := &Job{Operation: op, Inputs: f.inputs, Module: f.module, Workdir: f.work, Runtime: f.runtime, KeyFile: f.key,
		ExpectPlan: expect, MessagePath: f.message, Stdout: &out, Stderr: &out}
	edit(j)
	code := j.Run(context.Background())
	raw, err := os.ReadFile(f.message)
	if err != nil {
		f.t.Fatalf("no report: %v", err)
	}
	if bytes.Contains(raw, []byte(canarySecret)) || bytes.Contains(raw, []byte(canaryPlain)) {
		f.t.Fatalf("the report holds a value: %s", raw)
	}
	var m Message
	if err := json.Unmarshal(raw, &m); err != nil {
		f.t.Fatalf("report %s: %v", raw, err)
	}
	return code, m, out.String()
}

func TestJob(t *testing.T) {
	for _, bin := range tftest.Binaries(t) {
		t.Run(bin.Name, func(t *testing.T) {
			f := newJobFixture(t, bin)

			// The first apply is ungated: no key is needed.
			os.Remove(f.key)
			code, m, log := f.run("apply", "")
			if code != 0 || m.Outcome != OutcomeApplied {
				t.Fatalf("first apply: exit %d, %+v\n%s", code, m, log)
			}
			// The module's endpoint outputs, forwarded and reported.
			if m.Endpoint == nil || *m.Endpoint != (Endpoint{Host: "api.default.example.test", Port: 6443}) {
				t.Errorf("endpoint %+v", m.Endpoint)
			}
			wantDomains := []FailureDomain{
				{Name: "zone-a", ControlPlane: true, Attributes: map[string]string{"rack": "1"}},
				{Name: "zone-b", ControlPlane: false, Attributes: map[string]string{"rack": "2"}},
			}
			if diff := cmp.Diff(wantDomains, m.FailureDomains); diff != "" {
				t.Errorf("failure domains (-want +got):\n%s", diff)
			}
			// A plan Job without its key fails before any step.
			if code, m, _ := f.run("plan", ""); code != ExitBadInput || m.Outcome != OutcomeBadInput || !strings.Contains(m.Error, "does not exist") {
				t.Fatalf("plan without key: exit %d, %+v", code, m)
			}
			if err := os.WriteFile(f.key, bytes.Repeat([]byte{9}, 31), 0o440); err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadFile(filepath.Join(f.work, "terraform.tfstate"))
			if code, m, _ := f.run("apply", fingerprint.EmptyPlanHash); code != ExitBadInput || !strings.Contains(m.Error, "31 bytes") {
				t.Fatalf("apply with a short key: exit %d, %+v", code, m)
			}
			if after, _ := os.ReadFile(filepath.Join(f.work, "terraform.tfstate")); !bytes.Equal(before, after) {
				t.Fatal("a refused key let the apply run")
			}
			if err := os.WriteFile(f.key, bytes.Repeat([]byte{9}, 32), 0o440); err != nil {
				t.Fatal(err)
			}

			// A change: plan, then the approved apply.
			f.vars(canaryPlain + "-2")
			code, plan, log := f.run("plan", "")
			if code != 0 || plan.Outcome != OutcomePlanned || plan.Plan.Change != 1 || plan.Plan.OutputChanges != 1 {
				t.Fatalf("plan: exit %d, %+v", code, plan)
			}
			if !strings.Contains(log, canaryPlain+"-2") {
				t.Error("the Job log lacks terraform's rendering of the plan")
			}
			// The log closes with the attributes that change, by name.
			changed, err := planlog.Read(strings.NewReader(log))
			wantChanged := []fingerprint.Attributes{{Address: "module.m.terraform_data.node", Action: "update", Names: []string{"input", "output"}}}
			if diff := cmp.Diff(wantChanged, changed); err != nil || diff != "" {
				t.Errorf("the log's changed attributes (%v), -want +got:\n%s\n%s", err, diff, log)
			}
			// terraform prints the token in clear in the old output of
			// the resource; the Job's log does not.
			if i := strings.Index(log, canarySecret); i >= 0 {
				t.Errorf("the Job log shows the sensitive variable's value: %s", log[max(0, i-200):i+30])
			}
			// The world moves before the apply: nothing is applied.
			f.vars(canaryPlain + "-3")
			code, moved, _ := f.run("apply", plan.Plan.PlanHash)
			if code != ExitPlanChanged || moved.Outcome != OutcomePlanChanged || moved.Plan.PlanHash == plan.Plan.PlanHash {
				t.Fatalf("moved apply: exit %d, %+v", code, moved)
			}
			if code, m, _ := f.run("apply", moved.Plan.PlanHash); code != 0 || m.Outcome != OutcomeApplied {
				t.Fatalf("approved apply: exit %d, %+v", code, m)
			}
			// Nothing left: the empty plan needs no approval.
			if code, m, _ := f.run("plan", ""); code != 0 || !m.Plan.Empty() {
				t.Fatalf("empty plan: exit %d, %+v", code, m)
			}
			if code, m, _ := f.run("apply", fingerprint.EmptyPlanHash); code != 0 || m.Outcome != OutcomeNoChanges {
				t.Fatalf("empty apply: exit %d, %+v", code, m)
			}
			if code, m, _ := f.run("apply", moved.Plan.PlanHash); code != ExitPlanChanged || !m.Plan.Empty() {
				t.Fatalf("empty plan after a non-empty approval: exit %d, %+v", code, m)
			}

			// A refresh needs no key and applies no change of the inputs.
			os.Remove(f.key)
			f.vars(canaryPlain + "-4")
			if code, m, log := f.run("refresh", ""); code != 0 || m.Outcome != OutcomeRefreshed {
				t.Fatalf("refresh: exit %d, %+v\n%s", code, m, log)
			}
			if err := os.WriteFile(f.key, bytes.Repeat([]byte{9}, 32), 0o440); err != nil {
				t.Fatal(err)
			}
			if code, m, _ := f.run("plan", ""); code != 0 || m.Plan.Change != 1 {
				t.Fatalf("plan after a refresh: exit %d, %+v; want the new inputs still to apply", code, m)
			}
		})
	}
}

func TestJobInputsDoNotFit(t *testing.T) {
	for _, bin := range tftest.Binaries(t) {
		t.Run(bin.Name, func(t *testing.T) {
			f := newJobFixture(t, bin)
			os.Remove(f.key)
			// An argument the module does not declare.
			f.write("main.tf.json", `{"variable":{"size":{},"token":{"sensitive":true}},`+
				`"module":{"m":{"source":"./module","size":"${var.size}","token":"${var.token}","extra":"${var.size}"}}}`)
			code, m, log := f.run("apply", "")
			if code != ExitBadInput || m.Outcome != OutcomeBadInput || !strings.HasSuffix(m.Error, ": the inputs do not fit the module: Extraneous JSON object property (extra)") {
				t.Errorf("undeclared argument: exit %d, %+v\n%s", code, m, log)
			}
			// A value of the wrong type (the plain canary for a bool): the
			// report names the variable, never the value (run checks).
			f.write("main.tf.json", `{"variable":{"size":{},"token":{"sensitive":true}},`+
				`"module":{"m":{"source":"./module","size":"${var.size}","token":"${var.token}","moving":"${var.size}"}}}`)
			code, m, log = f.run("apply", "")
			if code != ExitBadInput || !strings.HasSuffix(m.Error, ": the inputs do not fit the module: Invalid value for input variable (moving)") {
				t.Errorf("wrong type: exit %d, %+v\n%s", code, m, log)
			}
		})
	}
}

// TestJobOwnOutput: the inputs hash captf records as a root output is not
// the module's change. An inputs change that changes nothing in the module
// plans empty and applies without approval, and its apply still writes the
// new hash to state; the module's own outputs still count.
func TestJobOwnOutput(t *testing.T) {
	for _, bin := range tftest.Binaries(t) {
		t.Run(bin.Name, func(t *testing.T) {
			f := newJobFixture(t, bin)
			// The shape of a rendered root: the module call and captf's
			// output; the runner forwards the module's endpoint outputs,
			// and the label moves the endpoint host.
			root := func(hash, label string) {
				f.write("main.tf.json", `{"variable":{"size":{"type":"string"},"token":{"type":"string","sensitive":true}},`+
					`"module":{"m":{"source":"./module","size":"${var.size}","token":"${var.token}","label":"`+label+`"}},`+
					`"output":{"`+render.HashOutput+`":{"value":"`+hash+`"}}}`)
			}
			// reported fails when the report shows captf's output.
			reported := func(what string, m Message) {
				t.Helper()
				raw := m.Encode()
				if bytes.Contains(raw, []byte(render.HashOutput)) || bytes.Contains(raw, []byte("h2:")) {
					t.Errorf("%s: the report shows captf's own output: %s", what, raw)
				}
			}
			key := func() {
				if err := os.WriteFile(f.key, bytes.Repeat([]byte{9}, 32), 0o440); err != nil {
					t.Fatal(err)
				}
			}

			root("h2:one", "a")
			os.Remove(f.key)
			if code, m, log := f.run("apply", ""); code != 0 || m.Outcome != OutcomeApplied {
				t.Fatalf("first apply: exit %d, %+v\n%s", code, m, log)
			}
			if got := f.stateOutput(render.HashOutput); got != "h2:one" {
				t.Fatalf("state records %q after the first apply", got)
			}
			key()

			// Only the inputs hash moves: the plan is empty to the manager.
			root("h2:two", "a")
			code, plan, log := f.run("plan", "")
			if code != 0 || plan.Outcome != OutcomePlanned || plan.Plan.PlanHash != fingerprint.EmptyPlanHash ||
				plan.Plan.OutputChanges != 0 || len(plan.Plan.Resources) != 0 || !plan.Plan.Empty() {
				t.Fatalf("plan of an inputs change the module ignores: exit %d, %+v\n%s", code, plan.Plan, log)
			}
			reported("plan", plan)
			// An approval of something else does not cover it: the state
			// keeps the old hash.
			const other = "p2:1111111111111111111111111111111111111111111111111111111111111111"
			if code, m, _ := f.run("apply", other); code != ExitPlanChanged || m.Outcome != OutcomePlanChanged || !m.Plan.Empty() {
				t.Fatalf("empty plan after a non-empty approval: exit %d, %+v", code, m)
			}
			if got := f.stateOutput(render.HashOutput); got != "h2:one" {
				t.Fatalf("a refused apply wrote %q to state", got)
			}
			// The apply of the empty plan applies it: the state records the
			// new hash, and the manager reads a successful apply.
			code, m, log := f.run("apply", fingerprint.EmptyPlanHash)
			if code != 0 || m.Outcome != OutcomeApplied || !m.Plan.Empty() {
				t.Fatalf("apply of the empty plan: exit %d, %+v\n%s", code, m, log)
			}
			reported("apply", m)
			if got := f.stateOutput(render.HashOutput); got != "h2:two" {
				t.Errorf("state records %q after the apply of the empty plan, want h2:two", got)
			}
			// Nothing at all left: nothing is applied.
			if code, m, _ := f.run("apply", fingerprint.EmptyPlanHash); code != 0 || m.Outcome != OutcomeNoChanges {
				t.Fatalf("apply with nothing to do: exit %d, %+v", code, m)
			}

			// A module output moves with the inputs hash: one output change,
			// the module's (the endpoint host).
			root("h2:three", "b")
			code, plan, _ = f.run("plan", "")
			if code != 0 || plan.Plan.OutputChanges != 1 || plan.Plan.Add+plan.Plan.Change+plan.Plan.Destroy != 0 || plan.Plan.Empty() {
				t.Fatalf("plan of a module output change: exit %d, %+v", code, plan.Plan)
			}
			reported("plan", plan)
			// Its hash does not bind captf's output: a later inputs hash
			// with the same module change is the same approved plan.
			root("h2:four", "b")
			if code, m, log := f.run("apply", plan.Plan.PlanHash); code != 0 || m.Outcome != OutcomeApplied {
				t.Fatalf("approved apply: exit %d, %+v\n%s", code, m, log)
			}
			if got := f.stateOutput(render.HashOutput); got != "h2:four" {
				t.Errorf("state records %q after the approved apply, want h2:four", got)
			}
			if got := f.stateOutput("control_plane_endpoint_host"); got != "api.b.example.test" {
				t.Errorf("state records the endpoint host %q, want api.b.example.test", got)
			}
		})
	}
}

// stateOutput reads a root output's string value from the local state the
// work folder keeps.
func (f *jobFixture) stateOutput(name string) string {
	f.t.Helper()
	raw, err := os.ReadFile(filepath.Join(f.work, "terraform.tfstate"))
	if err != nil {
		f.t.Fatal(err)
	}
	var state struct {
		Outputs map[string]struct {
			Value json.RawMessage `json:"value"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(raw, &state); err != nil {
		f.t.Fatal(err)
	}
	var v string
	if out, ok := state.Outputs[name]; ok {
		if err := json.Unmarshal(out.Value, &v); err != nil {
			f.t.Fatalf("output %s: %v", name, err)
		}
	}
	return v
}

// TestJobSensitiveContractOutput: a module whose failure_domains output is
// declared sensitive (its value comes from a sensitive variable) applies,
// its root forwards the output as sensitive (terraform refuses a root
// output holding sensitive data otherwise), and the report leaves it out.
func TestJobSensitiveContractOutput(t *testing.T) {
	for _, bin := range tftest.Binaries(t) {
		t.Run(bin.Name, func(t *testing.T) {
			f := newJobFixture(t, bin)
			src, err := os.ReadFile(filepath.Join(f.module, "main.tf"))
			if err != nil {
				t.Fatal(err)
			}
			i := strings.Index(string(src), "output \"failure_domains\"")
			if i < 0 {
				t.Fatal("the test module declares no failure_domains")
			}
			module := t.TempDir()
			body := string(src[:i]) + "output \"failure_domains\" {\n  value     = [{ name = var.token }]\n  sensitive = true\n}\n"
			if err := os.WriteFile(filepath.Join(module, "main.tf"), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			f.module = module
			os.Remove(f.key)
			code, m, log := f.run("apply", "")
			if code != 0 || m.Outcome != OutcomeApplied {
				t.Fatalf("apply: exit %d, %+v\n%s", code, m, log)
			}
			if m.FailureDomains != nil || m.Endpoint == nil {
				t.Errorf("reported failure domains %+v (sensitive: want none), endpoint %+v (want it)", m.FailureDomains, m.Endpoint)
			}
			b, _ := json.Marshal(m)
			if strings.Contains(string(b), canarySecret) {
				t.Error("the report holds the sensitive value")
			}
		})
	}
}

// lockedBuffer is a bytes.Buffer safe for writers in several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestJobAllowDeletesHash: an apply under the destructive-plan guard
// applies a plan that replaces a resource only with --allow-deletes-hash
// naming the approval hash its inputs record, and with --inputs-digest
// naming them, and nothing with another hash or none; inputs edited after
// the manager wrote them (in the per-run Secret) apply nothing, though
// they record the approved hash; a malformed hash, one without --guard or
// without a digest, is refused before any step.
func TestJobAllowDeletesHash(t *testing.T) {
	approval := "h2:" + strings.Repeat("a1", 32)
	for _, bin := range tftest.Binaries(t) {
		t.Run(bin.Name, func(t *testing.T) {
			f := newJobFixture(t, bin)
			zone := func(z string) {
				f.write("main.tf.json", `{"variable":{"size":{"type":"string"},"token":{"type":"string","sensitive":true},"zone":{"type":"string"}},`+
					`"module":{"m":{"source":"./module","size":"${var.size}","token":"${var.token}","zone":"${var.zone}"}},`+
					`"output":{"captf_inputs_hash":{"value":"h2:`+strings.Repeat("0"+z[:1], 32)+`"},"captf_approval_hash":{"value":"`+approval+`"}}}`)
				f.write("terraform.tfvars.json", `{"size":"`+canaryPlain+`","token":"`+canarySecret+`","zone":"`+z+`"}`)
			}
			key := bytes.Repeat([]byte{9}, 32)
			digest := func() string {
				main, _ := os.ReadFile(filepath.Join(f.inputs, "main.tf.json"))
				vars, _ := os.ReadFile(filepath.Join(f.inputs, "terraform.tfvars.json"))
				return render.RunDigest(key, main, vars)
			}
			var rendered string // the digest of the inputs as the manager wrote them
			// What the approved plan's summary lists as deleted or
			// replaced, and how many more it counted without listing.
			reviewed, unlisted := []string{"module.m.terraform_data.zone[0]"}, 0
			guarded := func(allow string) (int, Message) {
				t.Helper()
				var out lockedBuffer
				j := &Job{Operation: "apply", Guard: true, AllowDeletesHash: allow, Inputs: f.inputs, Module: f.module, Workdir: f.work,
					Runtime: f.runtime, MessagePath: f.message, Stdout: &out, Stderr: &out}
				if allow != "" {
					j.KeyFile, j.InputsDigest = f.key, rendered
					j.ReviewedDeletes, j.ReviewedDestroy = reviewed, len(reviewed)+unlisted
				}
				code := j.Run(context.Background())
				raw, err := os.ReadFile(f.message)
				if err != nil {
					t.Fatal(err)
				}
				var m Message
				if err := json.Unmarshal(raw, &m); err != nil {
					t.Fatal(err)
				}
				return code, m
			}
			zone("a")
			if code, m := guarded(""); code != 0 || m.Outcome != OutcomeApplied {
				t.Fatalf("first apply: exit %d, %+v", code, m)
			}
			zone("b")
			rendered = digest()
			if code, m := guarded(""); code != ExitPlanChanged || m.Outcome != OutcomeDestructive || m.Guarded.Replace != 1 {
				t.Fatalf("a replacement without --allow-deletes-hash: exit %d, %+v", code, m)
			}
			if code, m := guarded("h2:" + strings.Repeat("b2", 32)); code != ExitPlanChanged || m.Outcome != OutcomeDestructive {
				t.Fatalf("a replacement with another approval hash: exit %d, %+v", code, m)
			}
			for _, bad := range []string{"p2:" + strings.Repeat("a1", 32), "h2:short"} {
				if code, m := guarded(bad); code != ExitBadInput || !strings.Contains(m.Error, "--allow-deletes-hash") {
					t.Errorf("--allow-deletes-hash %s: exit %d, %+v", bad, code, m)
				}
			}
			// Someone who can write Secrets puts other inputs in the
			// per-run Secret, recording the approved hash: they are not
			// those the manager wrote, and nothing is applied.
			zone("c")
			if code, m := guarded(approval); code != ExitBadInput || !strings.Contains(m.Error, "--inputs-digest") {
				t.Fatalf("inputs edited after the manager wrote them, recording the approved hash: exit %d, %+v", code, m)
			}
			zone("a")
			if code, m := guarded(""); code != 0 || m.Guarded.Total() != 0 {
				t.Fatalf("after the edited inputs were refused, the first inputs: exit %d, %+v; want nothing to change (nothing was applied)", code, m)
			}
			rendered = ""
			if code, m := guarded(approval); code != ExitBadInput || !strings.Contains(m.Error, "--inputs-digest") {
				t.Errorf("--allow-deletes-hash without --inputs-digest: exit %d, %+v", code, m)
			}
			zone("b")
			rendered = digest()
			// The approved plan replaced something else: this replacement
			// was not reviewed, and nothing applies.
			reviewed = []string{"module.m.terraform_data.other"}
			if code, m := guarded(approval); code != ExitPlanChanged || m.Outcome != OutcomeDestructive || !strings.Contains(m.Error, "the approved plan did not: module.m.terraform_data.zone[0]") {
				t.Fatalf("a replacement the approved plan did not list: exit %d, %+v", code, m)
			}
			reviewed = []string{"module.m.terraform_data.zone[0]"}
			if code, m := guarded(approval); code != 0 || m.Outcome != OutcomeApplied || m.Guarded.Replace != 1 {
				t.Fatalf("the approved input set: exit %d, %+v", code, m)
			}
			// Nothing left to replace: the same inputs plan no change.
			if code, m := guarded(""); code != 0 || m.Outcome != OutcomeApplied || m.Guarded.Total() != 0 {
				t.Fatalf("after the approved apply: exit %d, %+v", code, m)
			}
		})
	}
}

// TestJobUnapproved: an apply of a change of values an approval leaves
// out (--applied-inputs, --unapproved-vars) applies only after it showed,
// in the Job, that the inputs differ from the last applied ones only in
// those values and that the last applied inputs plan no change of their
// own. A change of another variable, of the root module, applied files
// that do not describe the state (drift, or files someone edited), or
// none at all apply nothing, with outcome needs-approval and exit 3,
// naming variables and addresses only.
func TestJobUnapproved(t *testing.T) {
	for _, bin := range tftest.Binaries(t) {
		t.Run(bin.Name, func(t *testing.T) {
			f := newJobFixture(t, bin)
			applied := filepath.Join(t.TempDir(), "applied")
			if err := os.MkdirAll(applied, 0o755); err != nil {
				t.Fatal(err)
			}
			root := func(size, token, extra string) {
				f.write("main.tf.json", `{"variable":{"size":{"type":"string"},"token":{"type":"string","sensitive":true}},`+
					`"module":{"m":{"source":"./module","size":"${var.size}","token":"${var.token}"`+extra+`}},`+
					`"output":{"captf_inputs_hash":{"value":"h2:`+fmt.Sprintf("%064x", len(size)*1000+len(token))+`"}}}`)
				f.write("terraform.tfvars.json", `{"size":"`+size+`","token":"`+token+`"}`)
			}
			keep := func() {
				for _, n := range InputFiles {
					b, err := os.ReadFile(filepath.Join(f.inputs, n))
					if err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(applied, n), b, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			run := func(withApplied bool) (int, Message) {
				t.Helper()
				var out lockedBuffer
				j := &Job{Operation: "apply", Guard: true, Inputs: f.inputs, Module: f.module, Workdir: f.work,
					Runtime: f.runtime, MessagePath: f.message, Stdout: &out, Stderr: &out}
				if withApplied {
					j.AppliedInputs, j.Unapproved = applied, []string{"token"}
				}
				code := j.Run(context.Background())
				raw, err := os.ReadFile(f.message)
				if err != nil {
					t.Fatal(err)
				}
				if bytes.Contains(raw, []byte(canarySecret)) || bytes.Contains(raw, []byte(canaryPlain)) {
					t.Fatalf("the report holds a value: %s", raw)
				}
				var m Message
				if err := json.Unmarshal(raw, &m); err != nil {
					t.Fatal(err)
				}
				return code, m
			}
			refused := func(what string, code int, m Message, names ...string) {
				t.Helper()
				if code != ExitPlanChanged || m.Outcome != OutcomeNeedsApproval {
					t.Fatalf("%s: exit %d, %+v; want %d, outcome %s", what, code, m, ExitPlanChanged, OutcomeNeedsApproval)
				}
				for _, n := range names {
					if !strings.Contains(m.Error, n) {
						t.Errorf("%s: the error %q does not name %s", what, m.Error, n)
					}
				}
			}
			// Nothing to compare with: nothing applies.
			root(canaryPlain, canarySecret+"-1", "")
			code, m := run(true)
			refused("no last applied inputs", code, m, "last applied inputs")
			// The first apply, kept as the last applied inputs.
			if code, m := run(false); code != 0 || m.Outcome != OutcomeApplied {
				t.Fatalf("first apply: exit %d, %+v", code, m)
			}
			keep()
			// The token alone rotates: applied, and only the node changes.
			root(canaryPlain, canarySecret+"-2", "")
			if code, m := run(true); code != 0 || m.Outcome != OutcomeApplied || m.Guarded.Update != 1 || m.Guarded.Total() != 1 {
				t.Fatalf("a rotated token: exit %d, %+v", code, m)
			}
			keep()
			// Another variable changes with it: nothing applies.
			root(canaryPlain+"-bigger", canarySecret+"-3", "")
			code, m = run(true)
			refused("the size changes too", code, m, "size")
			// The root module changes: nothing applies.
			root(canaryPlain, canarySecret+"-3", `,"label":"x"`)
			code, m = run(true)
			refused("the root changes", code, m, "root module")
			// The last applied files do not describe the state (edited to
			// claim another size, as the new inputs do): the plan of them
			// changes the node, and nothing applies.
			root(canaryPlain+"-forged", canarySecret+"-2", "")
			keep()
			root(canaryPlain+"-forged", canarySecret+"-3", "")
			code, m = run(true)
			refused("applied files that do not describe the state", code, m, "terraform_data.node")
			// Nothing of the refused runs was applied: the applied inputs
			// of the rotation plan no change.
			root(canaryPlain, canarySecret+"-2", "")
			if code, m := run(false); code != 0 || m.Guarded.Total() != 0 {
				t.Fatalf("after the refusals, the rotated inputs: exit %d, %+v; want no change", code, m)
			}
		})
	}
}

// TestReviewedDeletes: an approved ExportsChange apply may delete or
// replace the addresses its plan's summary lists, and as many others as
// the summary counted without listing them (it lists up to 50), no more.
func TestReviewedDeletes(t *testing.T) {
	for _, c := range []struct {
		reason    string
		listed    []string
		destroy   int
		addresses []string
		refused   string
	}{
		{"all listed", []string{"a", "b"}, 2, []string{"a", "b"}, ""},
		{"fewer than reviewed", []string{"a", "b"}, 2, []string{"b"}, ""},
		{"one not listed, none unlisted", []string{"a"}, 1, []string{"a", "c"}, "did not: c;"},
		{"one not listed, one unlisted", []string{"a"}, 2, []string{"a", "c"}, ""},
		{"two not listed, one unlisted", []string{"a"}, 2, []string{"c", "d"}, "did not: c, d;"},
	} {
		j := &Job{ReviewedDeletes: c.listed, ReviewedDestroy: c.destroy}
		err := j.reviewed(c.addresses)
		switch {
		case c.refused == "" && err != nil:
			t.Errorf("%s: %v, want allowed", c.reason, err)
		case c.refused != "" && (!errors.Is(err, ErrDestructive) || !strings.Contains(fmt.Sprint(err), c.refused)):
			t.Errorf("%s: %v, want ErrDestructive naming %q", c.reason, err, c.refused)
		}
	}
}
