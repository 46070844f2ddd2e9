// Package testenv starts a real etcd and kube-apiserver for tests, through
// controller-runtime's envtest, with captf's CRDs installed. The binaries
// come from $KUBEBUILDER_ASSETS or from the cache that hack/install-envtest.sh
// fills (make test runs it). A missing binary fails the test: nothing skips.
// Run starts the same control plane for a program (the sandbox,
// internal/sandbox) and returns a stop function instead of using a test's
// cleanup.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/captf/captf/internal/tftest"
)

// Versions hack/install-envtest.sh builds by default.
const (
	KubeVersion = "v1.36.3"
	EtcdVersion = "v3.6.8"
)

// Assets returns the folder holding kube-apiserver and etcd, or fails.
func Assets(t testing.TB) string {
	t.Helper()
	dir, err := FindAssets()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// FindAssets returns the folder holding kube-apiserver and etcd:
// $KUBEBUILDER_ASSETS, else the cache hack/install-envtest.sh fills. The
// error says how to install them.
func FindAssets() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		dir = filepath.Join(tftest.CacheDir(), "envtest", "kube-"+KubeVersion+"-etcd-"+EtcdVersion+"-"+runtime.Version()+"-"+runtime.GOOS+"-"+runtime.GOARCH)
	}
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			return "", fmt.Errorf("%s not found in %s: run hack/install-envtest.sh (make test does): %w", bin, dir, err)
		}
	}
	return dir, nil
}

// Env is a running control plane.
type Env struct {
	Config *rest.Config
	Client client.Client
	// Webhook says where the API server calls the webhooks that
	// StartWithWebhooks installed: the test serves them on
	// LocalServingHost:LocalServingPort with the certificate in
	// LocalServingCertDir. Nil when Start installed none.
	Webhook *envtest.WebhookInstallOptions
	env     *envtest.Environment
}

// ConfigAs returns a rest.Config that acts as user with groups, by
// impersonation, e.g. for a manager that must run as its ServiceAccount.
func (e *Env) ConfigAs(user string, groups ...string) *rest.Config {
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	return cfg
}

// ClientAs returns a client that acts as user with groups, by
// impersonation: the API server authorizes each request as that user (give
// the user RBAC) and tells admission webhooks that user's name.
func (e *Env) ClientAs(t testing.TB, user string, groups ...string) client.Client {
	t.Helper()
	c, err := client.New(e.ConfigAs(user, groups...), client.Options{Scheme: e.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// UserKubeconfig writes a kubeconfig for user with groups, who
// authenticates with a client certificate of their own (no impersonation,
// no administrator rights: give the user RBAC), and returns its path.
func (e *Env) UserKubeconfig(t testing.TB, user string, groups ...string) string {
	t.Helper()
	b, err := e.KubeconfigOf(user, groups...)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// KubeconfigOf is a kubeconfig for user with groups, who authenticates
// with a client certificate of their own, as UserKubeconfig writes it.
func (e *Env) KubeconfigOf(user string, groups ...string) ([]byte, error) {
	u, err := e.env.AddUser(envtest.User{Name: user, Groups: groups}, nil)
	if err != nil {
		return nil, fmt.Errorf("add user %s: %w", user, err)
	}
	return u.KubeConfig()
}

// Kubeconfig writes a kubeconfig for an administrator of the control plane
// and returns its path.
func (e *Env) Kubeconfig(t testing.TB) string {
	t.Helper()
	return e.UserKubeconfig(t, "captf-test-admin", "system:masters")
}

// Start starts etcd and kube-apiserver with the CRDs of config/crd/bases
// (root is the repository root, relative to the test) and stops them when
// the test ends.
func Start(t testing.TB, root string) *Env {
	t.Helper()
	return start(t, root, false)
}

// StartWithClusterAPI is Start that also installs Cluster API's own CRDs
// (Cluster, ClusterClass, …) from $CAPTF_CAPI_CRDS, which
// hack/install-capi-crds.sh prints (make test sets it), and those of the
// folders more.
func StartWithClusterAPI(t testing.TB, root string, more ...string) *Env {
	t.Helper()
	return start(t, root, false, append([]string{ClusterAPICRDs(t)}, more...)...)
}

// ClusterAPICRDs is the folder of Cluster API's CRDs, or fails the test.
func ClusterAPICRDs(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("CAPTF_CAPI_CRDS")
	if dir == "" {
		t.Fatal("CAPTF_CAPI_CRDS is not set: run hack/install-capi-crds.sh (make test does)")
	}
	return dir
}

// StartWithWebhooks is Start that also installs the webhook configurations
// of config/webhook, pointed at a port of this process (see Env.Webhook).
// Until the test serves them, every request they match is refused: their
// failure policy is Fail.
func StartWithWebhooks(t testing.TB, root string) *Env {
	t.Helper()
	return start(t, root, true)
}

// StartWithClusterAPIAndWebhooks is StartWithWebhooks on an API server that
// also serves Cluster API's CRDs, as StartWithClusterAPI installs them.
func StartWithClusterAPIAndWebhooks(t testing.TB, root string, more ...string) *Env {
	t.Helper()
	return start(t, root, true, append([]string{ClusterAPICRDs(t)}, more...)...)
}

func start(t testing.TB, root string, webhooks bool, crds ...string) *Env {
	t.Helper()
	e, stop, err := Run(Options{Root: root, Webhooks: webhooks, CRDs: crds})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("stop the API server: %v", err)
		}
	})
	return e
}

// Options say what Run starts.
type Options struct {
	// Root is the repository root: the CRDs of config/crd/bases are
	// installed, and with Webhooks the configurations of config/webhook.
	Root string
	// CRDs are more folders of CRDs to install.
	CRDs []string
	// Webhooks installs config/webhook, pointed at a port of this machine
	// (see Env.Webhook), as StartWithWebhooks does.
	Webhooks bool
}

// Run starts etcd and kube-apiserver as Start does, for a program rather
// than a test: stop stops them and removes what they wrote. On error
// nothing is left running.
func Run(opts Options) (e *Env, stop func() error, err error) {
	assets, err := FindAssets()
	if err != nil {
		return nil, nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     append([]string{filepath.Join(opts.Root, "config", "crd", "bases")}, opts.CRDs...),
		ErrorIfCRDPathMissing: true,
	}
	if opts.Webhooks {
		env.WebhookInstallOptions = envtest.WebhookInstallOptions{
			Paths: []string{filepath.Join(opts.Root, "config", "webhook")},
		}
	}
	cfg, err := env.Start()
	if err != nil {
		// envtest stops what it started only when asked.
		_ = env.Stop()
		return nil, nil, fmt.Errorf("start the API server: %w", err)
	}
	scheme, err := runtimeScheme()
	if err == nil {
		var c client.Client
		if c, err = client.New(cfg, client.Options{Scheme: scheme}); err == nil {
			e = &Env{Config: cfg, Client: c, env: env}
		}
	}
	if err != nil {
		_ = env.Stop()
		return nil, nil, err
	}
	if opts.Webhooks {
		e.Webhook = &env.WebhookInstallOptions
	}
	return e, env.Stop, nil
}

// ServeWebhooks runs a controller-runtime manager in this process whose
// webhook server listens where StartWithWebhooks pointed the API server;
// register adds the webhooks to it. It returns once the server accepts
// connections; stop (also called when the test ends) stops the manager and
// waits for it.
func (e *Env) ServeWebhooks(t testing.TB, register func(ctrl.Manager) error) (stop func()) {
	t.Helper()
	if e.Webhook == nil {
		t.Fatal("ServeWebhooks needs StartWithWebhooks")
	}
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{
		Scheme:  e.Client.Scheme(),
		Metrics: metricsserver.Options{BindAddress: "0"},
		WebhookServer: webhook.NewServer(webhook.Options{
			Host:    e.Webhook.LocalServingHost,
			Port:    e.Webhook.LocalServingPort,
			CertDir: e.Webhook.LocalServingCertDir,
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := register(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("webhook manager: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	started := mgr.GetWebhookServer().StartedChecker()
	for deadline := time.Now().Add(30 * time.Second); started(&http.Request{}) != nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the webhook server did not start")
		}
	}
	return stop
}

// CreateFromFile creates every object of a multi-document YAML file, as
// kubectl create -f does, as the administrator.
func (e *Env) CreateFromFile(t testing.TB, path string) {
	t.Helper()
	for _, u := range Objects(t, path) {
		if err := e.Client.Create(context.Background(), u); err != nil {
			t.Fatalf("%s: create %s %s: %v", path, u.GetKind(), u.GetName(), err)
		}
	}
}

// Objects are the objects of a YAML (several documents) or JSON file.
func Objects(t testing.TB, path string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := ReadObjects(path)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// ReadObjects reads the objects of a YAML (several documents) or JSON
// file, as Objects does.
func ReadObjects(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// StartWithKubeadm is StartWithClusterAPI that also installs the CRDs of
// Cluster API's kubeadm control plane and bootstrap providers (the module
// holds them beside its own), labelled for the v1beta2 contract as those
// providers' releases label them, so that Cluster API's ClusterClass
// reconciler finds their templates current.
func StartWithKubeadm(t testing.TB, root string) *Env {
	t.Helper()
	module := filepath.Join(ClusterAPICRDs(t), "..", "..", "..", "..")
	e := StartWithClusterAPI(t, root,
		filepath.Join(module, "controlplane", "kubeadm", "config", "crd", "bases"),
		filepath.Join(module, "bootstrap", "kubeadm", "config", "crd", "bases"))
	for _, name := range []string{
		"kubeadmcontrolplanes.controlplane.cluster.x-k8s.io",
		"kubeadmcontrolplanetemplates.controlplane.cluster.x-k8s.io",
		"kubeadmconfigs.bootstrap.cluster.x-k8s.io",
		"kubeadmconfigtemplates.bootstrap.cluster.x-k8s.io",
	} {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := e.Client.Get(context.Background(), client.ObjectKey{Name: name}, &crd); err != nil {
			t.Fatal(err)
		}
		crd.Labels = map[string]string{"cluster.x-k8s.io/v1beta2": "v1beta2"}
		if err := e.Client.Update(context.Background(), &crd); err != nil {
			t.Fatal(err)
		}
	}
	return e
}
