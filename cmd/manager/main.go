// Command manager runs captf's controllers: it reconciles TerraformClusters
// into runner Jobs, with leader election, metrics and health probes. With
// --enable-webhooks it also serves the admission webhooks (TerraformPlan,
// the provider IDs, the templates' immutable spec).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/controller/terraformcluster"
	"github.com/captf/captf/internal/controller/terraformmachine"
	"github.com/captf/captf/internal/controller/terraformmachinepool"
	"github.com/captf/captf/internal/controller/terraformmachinepoolmachine"
	"github.com/captf/captf/internal/version"
	"github.com/captf/captf/internal/webhook/providerid"
	"github.com/captf/captf/internal/webhook/templates"
	planwebhook "github.com/captf/captf/internal/webhook/terraformplan"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "manager: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	metrics := fs.String("metrics-bind-address", ":8443", "where metrics are served; 0 turns them off")
	metricsSecure := fs.Bool("metrics-secure", true, "serve metrics over HTTPS to callers the API server authenticates and allows to get /metrics "+
		"(a TokenReview and a SubjectAccessReview per scrape); false serves plain HTTP to anyone")
	metricsCertDir := fs.String("metrics-cert-dir", "", "the folder holding the metrics server's tls.crt and tls.key; empty: a self-signed certificate made at start")
	probes := fs.String("health-probe-bind-address", ":8081", "where /healthz and /readyz are served")
	leaderElect := fs.Bool("leader-elect", false, "elect a leader, so only one replica reconciles")
	leaderNS := fs.String("leader-election-namespace", "", "where the leader Lease lives (default: the pod's namespace)")
	runnerImage := fs.String("runner-image", "", "the image that holds "+engine.RunnerImagePath+" (required)")
	retry := fs.Duration("retry-base", 30*time.Second, "the first wait after a failed run; it doubles per failure in a row")
	webhooks := fs.Bool("enable-webhooks", false, "serve the admission webhooks: TerraformPlan, provider IDs, templates (config/default turns it on)")
	webhookPort := fs.Int("webhook-port", 9443, "where the webhook server listens")
	webhookCertDir := fs.String("webhook-cert-dir", "/tmp/k8s-webhook-server/serving-certs", "the folder holding the webhook server's tls.crt and tls.key")
	managerUsername := fs.String("manager-username", "", "the username of this manager's own requests, system:serviceaccount:<namespace>:<name>; "+
		"the webhook lets only it create plans in any phase and move their phase label (required with --enable-webhooks)")
	recheck := fs.Duration("recheck-interval", engine.Recheck, "how long an idle or waiting TerraformCluster rests before it is looked at again")
	drift := fs.Duration("drift-interval", engine.DefaultDriftInterval, "the time between drift checks of an object whose spec.drift.intervalSeconds is unset; 0 turns them off")
	backups := fs.Int("state-backups", engine.DefaultStateBackups, "how many backups of its terraform state each object keeps, one per state serial; 0 keeps none")
	qps := fs.Float64("kube-api-qps", 200, "requests per second to the API server, sustained; negative turns client-side limiting off")
	burst := fs.Int("kube-api-burst", 400, "requests to the API server in a burst above --kube-api-qps")
	workers := fs.Int("max-concurrent-reconciles", 8, "objects of each kind reconciled at once")
	pprof := fs.String("pprof-bind-address", "", "where the Go runtime's profiles (/debug/pprof/) are served, unauthenticated; empty serves none")
	var namespaces []string
	fs.Func("namespace", "a namespace whose objects the manager watches and reconciles; repeat it for several; none: every namespace", func(ns string) error {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return fmt.Errorf("%q is not a namespace name: %s", ns, strings.Join(errs, "; "))
		}
		namespaces = append(namespaces, ns)
		return nil
	})
	watchFilter := fs.String("watch-filter", "", "reconcile only the objects whose "+engine.LabelWatchFilter+" label has this value; empty: every object")
	showVersion := fs.Bool("version", false, "print the version and exit")
	opts := zap.Options{}
	opts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *showVersion {
		_, err := io.WriteString(stdout, version.Line("manager"))
		return err
	}
	if *runnerImage == "" {
		return fmt.Errorf("--runner-image is required")
	}
	if *webhooks && *managerUsername == "" {
		return fmt.Errorf("--manager-username is required with --enable-webhooks")
	}
	if *recheck <= 0 {
		return fmt.Errorf("--recheck-interval must be positive, not %s", *recheck)
	}
	if *drift < 0 {
		return fmt.Errorf("--drift-interval must not be negative, not %s", *drift)
	}
	if *backups < 0 {
		return fmt.Errorf("--state-backups must not be negative, not %d", *backups)
	}
	if *backups == 0 {
		*backups = -1
	}
	if *qps == 0 {
		// client-go would read 0 as its own default of 5.
		return fmt.Errorf("--kube-api-qps must not be 0: a positive value limits requests, a negative one turns the limit off")
	}
	if *qps > 0 && *burst < 1 {
		return fmt.Errorf("--kube-api-burst must be at least 1 while --kube-api-qps limits requests, not %d", *burst)
	}
	if errs := validation.IsValidLabelValue(*watchFilter); len(errs) > 0 {
		return fmt.Errorf("--watch-filter %q is not a label value: %s", *watchFilter, strings.Join(errs, "; "))
	}
	if *workers < 1 {
		return fmt.Errorf("--max-concurrent-reconciles must be at least 1, not %d", *workers)
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := infrav1.AddToScheme(scheme); err != nil {
		return err
	}
	if err := clusterv1.AddToScheme(scheme); err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("API server config: %w", err)
	}
	// The lease keeps a client of its own, outside the limit, so a busy
	// manager still renews it in time.
	leaderCfg := rest.CopyConfig(cfg)
	limit(cfg, *qps, *burst)
	// The cache indexes what every kind declares, a kind whose CRD is
	// not served skipped.
	all := []engine.Kind{terraformcluster.Kind, terraformmachine.Kind, terraformmachinepool.Kind}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Cache:                   engine.CacheOptionsIn(namespaces...),
		NewCache:                engine.NewCache(all...),
		Client:                  engine.ClientOptions(),
		Metrics:                 metricsOptions(*metrics, *metricsSecure, *metricsCertDir),
		HealthProbeBindAddress:  *probes,
		PprofBindAddress:        *pprof,
		LeaderElection:          *leaderElect,
		LeaderElectionID:        "captf-manager.captf.io",
		LeaderElectionNamespace: *leaderNS,
		WebhookServer:           webhook.NewServer(webhook.Options{Port: *webhookPort, CertDir: *webhookCertDir}),
		LeaderElectionConfig:    leaderCfg,
	})
	if err != nil {
		return fmt.Errorf("manager: %w", err)
	}
	kinds := []engine.Kind{terraformcluster.Kind}
	if err := terraformmachine.Served(mgr.GetRESTMapper()); err == nil {
		kinds = append(kinds, terraformmachine.Kind)
	} else {
		ctrl.Log.Info("Cluster API's Machine (v1beta2) is not served: TerraformMachines are not reconciled", "error", err.Error())
	}
	poolsErr := terraformmachinepool.Served(mgr.GetRESTMapper())
	pools := poolsErr == nil
	if pools {
		kinds = append(kinds, terraformmachinepool.Kind)
	} else {
		ctrl.Log.Info("Cluster API's MachinePool (v1beta2) is not served: TerraformMachinePools are not reconciled", "error", poolsErr.Error())
	}
	// What the reconcilers of every kind know of the Jobs they started.
	jobs := &engine.JobRecord{}
	for _, k := range kinds {
		r := &engine.Reconciler{
			Kind:        k,
			Client:      mgr.GetClient(),
			Reader:      mgr.GetAPIReader(),
			Jobs:        jobs,
			RunnerImage: *runnerImage,
			// In a pod, terraform's kubernetes backend reaches the API
			// server with the Job's service account.
			JobEnv:          []corev1.EnvVar{{Name: "KUBE_IN_CLUSTER_CONFIG", Value: "true"}},
			RetryBase:       *retry,
			RecheckInterval: *recheck,
			DriftInterval:   *drift,
			StateBackups:    *backups,
			WatchFilter:     *watchFilter,
		}
		if err := r.SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: *workers}); err != nil {
			return fmt.Errorf("%s controller: %w", k.Name(), err)
		}
	}
	if pools {
		members := &terraformmachinepoolmachine.Reconciler{Client: mgr.GetClient(), WatchFilter: *watchFilter}
		if err := members.SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: *workers}); err != nil {
			return fmt.Errorf("TerraformMachinePoolMachine controller: %w", err)
		}
	}
	if *webhooks {
		if err := (&planwebhook.Validator{ManagerUsername: *managerUsername}).SetupWithManager(mgr); err != nil {
			return err
		}
		if err := providerid.SetupWithManager(mgr, *managerUsername); err != nil {
			return err
		}
		if err := templates.SetupWithManager(mgr); err != nil {
			return err
		}
		if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
			return err
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}

// limit sets the manager's client-side rate limit: one token bucket of qps
// and burst for every client made from cfg (client-go would give the client
// of each resource a bucket of its own, multiplying the limit). A negative
// qps leaves requests unlimited on this side.
func limit(cfg *rest.Config, qps float64, burst int) {
	cfg.QPS, cfg.Burst = float32(qps), burst
	cfg.RateLimiter = nil
	if qps > 0 {
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(float32(qps), burst)
	}
}

// metricsOptions serves metrics at addr: with secure, over HTTPS to the
// callers the API server authenticates and authorizes for a get of the
// non-resource URL /metrics (controller-runtime's filter), with the
// certificate in certDir or a self-signed one.
func metricsOptions(addr string, secure bool, certDir string) metricsserver.Options {
	opts := metricsserver.Options{BindAddress: addr, SecureServing: secure}
	if secure {
		opts.FilterProvider = filters.WithAuthenticationAndAuthorization
		opts.CertDir = certDir
	}
	return opts
}
