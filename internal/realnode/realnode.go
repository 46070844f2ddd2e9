// Package realnode brings up a real one-node Kubernetes cluster for a
// test process: etcd and kube-apiserver (hack/install-envtest.sh),
// kube-controller-manager, kube-scheduler and kubelet
// (hack/install-kubenode.sh), and containerd with runc from Debian's
// packages. Pods are real containers, pulled from a registry served by the
// process on 127.0.0.1 (go-containerregistry's pkg/registry), to which the
// test pushes the images the project's own image code builds.
//
// The node needs root on Linux with cgroups: Start checks that, and every
// binary and host tool, first, and a missing part fails the test with its
// cause; nothing skips. Certificates are made for each run. The node has
// no pod network: every pod shares the host's network (a
// MutatingAdmissionPolicy, HostNetworkPolicy, sets it), the API server
// listens on 127.0.0.1, and pods reach it there through
// KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT.
//
// The kubelet's cgroups (kubepods) are the host's: one node runs on a
// machine at a time, which a lock file holds; a second Start waits for
// the first node to go. Stop (a test's cleanup) ends every process by its
// PID, the containers and their shims, unmounts what is under the node's
// folder, removes the kubepods cgroups and the folder.
//
// The recipe and its knobs are in ../shared/design/TESTING.md ("A real
// node").
package realnode

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/captf/captf/internal/image"
	"github.com/captf/captf/internal/testenv"
)

// NodeName is the name the kubelet registers.
const NodeName = "captf-realnode"

// Options say what Run starts.
type Options struct {
	// Root is the repository root: the pause image is built from it, and
	// the CRDs of config/crd/bases are installed.
	Root string
	// CRDs are more folders of CRDs to install.
	CRDs []string
	// Logf receives what the node reports while it comes up and goes.
	Logf func(format string, args ...any)
}

// Node is a running one-node cluster.
type Node struct {
	// Config is an administrator's (system:masters) client configuration.
	Config *rest.Config
	Client client.Client
	// Clientset is Config's typed client (logs, discovery).
	Clientset kubernetes.Interface
	// Kubeconfig is the path of an administrator's kubeconfig.
	Kubeconfig string
	// Registry is the host:port of the registry the node pulls from, on
	// 127.0.0.1, over plain HTTP.
	Registry string
	// PauseImage is the sandbox image, in Registry.
	PauseImage string
	// APIPort is the API server's port on 127.0.0.1.
	APIPort int
	// Dir holds every file of the node; the logs of its processes are in
	// Dir/logs.
	Dir string

	assets assets
	pki    *pki
	ports  ports
	procs  []*proc
	regSrv *http.Server
	lock   *os.File
	logf   func(format string, args ...any)
}

type ports struct{ etcd, etcdPeer, api, kubelet int }

// proc is one process the node started.
type proc struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
}

const containerdSocket = "containerd.sock"

func (n *Node) path(elem ...string) string { return filepath.Join(append([]string{n.Dir}, elem...)...) }

// Start brings up a node for the test and tears it down when the test ends.
func Start(t testing.TB, opts Options) *Node {
	t.Helper()
	if opts.Logf == nil {
		opts.Logf = t.Logf
	}
	n, stop, err := Run(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range n.procs {
				t.Logf("realnode: the end of %s's log:\n%s", p.name, n.logTail(p.name, 4000))
			}
		}
		if err := stop(); err != nil {
			t.Errorf("tear the node down: %v", err)
		}
	})
	return n
}

// Run brings up a node, for a program or a test: stop tears it down and
// removes what it made. On error nothing is left running.
func Run(opts Options) (n *Node, stop func() error, err error) {
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	a, err := Preflight()
	if err != nil {
		return nil, nil, err
	}
	n = &Node{assets: a, logf: opts.Logf}
	if n.lock, err = lockHost(n.logf); err != nil {
		return nil, nil, err
	}
	stop = func() error { return n.stop() }
	// Holding the lock, no other node of this machine runs: kubepods
	// cgroups are what an earlier node left when its process was killed.
	if len(cgroupDirs()) > 0 {
		n.logf("realnode: removing the kubepods cgroups an earlier node left")
		if err := errors.Join(killCgroupProcs(), removeCgroups()); err != nil {
			n.lock.Close()
			return nil, nil, fmt.Errorf("realnode: the kubepods cgroups of an earlier node: %w", err)
		}
	}
	defer func() {
		if err != nil {
			if serr := n.stop(); serr != nil {
				err = fmt.Errorf("%w (and the teardown: %v)", err, serr)
			}
			n, stop = nil, nil
		}
	}()
	// Under /tmp, short: containerd's socket path must fit in 108 bytes.
	if n.Dir, err = os.MkdirTemp("", "captf-node-"); err != nil {
		return n, stop, err
	}
	if err = os.MkdirAll(n.path("logs"), 0o755); err != nil {
		return n, stop, err
	}
	start := time.Now()
	if err = n.up(opts); err != nil {
		return n, stop, fmt.Errorf("real node: %w (its logs: %s)", err, n.path("logs"))
	}
	n.logf("realnode: up in %s (folder %s)", time.Since(start).Round(100*time.Millisecond), n.Dir)
	return n, stop, nil
}

func (n *Node) up(opts Options) error {
	ctx := context.Background()
	var err error
	for _, p := range []*int{&n.ports.etcd, &n.ports.etcdPeer, &n.ports.api, &n.ports.kubelet} {
		if *p, err = freePort(); err != nil {
			return err
		}
	}
	n.APIPort = n.ports.api
	if n.pki, err = newPKI(n.path("pki"), NodeName); err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	if err := n.serveRegistry(); err != nil {
		return err
	}
	if err := n.pushPause(ctx, opts.Root); err != nil {
		return err
	}

	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", n.ports.etcd)
	if err := n.start("etcd", filepath.Join(n.assets.envtest, "etcd"),
		"--data-dir="+n.path("etcd"), "--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", n.ports.etcdPeer),
		fmt.Sprintf("--initial-advertise-peer-urls=http://127.0.0.1:%d", n.ports.etcdPeer),
		fmt.Sprintf("--initial-cluster=default=http://127.0.0.1:%d", n.ports.etcdPeer),
		"--unsafe-no-fsync=true", "--quota-backend-bytes=4294967296"); err != nil {
		return err
	}
	p := n.pki.path
	if err := n.start("kube-apiserver", filepath.Join(n.assets.envtest, "kube-apiserver"),
		"--etcd-servers="+etcdURL, "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", n.ports.api),
		"--tls-cert-file="+p(servingCert), "--tls-private-key-file="+p(servingKey), "--client-ca-file="+p(caFile),
		"--service-account-key-file="+p(serviceAcctPub), "--service-account-signing-key-file="+p(serviceAcctKey),
		"--service-account-issuer=https://kubernetes.default.svc", "--api-audiences=https://kubernetes.default.svc",
		"--service-cluster-ip-range=10.96.0.0/24", "--authorization-mode=Node,RBAC",
		"--kubelet-client-certificate="+p(adminCert), "--kubelet-client-key="+p(adminKey),
		"--kubelet-certificate-authority="+p(caFile), "--kubelet-preferred-address-types=InternalIP,Hostname",
		"--allow-privileged=true", "--endpoint-reconciler-type=none"); err != nil {
		return err
	}
	url := fmt.Sprintf("https://127.0.0.1:%d", n.ports.api)
	n.Kubeconfig = n.path("admin.kubeconfig")
	if err := os.WriteFile(n.Kubeconfig, n.pki.kubeconfig(url, adminCert, adminKey), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(n.path("kubelet.kubeconfig"), n.pki.kubeconfig(url, kubeletCert, kubeletKey), 0o600); err != nil {
		return err
	}
	if n.Config, err = clientcmd.BuildConfigFromFlags("", n.Kubeconfig); err != nil {
		return err
	}
	n.Config.QPS, n.Config.Burst = 100, 200
	if n.Clientset, err = kubernetes.NewForConfig(n.Config); err != nil {
		return err
	}
	if err := n.waitFor(ctx, "the API server ready", time.Minute, func() bool {
		body, err := n.Clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok"
	}); err != nil {
		return err
	}
	scheme, err := testenv.Scheme()
	if err != nil {
		return err
	}
	if n.Client, err = client.New(n.Config, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	// Before the first pod: every pod shares the host's network.
	policy, binding := hostNetworkPolicy(n.ports.api)
	if err := n.Client.Create(ctx, policy); err != nil {
		return fmt.Errorf("host network policy: %w", err)
	}
	if err := n.Client.Create(ctx, binding); err != nil {
		return fmt.Errorf("host network policy binding: %w", err)
	}

	if err := n.start("kube-controller-manager", filepath.Join(n.assets.node, "kube-controller-manager"),
		"--kubeconfig="+n.Kubeconfig, "--authentication-kubeconfig="+n.Kubeconfig, "--authorization-kubeconfig="+n.Kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port=0", "--leader-elect=false",
		"--service-account-private-key-file="+p(serviceAcctKey), "--root-ca-file="+p(caFile),
		"--use-service-account-credentials=false", "--controllers=*,-nodeipam,-service-lb-controller,-cloud-node-lifecycle"); err != nil {
		return err
	}
	if err := n.start("kube-scheduler", filepath.Join(n.assets.node, "kube-scheduler"),
		"--kubeconfig="+n.Kubeconfig, "--authentication-kubeconfig="+n.Kubeconfig, "--authorization-kubeconfig="+n.Kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port=0", "--leader-elect=false"); err != nil {
		return err
	}

	if err := n.writeCNI(); err != nil {
		return fmt.Errorf("CNI: %w", err)
	}
	if err := os.WriteFile(n.path("containerd.toml"), []byte(n.containerdConfig()), 0o644); err != nil {
		return err
	}
	if err := n.start("containerd", filepath.Join(n.assets.node, "containerd"), "--config="+n.path("containerd.toml")); err != nil {
		return err
	}
	if err := n.waitFor(ctx, "containerd's socket", 30*time.Second, func() bool {
		c, err := net.Dial("unix", n.path(containerdSocket))
		if err == nil {
			c.Close()
		}
		return err == nil
	}); err != nil {
		return err
	}
	if err := os.WriteFile(n.path("kubelet.yaml"), []byte(n.kubeletConfig()), 0o644); err != nil {
		return err
	}
	if err := n.start("kubelet", filepath.Join(n.assets.node, "kubelet"),
		"--config="+n.path("kubelet.yaml"), "--kubeconfig="+n.path("kubelet.kubeconfig"),
		"--hostname-override="+NodeName, "--root-dir="+n.path("kubelet"), "--cert-dir="+n.path("kubelet", "pki"), "--v=1"); err != nil {
		return err
	}
	// The kubelet refuses --node-ip=127.0.0.1: on a host with no other
	// address it registers none. One set once in the status stays, and
	// the API server reaches the kubelet there for logs and exec.
	var node corev1.Node
	if err := n.waitFor(ctx, "the Node registered", time.Minute, func() bool {
		return n.Client.Get(ctx, client.ObjectKey{Name: NodeName}, &node) == nil
	}); err != nil {
		return err
	}
	if err := n.waitFor(ctx, "the Node's address", 30*time.Second, func() bool {
		if n.Client.Get(ctx, client.ObjectKey{Name: NodeName}, &node) != nil {
			return false
		}
		for _, a := range node.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				return true
			}
		}
		before := node.DeepCopy()
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeHostName, Address: NodeName}}
		return n.Client.Status().Patch(ctx, &node, client.MergeFrom(before)) == nil
	}); err != nil {
		return err
	}
	if err := n.waitFor(ctx, "the Node Ready", 2*time.Minute, func() bool {
		if n.Client.Get(ctx, client.ObjectKey{Name: NodeName}, &node) != nil {
			return false
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue
			}
		}
		return false
	}); err != nil {
		return err
	}
	if err := n.waitFor(ctx, "the default ServiceAccount", time.Minute, func() bool {
		var sa corev1.ServiceAccount
		return n.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "default"}, &sa) == nil
	}); err != nil {
		return err
	}
	crds := opts.CRDs
	if opts.Root != "" {
		crds = append([]string{filepath.Join(opts.Root, "config", "crd", "bases")}, crds...)
	}
	if len(crds) > 0 {
		if _, err := envtest.InstallCRDs(n.Config, envtest.CRDInstallOptions{Paths: crds, ErrorIfPathMissing: true}); err != nil {
			return fmt.Errorf("install CRDs: %w", err)
		}
	}
	return nil
}

// serveRegistry serves an in-memory registry on 127.0.0.1.
func (n *Node) serveRegistry() error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	n.Registry = l.Addr().String()
	n.regSrv = &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0))), ReadHeaderTimeout: time.Minute}
	go func() { _ = n.regSrv.Serve(l) }()
	return nil
}

// pushPause builds the sandbox image (cmd pause of this package) with the
// image code of the release and pushes it to the node's registry.
func (n *Node) pushPause(ctx context.Context, root string) error {
	if root == "" {
		return errors.New("realnode: Options.Root is needed to build the pause image")
	}
	idx, err := image.Program{Package: "./internal/realnode/pause", Path: "/pause"}.Index(ctx, image.Options{
		Module: root, Version: "realnode", Platforms: []v1.Platform{HostPlatform}, Created: time.Unix(0, 0).UTC(), Work: n.path("pause"),
	})
	if err != nil {
		return fmt.Errorf("pause image: %w", err)
	}
	n.PauseImage = n.Registry + "/captf-realnode/pause:1"
	if _, err := image.Push(ctx, n.PauseImage, idx); err != nil {
		return fmt.Errorf("pause image: %w", err)
	}
	return nil
}

// HostPlatform is the platform of the node's images.
var HostPlatform = v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}

// Push pushes idx to the node's registry as repo:tag and returns the
// reference a pod names ("127.0.0.1:<port>/<repo>:<tag>") and the pushed
// index's digest.
func (n *Node) Push(ctx context.Context, repoTag string, idx v1.ImageIndex) (string, v1.Hash, error) {
	ref := n.Registry + "/" + repoTag
	d, err := image.Push(ctx, ref, idx)
	return ref, d, err
}

// start starts a process of the node, its output in Dir/logs/<name>.log.
// A process that ends before Stop is reported through Logf.
func (n *Node) start(name, bin string, args ...string) error {
	out, err := os.Create(n.path("logs", name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Dir = n.Dir
	// containerd finds its shim and runc on PATH; the node's own folder
	// comes first.
	cmd.Env = append(os.Environ(), "PATH="+n.assets.node+":"+os.Getenv("PATH"))
	// Its own process group: a signal to the test's group does not reach
	// it, and Stop ends it alone, by PID.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		out.Close()
		close(p.exited)
	}()
	n.procs = append(n.procs, p)
	return nil
}

// waitFor polls ok until it holds, failing after timeout or when a
// process of the node ended (with the end of its log).
func (n *Node) waitFor(ctx context.Context, what string, timeout time.Duration, ok func() bool) error {
	deadline := time.Now().Add(timeout)
	for !ok() {
		for _, p := range n.procs {
			select {
			case <-p.exited:
				return fmt.Errorf("waiting for %s: %s exited (%v):\n%s", what, p.name, p.cmd.ProcessState, n.logTail(p.name, 3000))
			default:
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %s", what, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

// logTail is the end of a process's log.
func (n *Node) logTail(name string, max int) string {
	b, _ := os.ReadFile(n.path("logs", name+".log"))
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}

// Log is what the node's process name (kubelet, containerd, …) wrote.
func (n *Node) Log(name string) string { return n.logTail(name, 1<<30) }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ForgetImage removes the reference ref (a tag) from the node's image
// store, as on a node that never pulled it: a container that names ref
// next pulls it from the registry, while the image's content stays under
// its other references (its digest). The kubelet pulls a tag that is not
// :latest only when the node does not have it.
func (n *Node) ForgetImage(ctx context.Context, ref string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(n.assets.node, "ctr"), "--address", n.path(containerdSocket), "--namespace", "k8s.io", "images", "rm", ref)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("forget image %s: %w: %s", ref, err, out)
	}
	return nil
}

// WriteKubeconfig writes to path a kubeconfig for user with groups, who
// authenticates with a client certificate of their own (give the user
// RBAC, or the group system:masters). It is valid while the node runs.
func (n *Node) WriteKubeconfig(path, user string, groups ...string) error {
	base := strings.NewReplacer(":", "-", "/", "-").Replace(user)
	cert, key := "user-"+base+".crt", "user-"+base+".key"
	if err := n.pki.issue(cert, key, pkix.Name{CommonName: user, Organization: groups}, nil, nil, x509.ExtKeyUsageClientAuth); err != nil {
		return err
	}
	return os.WriteFile(path, n.pki.kubeconfig(fmt.Sprintf("https://127.0.0.1:%d", n.APIPort), cert, key), 0o600)
}
