// Package quickstart walks docs/quickstart-kubernetes.md on a real API
// server with Cluster API's CRDs: the manager binary as its Deployment runs
// it, the runner Jobs played by the test node (which also serves their
// logs, as a kubelet does), and kubectl captf run in this process. What no
// machine here has is named in the doc: a kubelet pulling images from a
// registry, and a cloud. TestCLIQuickstart runs every command of
// docs/quickstart.md, the command line's quick start, with the real
// terraform.
package quickstart

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/kubectlcaptf"
	"github.com/captf/captf/internal/managertest"
	"github.com/captf/captf/internal/testenv"
	"github.com/captf/captf/internal/testnode"
	"github.com/captf/captf/internal/tftest"
)

const (
	doc          = "../../docs/quickstart-kubernetes.md"
	moduleImage  = "registry.example.com/captf-quickstart:v1"
	machineImage = "registry.example.com/captf-quickstart-machine:v1"
	poolImage    = "registry.example.com/captf-quickstart-pool:v1"
	runnerImage  = "ghcr.io/captf/captf-runner:v0.1.0"
	// token is the value of the example's Secret: terraform hides it in
	// the Job's log (the variable is sensitive), captf everywhere.
	token = "not-a-real-token-4f1c"
	// scaleUp is the doc's change: two workers become three.
	scaleUp = `kubectl patch terraformcluster demo --type=json -p '[{"op":"replace","path":"/spec/variables/1/value","value":3}]'`
)

// plugin runs kubectl captf with args against kubeconfig.
func plugin(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	cmd := kubectlcaptf.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	cmd.SetArgs(append(args, "--kubeconfig", kubeconfig))
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("kubectl captf %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// documented fails the test unless the doc shows command as written.
func documented(t *testing.T, text, command string) {
	t.Helper()
	if !strings.Contains(text, command) {
		t.Errorf("the quickstart does not show %q", command)
	}
}

func TestQuickstart(t *testing.T) {
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	env := testenv.StartWithClusterAPI(t, "../..")
	ctx := context.Background()
	kubeconfig := env.Kubeconfig(t)

	tf := tftest.Terraform(t)
	runtimeDir, runnerDir := t.TempDir(), t.TempDir()
	if err := os.Symlink(tf.Path, filepath.Join(runtimeDir, "terraform")); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("go", "build", "-o", filepath.Join(runnerDir, "captf-runner"), "../../cmd/captf-runner").CombinedOutput(); err != nil {
		t.Fatalf("build captf-runner: %v\n%s", err, out)
	}
	module, _ := filepath.Abs("../../examples/kubernetes/module")
	machine, _ := filepath.Abs("../../examples/kubernetes/machine")
	pool, _ := filepath.Abs("../../examples/kubernetes/pool")
	node := &testnode.Node{Client: env.Client, Namespace: "default",
		Images: map[string][]testnode.Image{
			moduleImage:  {{Path: infrav1.PathModule, Dir: module}, {Path: infrav1.PathRuntime, Dir: runtimeDir}},
			machineImage: {{Path: infrav1.PathModule, Dir: machine}, {Path: infrav1.PathRuntime, Dir: runtimeDir}},
			poolImage:    {{Path: infrav1.PathModule, Dir: pool}, {Path: infrav1.PathRuntime, Dir: runtimeDir}},
			runnerImage:  {{Path: "/captf-runner", Dir: runnerDir}},
		},
		// The manager tells runner Jobs to reach the API server from inside
		// a pod; the test node's processes reach it through a kubeconfig.
		Env: append(tftest.Env(t), "KUBE_IN_CLUSTER_CONFIG=false", "KUBE_CONFIG_PATH="+kubeconfig),
	}
	node.ServeLogs(t, "node-1")
	node.Start(t)
	managertest.Start(t, managertest.Build(t, "../.."), kubeconfig, "--runner-image="+runnerImage, "--metrics-bind-address=0")
	// clusterctl init installs Cluster API's controllers beside captf.
	env.RunClusterAPI(t)

	documented(t, text, "kubectl apply -f examples/kubernetes/cluster.yaml")
	env.CreateFromFile(t, "../../examples/kubernetes/cluster.yaml")
	tc := &infrav1.TerraformCluster{}
	key := client.ObjectKey{Namespace: "default", Name: "demo"}
	wait(t, "the first apply", func() bool {
		return env.Client.Get(ctx, key, tc) == nil && tc.Status.Initialization != nil &&
			tc.Status.Initialization.Provisioned != nil && *tc.Status.Initialization.Provisioned
	})
	if tc.Spec.ControlPlaneEndpoint != (infrav1.APIEndpoint{Host: "api.demo.example.com", Port: 6443}) || len(tc.Status.FailureDomains) != 2 {
		t.Errorf("the contract's fields after the first apply: %+v, %+v", tc.Spec.ControlPlaneEndpoint, tc.Status.FailureDomains)
	}

	documented(t, text, scaleUp)
	patch := strings.TrimSuffix(strings.SplitN(scaleUp, "-p '", 2)[1], "'")
	if err := env.Client.Patch(ctx, tc, client.RawPatch("application/json-patch+json", []byte(patch))); err != nil {
		t.Fatal(err)
	}
	var plan infrav1.TerraformPlan
	wait(t, "a plan that waits for approval", func() bool {
		var plans infrav1.TerraformPlanList
		if env.Client.List(ctx, &plans, client.InNamespace("default"), client.MatchingLabels{infrav1.LabelPlanPhase: string(infrav1.PlanPending)}) != nil || len(plans.Items) != 1 {
			return false
		}
		plan = plans.Items[0]
		return true
	})

	documented(t, text, "kubectl captf plans --pending")
	if out := plugin(t, kubeconfig, "plans", "--pending"); !strings.Contains(out, plan.Name) || !strings.Contains(out, "+1 ~0 -/+0 -0") {
		t.Errorf("kubectl captf plans --pending:\n%s", out)
	}
	pluginPageShows(t, kubeconfig, plan.Name)
	documented(t, text, "kubectl captf logs ")
	log := plugin(t, kubeconfig, "logs", plan.Name)
	for _, want := range []string{`terraform_data.worker[2] will be created`, "Plan: 1 to add, 0 to change, 0 to destroy.", "(sensitive value)"} {
		if !strings.Contains(log, want) {
			t.Errorf("the plan Job's log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log, token) {
		t.Errorf("the plan Job's log shows the sensitive token")
	}

	documented(t, text, "kubectl captf approve ")
	approved := strings.TrimSpace(plugin(t, kubeconfig, "approve", plan.Name, "--plan-hash", plan.Spec.PlanHash))
	for _, line := range []string{approved, strings.Join(consoleOutput(t, "kubectl captf approve"), "\n")} {
		if !approvedLine.MatchString(line) {
			t.Errorf("approve printed, or docs/kubectl-captf.md shows, %q: not the shape %s", line, approvedLine)
		}
	}
	wait(t, "the approved plan applied", func() bool {
		return env.Client.Get(ctx, client.ObjectKeyFromObject(&plan), &plan) == nil && plan.Status.Phase == infrav1.PlanApplied
	})
	if err := env.Client.Get(ctx, key, tc); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(tc.Status.Conditions, "Ready"); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Ready after the approved apply: %+v", c)
	}

	// Step 5: a machine, with Cluster API's own Machine controller.
	documented(t, text, "captf lint examples/kubernetes/machine --role machine")
	documented(t, text, "--build-arg MODULE=machine examples/kubernetes")
	documented(t, text, "kubectl apply -f examples/kubernetes/machine.yaml")
	env.CreateFromFile(t, "../../examples/kubernetes/machine.yaml")
	var m clusterv1.Machine
	wait(t, "the Machine's infrastructure provisioned", func() bool {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "demo-node-0"}, &m) == nil &&
			ptr.Deref(m.Status.Initialization.InfrastructureProvisioned, false) && m.Spec.ProviderID != ""
	})
	if !strings.HasPrefix(m.Spec.ProviderID, "example:///demo-node-0/") || len(m.Status.Addresses) != 2 || m.Status.FailureDomain != "demo-a" {
		t.Errorf("the Machine after its infrastructure: providerID %q, addresses %+v, failure domain %q", m.Spec.ProviderID, m.Status.Addresses, m.Status.FailureDomain)
	}
	var tm infrav1.TerraformMachine
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "demo-node-0"}, &tm); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(tm.Status.Conditions, "Ready"); c == nil || c.Status != metav1.ConditionTrue || tm.Spec.ProviderID != m.Spec.ProviderID {
		t.Errorf("the TerraformMachine: Ready %+v, providerID %q", c, tm.Spec.ProviderID)
	}

	// Step 6: machines from a MachineDeployment, and a MachinePool.
	documented(t, text, "kubectl apply -f examples/kubernetes/machinedeployment.yaml")
	env.CreateFromFile(t, "../../examples/kubernetes/machinedeployment.yaml")
	wait(t, "the MachineDeployment's two machines provisioned", func() bool {
		var machines clusterv1.MachineList
		if env.Client.List(ctx, &machines, client.InNamespace("default"), client.MatchingLabels{clusterv1.MachineDeploymentNameLabel: "demo-md-0"}) != nil || len(machines.Items) != 2 {
			return false
		}
		for _, m := range machines.Items {
			if !ptr.Deref(m.Status.Initialization.InfrastructureProvisioned, false) || !strings.HasPrefix(m.Spec.ProviderID, "example:///"+m.Name+"/") {
				return false
			}
		}
		return true
	})

	documented(t, text, "captf lint examples/kubernetes/pool --role pool")
	documented(t, text, "--build-arg MODULE=pool examples/kubernetes")
	documented(t, text, "kubectl apply -f examples/kubernetes/pool.yaml")
	env.CreateFromFile(t, "../../examples/kubernetes/pool.yaml")
	var tmp infrav1.TerraformMachinePool
	wait(t, "the pool provisioned with its two members", func() bool {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "demo-pool-0"}, &tmp) == nil &&
			tmp.Status.Ready && len(tmp.Spec.ProviderIDList) == 2 && tmp.Status.Replicas == 2
	})
	for _, id := range tmp.Spec.ProviderIDList {
		if !strings.HasPrefix(id, "example:///demo-pool-0/") {
			t.Errorf("a member's provider ID %q", id)
		}
	}
}

// wait polls ok for up to three minutes: the quickstart's Jobs run real
// terraform on a busy machine.
func wait(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Minute); !ok(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
