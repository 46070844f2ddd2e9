// Package sandbox runs captf's Kubernetes flow on one machine, with no
// cluster: a real etcd and kube-apiserver with captf's CRDs, Cluster API's
// CRDs and the TerraformPlan webhook, the manager binary (cmd/manager)
// serving that webhook, and a node for the runner Jobs. Start applies
// examples/kubernetes; Stop ends every process and removes every file it
// made.
//
// The node is one of two. With Config.RealNode, a real one-node cluster
// (internal/realnode: kubelet, containerd, runc, as root on Linux) runs
// the Jobs as pods, from the runner image and a module image built by the
// release's image code and pushed to a registry of the sandbox's own.
// Otherwise the stand-in (internal/testnode) runs the Jobs' containers as
// local processes: the real captf-runner and terraform, the example's
// module folder standing in for its image; no image is pulled and no
// container isolates a process.
//
// What it is not: a Deployment (the manager runs as a local process with
// a certificate of its own), or a place for anything that matters: the
// API server's data lives in a temporary folder and is gone at Stop.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/realnode"
	"github.com/captf/captf/internal/testenv"
	"github.com/captf/captf/internal/testnode"
)

const (
	// Namespace is where the example's objects live and the node runs
	// Jobs.
	Namespace = "default"
	// Admin is the username of the kubeconfig Start writes: an
	// administrator, and who approves plans with it.
	Admin = "sandbox-admin"
	// ManagerUsername is who the manager's requests are, as a Deployment's
	// ServiceAccount would be: the webhook lets only it move plan phases.
	ManagerUsername = "system:serviceaccount:captf-system:captf-manager"
	// RunnerImage is the runner image the manager names in its Jobs; the
	// node maps it to the captf-runner Start builds.
	RunnerImage = "captf-sandbox.local/captf-runner:dev"
	// NodeName is the Node the node registers, whose logs
	// kubectl captf logs reads.
	NodeName = "sandbox-node"
	// Example is the folder of the example Start applies, under the
	// repository root.
	Example = "examples/kubernetes"
)

// Config says where the sandbox's parts are.
type Config struct {
	// Root is the repository root: config/crd/bases, config/webhook,
	// cmd/manager, cmd/captf-runner and examples/kubernetes.
	Root string
	// Terraform is the terraform (or tofu) binary the example's module
	// image holds.
	Terraform string
	// ClusterAPICRDs is the folder of Cluster API's CRDs
	// (hack/install-capi-crds.sh prints it): the example holds a Cluster.
	ClusterAPICRDs string
	// Log receives what the node reports (a container that failed, with
	// the end of its log); nil discards it.
	Log io.Writer
	// RealNode runs the Jobs as pods of a real node (internal/realnode),
	// which needs root, Linux and hack/install-kubenode.sh's binaries;
	// else the stand-in runs them as processes.
	RealNode bool
}

// Sandbox is a running sandbox.
type Sandbox struct {
	// Dir is the sandbox's own folder (kubeconfig, binaries, logs, the
	// pods' folders), removed by Stop.
	Dir string
	// Kubeconfig is the path of an administrator's kubeconfig (user
	// Admin): for kubectl and kubectl captf.
	Kubeconfig string
	// ManagerLog is the path of the manager's log.
	ManagerLog string
	// Bin is a folder holding kubectl-captf, for PATH: kubectl finds the
	// plugin there.
	Bin string
	// Objects are what Start applied from the example.
	Objects []*unstructured.Unstructured
	// Node says which node runs the Jobs.
	Node string

	// stops undo Start's steps, last first.
	stops []func() error
	once  sync.Once
	err   error
}

// Start starts the sandbox and applies the example. It returns once the
// manager is ready and the example's objects exist; the first apply then
// runs in a Job. On error (ctx cancelled too) it stops what it started.
func Start(ctx context.Context, cfg Config) (*Sandbox, error) {
	if err := check(cfg); err != nil {
		return nil, err
	}
	if cfg.RealNode {
		if _, err := realnode.Preflight(); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", "captf-sandbox-")
	if err != nil {
		return nil, err
	}
	s := &Sandbox{Dir: dir, Kubeconfig: filepath.Join(dir, "kubeconfig"), ManagerLog: filepath.Join(dir, "manager.log"), Bin: filepath.Join(dir, "bin")}
	s.stops = append(s.stops, func() error { return os.RemoveAll(dir) })
	if err := s.start(ctx, cfg); err != nil {
		if stopErr := s.Stop(); stopErr != nil {
			return nil, errors.Join(err, fmt.Errorf("stop: %w", stopErr))
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	return s, nil
}

// check says, before anything starts, which part is missing and how to
// install it.
func check(cfg Config) error {
	var errs []error
	for _, p := range []struct{ path, what string }{
		{filepath.Join(cfg.Root, "config", "crd", "bases"), "captf's CRDs (is the root the repository's?)"},
		{filepath.Join(cfg.Root, Example, "cluster.yaml"), "the example"},
		{cfg.ClusterAPICRDs, "Cluster API's CRDs (run hack/install-capi-crds.sh; make sandbox does)"},
		{cfg.Terraform, "terraform (run hack/install-terraform.sh; make sandbox does)"},
	} {
		if p.path == "" {
			errs = append(errs, fmt.Errorf("%s: no path given", p.what))
		} else if _, err := os.Stat(p.path); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.what, err))
		}
	}
	if _, err := testenv.FindAssets(); err != nil {
		errs = append(errs, err)
	}
	if _, err := exec.LookPath("go"); err != nil {
		errs = append(errs, fmt.Errorf("go, to build the manager and the runner: %w", err))
	}
	return errors.Join(errs...)
}

func (s *Sandbox) start(ctx context.Context, cfg Config) error {
	logf := func(format string, args ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, "sandbox: "+format+"\n", args...)
		}
	}
	if cfg.RealNode {
		s.Node = NodeReal
		return s.startReal(ctx, cfg, logf)
	}
	s.Node = NodeStandIn
	manager := filepath.Join(s.Dir, "manager", "manager")
	runnerDir := filepath.Join(s.Dir, "runner")
	runner := filepath.Join(runnerDir, filepath.Base(engine.RunnerImagePath))
	plugin := filepath.Join(s.Bin, "kubectl-captf")
	bins := map[string]string{manager: "./cmd/manager", runner: "./cmd/captf-runner", plugin: "./cmd/kubectl-captf"}
	if err := build(ctx, cfg.Root, bins); err != nil {
		return err
	}

	env, stopEnv, err := testenv.Run(testenv.Options{Root: cfg.Root, CRDs: []string{cfg.ClusterAPICRDs}, Webhooks: true})
	if err != nil {
		return err
	}
	s.stops = append(s.stops, stopEnv)
	if err := s.writeKubeconfig(env, s.Kubeconfig, Admin, "system:masters"); err != nil {
		return err
	}
	managerKubeconfig := filepath.Join(s.Dir, "manager.kubeconfig")
	if err := s.writeKubeconfig(env, managerKubeconfig, ManagerUsername, "system:masters"); err != nil {
		return err
	}

	objs, err := testenv.ReadObjects(filepath.Join(cfg.Root, Example, "cluster.yaml"))
	if err != nil {
		return err
	}
	images, err := s.images(cfg, objs, runnerDir)
	if err != nil {
		return err
	}
	tfrc := filepath.Join(s.Dir, "terraform.rc")
	if err := os.WriteFile(tfrc, []byte("disable_checkpoint = true\n"), 0o600); err != nil {
		return err
	}
	node := &testnode.Node{Client: env.Client, Namespace: Namespace, Images: images,
		// The manager tells runner Jobs to reach the API server from
		// inside a pod; the node's processes reach it through a
		// kubeconfig.
		Env: []string{
			"TF_CLI_CONFIG_FILE=" + tfrc, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1", "TF_INPUT=0",
			"KUBE_IN_CLUSTER_CONFIG=false", "KUBE_CONFIG_PATH=" + s.Kubeconfig,
		},
	}
	stopLogs, err := node.RunLogs(NodeName)
	if err != nil {
		return err
	}
	s.stops = append(s.stops, func() error { stopLogs(); return nil })
	pods := filepath.Join(s.Dir, "pods")
	if err := os.Mkdir(pods, 0o700); err != nil {
		return err
	}
	stopNode := node.Run(pods, logf, logf)
	s.stops = append(s.stops, func() error { stopNode(); return nil })

	stopManager, err := s.startManager(ctx, manager, managerKubeconfig, RunnerImage, env.Webhook)
	if stopManager != nil {
		s.stops = append(s.stops, stopManager)
	}
	if err != nil {
		return err
	}

	for _, u := range objs {
		if err := env.Client.Create(ctx, u); err != nil {
			return fmt.Errorf("%s: create %s %s: %w", Example, u.GetKind(), u.GetName(), err)
		}
	}
	s.Objects = objs
	return nil
}

// build runs go build in root for each binary path and its package, at
// once.
func build(ctx context.Context, root string, bins map[string]string) error {
	errs := make(chan error, len(bins))
	for bin, pkg := range bins {
		go func() {
			cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				errs <- fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
				return
			}
			errs <- nil
		}()
	}
	var all []error
	for range bins {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

func (s *Sandbox) writeKubeconfig(env *testenv.Env, path, user string, groups ...string) error {
	b, err := env.KubeconfigOf(user, groups...)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// images maps the image of each TerraformCluster of the example to the
// example's module folder and a runtime folder holding terraform, as the
// example's Dockerfile lays them out, and the runner image to the built
// captf-runner.
func (s *Sandbox) images(cfg Config, objs []*unstructured.Unstructured, runnerDir string) (map[string][]testnode.Image, error) {
	module, err := filepath.Abs(filepath.Join(cfg.Root, Example, "module"))
	if err != nil {
		return nil, err
	}
	runtimeDir := filepath.Join(s.Dir, "runtime")
	if err := os.Mkdir(runtimeDir, 0o755); err != nil {
		return nil, err
	}
	// The Dockerfile's name for it; tofu is found under its own name.
	name := "terraform"
	if strings.HasPrefix(filepath.Base(cfg.Terraform), "tofu") {
		name = "tofu"
	}
	terraform, err := filepath.Abs(cfg.Terraform)
	if err != nil {
		return nil, err
	}
	if err := os.Symlink(terraform, filepath.Join(runtimeDir, name)); err != nil {
		return nil, err
	}
	images := map[string][]testnode.Image{
		RunnerImage: {{Path: filepath.Dir(engine.RunnerImagePath), Dir: runnerDir}},
	}
	for _, u := range objs {
		if u.GetKind() != "TerraformCluster" {
			continue
		}
		image, _, _ := unstructured.NestedString(u.Object, "spec", "image")
		if image == "" {
			return nil, fmt.Errorf("%s: TerraformCluster %s names no image", Example, u.GetName())
		}
		images[image] = []testnode.Image{{Path: infrav1.PathModule, Dir: module}, {Path: infrav1.PathRuntime, Dir: runtimeDir}}
	}
	return images, nil
}

// startManager runs the manager binary as config/default's Deployment
// does, with the webhook where the API server calls it, and returns once
// it is ready. stop sends it SIGINT and waits for it (SIGKILL after 30
// seconds).
func (s *Sandbox) startManager(ctx context.Context, bin, kubeconfig, runnerImage string, webhook *envtest.WebhookInstallOptions) (stop func() error, err error) {
	probes, err := freePort()
	if err != nil {
		return nil, err
	}
	log, err := os.Create(s.ManagerLog)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin,
		"--runner-image="+runnerImage,
		"--metrics-bind-address=0",
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probes),
		"--enable-webhooks", "--manager-username="+ManagerUsername,
		fmt.Sprintf("--webhook-port=%d", webhook.LocalServingPort),
		"--webhook-cert-dir="+webhook.LocalServingCertDir,
		// A failed run is retried soon: the sandbox is for trying
		// things.
		"--retry-base=5s",
	)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group: a Ctrl-C at the terminal reaches the
	// sandbox, which stops the manager before the API server.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start the manager: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		log.Close()
		close(exited)
	}()
	stop = func() error {
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			return errors.New("the manager did not stop within 30 seconds of SIGINT: killed")
		}
		return nil
	}
	ready := fmt.Sprintf("http://127.0.0.1:%d/readyz", probes)
	for deadline := time.Now().Add(2 * time.Minute); ; {
		if resp, err := http.Get(ready); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return stop, nil
			}
		}
		select {
		case <-exited:
			return stop, fmt.Errorf("the manager exited (%s); its log:\n%s", cmd.ProcessState, tail(s.ManagerLog))
		case <-ctx.Done():
			return stop, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return stop, fmt.Errorf("the manager was not ready within 2 minutes; its log:\n%s", tail(s.ManagerLog))
		}
	}
}

// Stop stops the manager, the node and its processes, the API server and
// etcd, in that order, and removes every file the sandbox made. It is
// safe to call more than once.
func (s *Sandbox) Stop() error {
	s.once.Do(func() {
		var errs []error
		for i := len(s.stops) - 1; i >= 0; i-- {
			if err := s.stops[i](); err != nil {
				errs = append(errs, err)
			}
		}
		s.err = errors.Join(errs...)
	})
	return s.err
}

// Guide is what to do next with the sandbox, for a person at a terminal:
// the commands of docs/quickstart-kubernetes.md, steps 3 and 4.
func (s *Sandbox) Guide() string {
	name := "demo"
	for _, u := range s.Objects {
		if u.GetKind() == "TerraformCluster" {
			name = u.GetName()
		}
	}
	return fmt.Sprintf(`captf sandbox: a real kube-apiserver and etcd with captf's CRDs and webhook,
the manager (its log: %[1]s) and %[7]s.
%[2]s is applied:
TerraformCluster %[3]q under applyPolicy Manual, whose first apply runs now.

In another terminal, with any kubectl (docs/quickstart-kubernetes.md says how to get one):

  export KUBECONFIG=%[4]s
  export PATH=%[5]s:$PATH   # kubectl-captf, the plugin
  kubectl wait terraformcluster/%[3]s --for=condition=Ready --timeout=5m
  kubectl patch terraformcluster %[3]s --type=json -p '[{"op":"replace","path":"/spec/variables/1/value","value":3}]'
  kubectl captf plans --pending              # the plan of that change waits for you
  kubectl captf logs PLAN                    # terraform's own rendering of it
  kubectl captf show PLAN                    # what its hash binds
  kubectl captf approve PLAN --plan-hash HASH
  kubectl get terraformplans -w

Ctrl-C here stops all of it and removes what it made (%[6]s).
`, s.ManagerLog, Example+"/cluster.yaml", name, s.Kubeconfig, s.Bin, s.Dir, s.Node)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail is the end of the file at path, for an error message.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(b)
}
