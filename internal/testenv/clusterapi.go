package testenv

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	capicluster "sigs.k8s.io/cluster-api/core/reconcilers/cluster"
	capimachine "sigs.k8s.io/cluster-api/core/reconcilers/machine"
	capimachinedeployment "sigs.k8s.io/cluster-api/core/reconcilers/machinedeployment"
	capimachinepool "sigs.k8s.io/cluster-api/core/reconcilers/machinepool"
	capimachineset "sigs.k8s.io/cluster-api/core/reconcilers/machineset"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// RunClusterAPI runs Cluster API's own Cluster, Machine, MachinePool, MachineSet and
// MachineDeployment controllers (and the cluster cache they need, which connects to a
// workload cluster only where a test made its kubeconfig Secret, as
// WorkloadKubeconfig does) against the API server until the test ends.
// The API server must serve Cluster API's CRDs (StartWithClusterAPI).
func (e *Env) RunClusterAPI(t testing.TB) {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, clusterv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	mgr, err := ctrl.NewManager(e.Config, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctrl.LoggerInto(context.Background(), ctrl.Log))
	// Controller names are unique per process unless told otherwise: a
	// test process may run Cluster API more than once.
	skip := true
	cache, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient: mgr.GetClient(), Client: clustercache.ClientOptions{UserAgent: "captf-test"},
	}, controller.Options{SkipNameValidation: &skip})
	if err != nil {
		t.Fatal(err)
	}
	c := &capicluster.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: cache, RemoteConnectionGracePeriod: time.Minute}
	if err := c.SetupWithManager(ctx, mgr, controller.Options{SkipNameValidation: &skip}); err != nil {
		t.Fatal(err)
	}
	m := &capimachine.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: cache, RemoteConditionsGracePeriod: 2 * time.Minute}
	if err := m.SetupWithManager(ctx, mgr, controller.Options{SkipNameValidation: &skip}); err != nil {
		t.Fatal(err)
	}
	mp := &capimachinepool.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: cache}
	if err := mp.SetupWithManager(ctx, mgr, controller.Options{SkipNameValidation: &skip}); err != nil {
		t.Fatal(err)
	}
	ms := &capimachineset.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: cache}
	if err := ms.SetupWithManager(ctx, mgr, controller.Options{SkipNameValidation: &skip}); err != nil {
		t.Fatal(err)
	}
	md := &capimachinedeployment.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}
	if err := md.SetupWithManager(ctx, mgr, controller.Options{SkipNameValidation: &skip}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Cluster API's manager: %v", err)
		}
		// The caches of workload clusters run until the cluster cache
		// shuts down, which the manager's stop does not do: left
		// running, their watches hold the API server's stop.
		if s, ok := cache.(interface{ Shutdown() }); ok {
			s.Shutdown()
		}
	})
}

// WorkloadKubeconfig makes the kubeconfig Secret of the Cluster cluster in
// namespace (<cluster>-kubeconfig, key value) reach this API server as an
// administrator, so that Cluster API's cluster cache connects to it as
// the cluster's workload cluster once its infrastructure is provisioned.
// Cluster API's MachinePool controller copies a pool's members only
// while connected.
func (e *Env) WorkloadKubeconfig(t testing.TB, namespace, cluster string) {
	t.Helper()
	kubeconfig, err := e.KubeconfigOf("workload-"+cluster, "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: cluster + "-kubeconfig", Namespace: namespace, Labels: map[string]string{clusterv1.ClusterNameLabel: cluster}},
		Type:       clusterv1.ClusterSecretType,
		Data:       map[string][]byte{"value": kubeconfig},
	}
	if err := e.Client.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
}
