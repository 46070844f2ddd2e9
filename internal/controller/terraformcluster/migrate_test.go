package terraformcluster

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/render"
	"github.com/captf/captf/internal/testenv"
	"github.com/captf/captf/internal/testnode"
	"github.com/captf/captf/internal/tfexec"
	"github.com/captf/captf/internal/tfstate"
	"github.com/captf/captf/internal/tftest"
)

// moduleImageTofu is the test module with tofu as its runtime.
const moduleImageTofu = "example.test/module-tofu:1"

// stateFacts are what tells one state from another: its lineage, and the
// id of the module's terraform_data.node, which a create would change.
type stateFacts struct {
	Lineage string
	Node    string
}

func readFacts(t *testing.T, chunk []byte) stateFacts {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(chunk))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Lineage   string
		Resources []struct {
			Module, Type, Name string
			Instances          []struct {
				Attributes struct{ ID string }
			}
		}
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	f := stateFacts{Lineage: st.Lineage}
	for _, r := range st.Resources {
		if r.Module == "module.main" && r.Type == "terraform_data" && r.Name == "node" && len(r.Instances) == 1 {
			f.Node = r.Instances[0].Attributes.ID
		}
	}
	return f
}

// TestOldStateSuffixMigrated: an object named prod-1 that tofu applied
// before names ending in -<digits> got a new state suffix has its state
// in tfstate-default-captf-tfc-prod-1. The manager finds it there, moves
// it to the current suffix and deletes the old Secret and its lock; the
// next plan, with tofu, creates, changes and destroys nothing, and once
// approved the state is the same one (lineage, resource id). Read as no
// state, the object would have run an ungated first apply creating
// everything a second time.
func TestOldStateSuffixMigrated(t *testing.T) {
	tofu := tftest.Tofu(t)
	module, _ := filepath.Abs("../../runner/testdata/module")
	h := startEnv(t, testenv.Start(t, "../../.."), nil, func(n *testnode.Node) {
		dir := t.TempDir()
		if err := os.Symlink(tofu.Path, filepath.Join(dir, tofu.Name)); err != nil {
			t.Fatal(err)
		}
		n.Images[moduleImageTofu] = []testnode.Image{{Path: infrav1.PathModule, Dir: module}, {Path: infrav1.PathRuntime, Dir: dir}}
	})
	ctx := context.Background()
	const name, old = "prod-1", "captf-tfc-prod-1"
	if engine.StateSuffix("tfc", name) == old {
		t.Fatalf("%s keeps its suffix: nothing to move", name)
	}

	// The state an older release left, applied by tofu with the root it
	// rendered then.
	root, err := render.Render(bytes.Repeat([]byte{7}, 32), render.Request{StateSuffix: old, Namespace: "default", Image: moduleImageTofu,
		Variables: map[string]render.Variable{"size": {Value: json.RawMessage(`"small"`)}, "token": {Value: json.RawMessage(`"` + canary + `"`), Sensitive: true}}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for file, data := range map[string][]byte{"main.tf.json": root.MainTF, "terraform.tfvars.json": root.Vars} {
		if err := os.WriteFile(filepath.Join(dir, file), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(module, filepath.Join(dir, "module")); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	run := &tfexec.Terraform{Bin: tofu.Path, Dir: dir, Stdout: &out, Stderr: &out, Env: append(tftest.Env(t), "KUBE_CONFIG_PATH="+h.env.Kubeconfig(t))}
	if err = run.Init(ctx); err == nil {
		err = run.ApplyAuto(ctx)
	}
	if err != nil {
		t.Fatalf("tofu apply under the old suffix: %v\n%s", err, out.String())
	}
	var planted corev1.Secret
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: tfstate.SecretName(old)}, &planted); err != nil {
		t.Fatal(err)
	}
	before := readFacts(t, planted.Data[tfstate.DataKey])
	if before.Node == "" {
		t.Fatal("the planted state has no terraform_data.node")
	}

	// Found, the state makes the object's first run a plan that waits for
	// approval (it is not a first apply), and the plan creates nothing:
	// the root differs from the planted one only in the outputs the
	// runner adds and captf's own.
	tc := h.create(name, infrav1.ApplyManual, "small", func(tc *infrav1.TerraformCluster) { tc.Spec.Image = moduleImageTofu })
	h.wait(tc, "a plan waiting, or an apply", func(tc *infrav1.TerraformCluster) bool {
		c := condition(tc, infrav1.ConditionApplyJobSucceeded)
		return c != nil && (c.Reason == infrav1.ReasonPlanAwaitingApproval || c.Reason == engine.ReasonApplied)
	})
	if tc.Status.Plan == nil {
		after := h.storedChunks(tc)
		t.Fatalf("the object applied without a plan, as a first apply (state now %+v, tofu's was %+v): the state under the old suffix was read as no state", readFacts(t, after[0]), before)
	}
	p := tc.Status.Plan
	if p.Add != 0 || p.Change != 0 || p.Destroy != 0 {
		t.Errorf("the plan after the move: %d to add, %d to change, %d to destroy; want only output changes", p.Add, p.Change, p.Destroy)
	}
	h.approve(tc, p.PlanHash)
	h.wait(tc, "the approved plan applied", func(tc *infrav1.TerraformCluster) bool {
		return ready(tc) && tc.Status.Plan == nil && tc.Status.LastRun != nil && tc.Status.LastRun.Operation == infrav1.OperationApply && tc.Status.LastRun.Succeeded
	})

	var moved corev1.Secret
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: engine.StateSecretName("tfc", name)}, &moved); err != nil {
		t.Fatal(err)
	}
	if after := readFacts(t, moved.Data[tfstate.DataKey]); after != before {
		t.Errorf("the state after the apply is %+v, want the one tofu made under the old suffix, %+v: the object started from an empty state", after, before)
	}
	if got := moved.Annotations[infrav1.AnnotationStateMigratedFrom]; got != old {
		t.Errorf("the moved state's %s is %q, want %q", infrav1.AnnotationStateMigratedFrom, got, old)
	}
	if got := moved.Labels[tfstate.LabelSuffix]; got != engine.StateSuffix("tfc", name) {
		t.Errorf("the moved state is labelled %s=%q", tfstate.LabelSuffix, got)
	}
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: tfstate.SecretName(old)}, &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Errorf("the old state Secret is still there: %v", err)
	}
	if err := h.c.Get(ctx, client.ObjectKey{Namespace: "default", Name: tfstate.LeaseName(old)}, &coordinationv1.Lease{}); !apierrors.IsNotFound(err) {
		t.Errorf("the old state's lock Lease is still there: %v", err)
	}
	ops := map[infrav1.Operation]int{}
	for _, j := range h.jobs(tc) {
		ops[infrav1.Operation(j.Labels[engine.LabelOperation])]++
	}
	if ops[infrav1.OperationPlan] != 1 || ops[infrav1.OperationApply] != 1 {
		t.Errorf("Jobs by operation %v, want the plan and its approved apply", ops)
	}
	if n := count(h.events(tc), infrav1.EventStateMigrated); n != 1 {
		t.Errorf("%d %s events, want 1", n, infrav1.EventStateMigrated)
	}
}
