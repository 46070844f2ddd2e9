// Package chaos proves the manager keeps its promises under the faults a
// real cluster produces (issue 9, section 3): a fault matrix over the
// manager's flows, each run against the real kube-apiserver and etcd, the
// real cmd/manager binary with its TerraformPlan webhook, and the test
// node running the real captf-runner and terraform.
//
// Faults: internal/faultproxy sits between the manager and the API server
// and fails the k-th write of a kind (409, 500, a timeout, a dropped
// connection, or the write lands and the answer is then an error or a
// dropped connection); the manager is SIGKILLed right after a write landed
// and restarted; a TCP gate in front of the manager's webhook server makes
// the webhook unreachable for the API server and then reachable again.
//
// Each flow runs once clean to enumerate its writes (the fault points: the
// k-th write of each verb and resource), then once per fault point and
// fault kind, each run in a namespace of its own. The invariants
// (invariants_test.go) are checked after every run; the figures are
// printed at the end. make test runs a deterministic subset (one flow,
// every write, the fault kind rotating); CAPTF_CHAOS=full (make chaos)
// runs every flow, every write and every fault kind.
package chaos

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/faultproxy"
	"github.com/captf/captf/internal/managertest"
	"github.com/captf/captf/internal/testenv"
	"github.com/captf/captf/internal/testnode"
	"github.com/captf/captf/internal/tftest"
)

const (
	moduleImage = "example.test/module:1"
	// driftImage holds the controller tests' drift module: captftest files
	// under the provider's root, in a directory named by the variable dir,
	// that the flows edit behind terraform's back, replace and delete.
	driftImage = "example.test/drift:1"
	// rootedImage holds the controller tests' provider-root module: its
	// provider's root, where its one file goes, is the variable root, as a
	// region or an account would say where a cloud's resources are; a
	// change of it replaces a resource, which the guard stops.
	rootedImage = "example.test/provider-root:1"
	runnerImage = "example.test/captf-runner:dev"
	// managerUser is who the manager's requests are, through the proxy.
	managerUser = "system:serviceaccount:captf-system:captf-manager"
	// approverUser approves TerraformPlans (spec.approvedBy).
	approverUser = "captf-chaos-approver"
	// canary is the sensitive variable's value; no output of this test
	// prints a value, and this one is never compared.
	canary = "CANARY-CHAOS-SECRET-51"
)

// fixture is what every run shares: one API server, one proxy, one
// manager process (restarted after a kill), the webhook gate, the runner.
type fixture struct {
	env      *testenv.Env
	proxy    *faultproxy.Proxy
	gate     *faultproxy.Gate
	mgr      *managertest.Manager
	approver client.Client
	watcher  client.WithWatch
	images   map[string][]testnode.Image
	nodeEnv  []string
	runs     int
	// files is the captftest provider's root: a run's files are under
	// files/<namespace>. Empty when no flow of the test needs the
	// provider.
	files string
}

// newFixture starts what every run shares; withProvider installs the
// captftest provider for the flows of the drift, provider-root and
// machine modules; withClusterAPI serves Cluster API's CRDs, so that the
// manager reconciles TerraformMachines too.
func newFixture(t *testing.T, withProvider, withClusterAPI bool) *fixture {
	t.Helper()
	// The test's own clients log nothing worth reading.
	ctrllog.SetLogger(logr.Discard())
	start := testenv.StartWithWebhooks
	if withClusterAPI {
		start = func(t testing.TB, root string) *testenv.Env { return testenv.StartWithClusterAPIAndWebhooks(t, root) }
	}
	env := start(t, "../..")
	f := &fixture{env: env, approver: env.ClientAs(t, approverUser, "system:masters")}
	watcher, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	f.watcher = watcher

	// The manager reaches the API server only through the proxy, as its
	// ServiceAccount (the webhook lets only that user move plan phases).
	f.proxy = faultproxy.Start(t, env.ConfigAs(managerUser, "system:masters"))
	f.proxy.Hold = 5 * time.Second

	// The API server calls the webhook where envtest pointed it; the gate
	// listens there and forwards to the manager's webhook server.
	webhookPort := managertest.FreePort(t)
	f.gate = faultproxy.StartGate(t, net.JoinHostPort(env.Webhook.LocalServingHost, strconv.Itoa(env.Webhook.LocalServingPort)),
		net.JoinHostPort("127.0.0.1", strconv.Itoa(webhookPort)))

	f.mgr = managertest.Start(t, managertest.Build(t, "../.."), f.proxy.Kubeconfig(t),
		"--runner-image="+runnerImage, "--metrics-bind-address=0",
		"--enable-webhooks", "--manager-username="+managerUser,
		fmt.Sprintf("--webhook-port=%d", webhookPort),
		"--webhook-cert-dir="+env.Webhook.LocalServingCertDir,
		"--retry-base=1s", "--recheck-interval=1m", "--kube-api-qps=-1")

	tf := tftest.Terraform(t)
	runnerDir := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", filepath.Join(runnerDir, "captf-runner"), "../../cmd/captf-runner").CombinedOutput(); err != nil {
		t.Fatalf("build captf-runner: %v\n%s", err, out)
	}
	runtimeDir := t.TempDir()
	if err := os.Symlink(tf.Path, filepath.Join(runtimeDir, "terraform")); err != nil {
		t.Fatal(err)
	}
	module, err := filepath.Abs("../../internal/runner/testdata/module")
	if err != nil {
		t.Fatal(err)
	}
	f.images = map[string][]testnode.Image{
		moduleImage: {{Path: infrav1.PathModule, Dir: module}, {Path: infrav1.PathRuntime, Dir: runtimeDir}},
		runnerImage: {{Path: filepath.Dir(engine.RunnerImagePath), Dir: runnerDir}},
	}
	// The manager's Jobs ask for the in-cluster config, which a local
	// process has not: terraform's kubernetes backend reaches the API
	// server directly (not through the proxy: the faults are the
	// manager's).
	f.nodeEnv = []string{"KUBE_CONFIG_PATH=" + env.Kubeconfig(t), "KUBE_IN_CLUSTER_CONFIG=false"}
	if !withProvider {
		f.nodeEnv = append(f.nodeEnv, tftest.Env(t)...)
		return f
	}
	// The provider's CLI config installs captftest from its mirror only;
	// the runner's module needs no provider of a registry either.
	p := tftest.Provider(t)
	f.files = t.TempDir()
	f.nodeEnv = append(append(f.nodeEnv, p.Env...), tftest.ProviderRootEnv+"="+f.files)
	drift, err := filepath.Abs("../../internal/controller/terraformcluster/testdata/drift")
	if err != nil {
		t.Fatal(err)
	}
	f.images[driftImage] = []testnode.Image{{Path: infrav1.PathModule, Dir: drift}, {Path: infrav1.PathRuntime, Dir: runtimeDir}}
	rooted, err := filepath.Abs("../../internal/controller/terraformcluster/testdata/provider-root")
	if err != nil {
		t.Fatal(err)
	}
	f.images[rootedImage] = []testnode.Image{{Path: infrav1.PathModule, Dir: rooted}, {Path: infrav1.PathRuntime, Dir: runtimeDir}}
	// The controller tests' machine and pool modules, and their cluster
	// module that publishes exports to its machines and pools.
	for image, dir := range map[string]string{machineImage: "machine", exportsImage: "exports", poolImage: "pool"} {
		abs, err := filepath.Abs(filepath.Join("../../internal/controller/terraformcluster/testdata", dir))
		if err != nil {
			t.Fatal(err)
		}
		f.images[image] = []testnode.Image{{Path: infrav1.PathModule, Dir: abs}, {Path: infrav1.PathRuntime, Dir: runtimeDir}}
	}
	return f
}

// namespace creates a namespace for one run, with the Secret the
// object's sensitive variable reads, and starts a node for it that stops
// when t ends.
func (f *fixture) namespace(t *testing.T) (string, *testnode.Node) {
	t.Helper()
	f.runs++
	ns := fmt.Sprintf("chaos-%03d", f.runs)
	ctx := context.Background()
	if err := f.env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "token", Namespace: ns}, Data: map[string][]byte{"token": []byte(canary)}}
	if err := f.env.Client.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	node := &testnode.Node{Client: f.env.Client, Namespace: ns, Images: f.images, Env: f.nodeEnv}
	node.Start(shortTemp{t})
	return ns, node
}

// shortTemp gives the test node a root of a short path. Under t.TempDir,
// named after a run's long test name, a pod's TMPDIR is so deep that the
// Unix socket terraform's provider plugins listen on there passes the
// 108 bytes a socket path may have: the plugin exits without a word and
// every run of the drift module fails ("Failed to read any lines from
// plugin's stdout").
type shortTemp struct{ testing.TB }

func (s shortTemp) TempDir() string {
	dir, err := os.MkdirTemp("", "chaos-node-")
	if err != nil {
		s.Fatal(err)
	}
	s.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
