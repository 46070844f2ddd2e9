package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/kubectlcaptf"
	"github.com/captf/captf/internal/sandbox"
	"github.com/captf/captf/internal/testenv"
	"github.com/captf/captf/internal/tftest"
)

// TestSandbox runs the sandbox binary as make sandbox does, on each node,
// follows the commands it prints through one approval (kubectl captf's own
// code), stops it with the SIGINT of a Ctrl-C, and finds nothing of it
// left: no file in its temporary folder, no process. Its TMPDIR is a
// folder of the test's own, so whatever it or envtest makes there is seen.
func TestSandbox(t *testing.T) {
	t.Run("stand-in", func(t *testing.T) { testSandbox(t, "stand-in", sandbox.NodeStandIn) })
	// As root with hack/install-kubenode.sh's binaries, as make test runs.
	t.Run("real node", func(t *testing.T) { testSandbox(t, "real", sandbox.NodeReal) })
}

func testSandbox(t *testing.T, node, says string) {
	// The test's own clients log nothing worth reading.
	ctrllog.SetLogger(logr.Discard())
	assets := testenv.Assets(t)
	capi := testenv.ClusterAPICRDs(t)
	tf := tftest.Terraform(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "captf-sandbox")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build captf-sandbox: %v\n%s", err, out)
	}

	stderr, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	tmp := t.TempDir()
	cmd := exec.Command(bin, "--root", root, "--terraform", tf.Path, "--capi-crds", capi, "--node", node)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "KUBEBUILDER_ASSETS="+assets)
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// exited is closed once the sandbox exited, with waitErr set.
	exited := make(chan struct{})
	var waitErr error
	// guide is what the sandbox printed up to the line that names
	// Ctrl-C, its last.
	guide := make(chan string, 1)
	go func() {
		// Read all of stdout before Wait closes it.
		var printed strings.Builder
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			printed.WriteString(sc.Text() + "\n")
			if strings.HasPrefix(sc.Text(), "Ctrl-C") {
				guide <- printed.String()
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		waitErr = cmd.Wait()
		close(exited)
	}()
	// A test that failed half-way still stops the sandbox as Ctrl-C
	// does, so that it leaves nothing running.
	stopped := false
	t.Cleanup(func() {
		if stopped {
			return
		}
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(2 * time.Minute):
			_ = cmd.Process.Kill()
			<-exited
		}
	})

	var printed string
	select {
	case printed = <-guide:
	case <-exited:
		t.Fatalf("the sandbox exited before it printed what to do (%v):\n%s", waitErr, logOf(t, stderr))
	// A real node waits for another test's node to go (one a machine).
	case <-time.After(15 * time.Minute):
		t.Fatalf("the sandbox printed no guide within 15 minutes:\n%s", logOf(t, stderr))
	}
	first, _, _ := strings.Cut(printed, "\n")
	path, ok := strings.CutPrefix(first, "KUBECONFIG=")
	if !ok || !strings.HasPrefix(path, tmp+string(filepath.Separator)) {
		t.Fatalf("the first line printed is %q, want KUBECONFIG= and a file under the sandbox's TMPDIR %s", first, tmp)
	}
	for _, want := range []string{says, "kubectl captf plans --pending", "kubectl captf logs ", "kubectl captf approve "} {
		if !strings.Contains(printed, want) {
			t.Errorf("the sandbox does not print %q:\n%s", want, printed)
		}
	}

	c := clientFor(t, path)
	ctx := context.Background()
	tc := &infrav1.TerraformCluster{}
	key := client.ObjectKey{Namespace: sandbox.Namespace, Name: "demo"}
	wait(t, stderr, "the example's first apply", func() bool {
		return c.Get(ctx, key, tc) == nil && tc.Status.Initialization != nil &&
			tc.Status.Initialization.Provisioned != nil && *tc.Status.Initialization.Provisioned
	})

	// The quickstart's change: a third worker, which waits for approval.
	patch := `[{"op":"replace","path":"/spec/variables/1/value","value":3}]`
	if err := c.Patch(ctx, tc, client.RawPatch("application/json-patch+json", []byte(patch))); err != nil {
		t.Fatal(err)
	}
	var plan infrav1.TerraformPlan
	wait(t, stderr, "a plan that waits for approval", func() bool {
		var plans infrav1.TerraformPlanList
		if c.List(ctx, &plans, client.InNamespace(sandbox.Namespace), client.MatchingLabels{infrav1.LabelPlanPhase: string(infrav1.PlanPending)}) != nil || len(plans.Items) != 1 {
			return false
		}
		plan = plans.Items[0]
		return true
	})
	if out := plugin(t, path, "plans", "--pending"); !strings.Contains(out, plan.Name) {
		t.Errorf("kubectl captf plans --pending does not list %s:\n%s", plan.Name, out)
	}
	plugin(t, path, "approve", plan.Name, "--plan-hash", plan.Spec.PlanHash)
	wait(t, stderr, "the approved plan applied", func() bool {
		return c.Get(ctx, client.ObjectKeyFromObject(&plan), &plan) == nil && plan.Status.Phase == infrav1.PlanApplied
	})
	if plan.Spec.ApprovedBy != sandbox.Admin {
		t.Errorf("approved by %q, want %q: the webhook let another name through", plan.Spec.ApprovedBy, sandbox.Admin)
	}

	// Ctrl-C.
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		stopped = true
		if waitErr != nil {
			t.Errorf("the sandbox exited with %v after SIGINT:\n%s", waitErr, logOf(t, stderr))
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("the sandbox did not stop within 2 minutes of SIGINT:\n%s", logOf(t, stderr))
	}
	entries, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("left in the sandbox's TMPDIR: %s", e.Name())
	}
	for _, p := range processesUnder(t, tmp) {
		t.Errorf("still running after the sandbox stopped: %d: %s", p.pid, p.args)
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
}

// clientFor is a client of the kubeconfig at path.
func clientFor(t *testing.T, path string) client.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := infrav1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// plugin runs kubectl captf with args against kubeconfig, in this process.
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

// wait polls ok for up to three minutes: the Jobs run real terraform on a
// busy machine.
func wait(t *testing.T, stderr *os.File, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Minute); !ok(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; the sandbox's stderr:\n%s", what, logOf(t, stderr))
		}
	}
}

// logOf is what the sandbox wrote to its stderr so far.
func logOf(t *testing.T, f *os.File) string {
	t.Helper()
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

type process struct {
	pid  int
	args string
}

// processesUnder lists the processes whose command line or working
// folder names a path under dir.
func processesUnder(t *testing.T, dir string) []process {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	var found []process
	for _, p := range procs {
		cmdline, err := os.ReadFile(filepath.Join(p, "cmdline"))
		if err != nil {
			continue // ended meanwhile
		}
		args := strings.ReplaceAll(strings.TrimRight(string(cmdline), "\x00"), "\x00", " ")
		cwd, _ := os.Readlink(filepath.Join(p, "cwd"))
		if strings.Contains(args, dir) || strings.HasPrefix(cwd, dir) {
			pid, _ := strconv.Atoi(filepath.Base(p))
			found = append(found, process{pid, args})
		}
	}
	return found
}
