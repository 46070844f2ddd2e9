package engine

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Recheck is how long an idle or waiting object rests before the manager
// looks again, unless Reconciler.RecheckInterval says otherwise; a change of
// the object or of its Jobs acts at once. It also caps the retry backoff.
const Recheck = 10 * time.Minute

// ErrorRetryMax caps the wait before a reconcile that failed — an API
// server refusal, an unreachable webhook — is tried again. The wait starts
// at 5 ms and doubles per failure in a row; client-go's default cap of 1000 s
// would leave a finished Job's outcome unrecorded for many minutes after a
// short outage.
const ErrorRetryMax = 30 * time.Second

// errorRetries is client-go's default rate limiter for failed reconciles
// with its per-object wait capped at ErrorRetryMax.
func errorRetries() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, ErrorRetryMax),
		// The overall limit on retries: 10 a second, bursts of 100.
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}

// ConflictRetry is how soon a reconcile whose write lost to another
// writer's (a conflict) is tried again.
const ConflictRetry = 100 * time.Millisecond

// pullRecheck is how often a Job stuck on its image is looked at again.
const pullRecheck = time.Minute

// Reconciler reconciles the objects of one Kind.
type Reconciler struct {
	// Kind is the kind the reconciler serves.
	Kind   Kind
	Client client.Client
	// Reader reads from the API server itself, not the cache: the object,
	// and a Job and its pods before the reconcile acts on them, so it never
	// acts on a status or a Job it wrote a moment ago but the cache has not
	// seen yet (which would start a second Job on the same state). That a
	// Job still runs, and that its pods pull their images, the cache tells.
	Reader client.Reader
	// Jobs is what the manager knows of its clusters' Jobs beyond its
	// cache, one record shared by the reconcilers of all its kinds; nil:
	// the API server is read before every Job start.
	Jobs *JobRecord
	// RunnerImage holds captf-runner at RunnerImagePath; an init container
	// copies it into every runner Job.
	RunnerImage string
	// JobEnv is added to the runner container, e.g. KUBE_IN_CLUSTER_CONFIG
	// for terraform's kubernetes backend.
	JobEnv []corev1.EnvVar
	// RetryBase is the first wait after a failed apply; it doubles with each
	// failure in a row, up to Recheck.
	RetryBase time.Duration
	// RecheckInterval is how long an idle or waiting object rests before
	// the manager looks again; zero means Recheck.
	RecheckInterval time.Duration
	// DriftInterval is the time between drift checks of an object whose
	// spec.drift.intervalSeconds is unset; zero turns them off.
	DriftInterval time.Duration
	// StateBackups is how many state backups each object keeps (the
	// newest serials); zero means DefaultStateBackups, and a negative
	// value keeps none.
	StateBackups int
	// WatchFilter, when set, is the value of LabelWatchFilter of the
	// objects the reconciler reconciles: the others (another value, or
	// none) are left alone, as Cluster API's own controllers and every
	// provider do with --watch-filter, so that several managers share a
	// cluster.
	WatchFilter string

	// states holds, by object, what was read of its state (cachedState).
	states sync.Map
	// owned holds, by object, the state an apply's outcome read whole to
	// mark it (ownState), chunks included, until the end of that
	// outcome's processing (process): never longer.
	owned sync.Map
	// processed holds the UIDs of the Jobs this manager marked processed
	// that the cache does not show so yet.
	processed sync.Map
	// written holds, by object (writeKey), the resourceVersions the
	// manager's last writes of it answered with (ownWrites, echoes).
	written sync.Map
}

// recheck is the re-check interval in effect.
func (r *Reconciler) recheck() time.Duration {
	if r.RecheckInterval > 0 {
		return r.RecheckInterval
	}
	return Recheck
}

// backoff is how much longer to wait before retrying a failed run.
func (r *Reconciler) backoff(obj Object) time.Duration {
	run := obj.GetRunnerStatus().LastRun
	if run == nil || run.FinishedAt == nil {
		return 0
	}
	wait := r.RetryBase
	if wait <= 0 {
		wait = 30 * time.Second
	}
	for i := 1; i < int(obj.GetRunnerStatus().Failures) && wait < Recheck; i++ {
		wait *= 2
	}
	return time.Until(run.FinishedAt.Add(min(wait, Recheck)))
}

// LabelWatchFilter is Cluster API's label that assigns an object to the
// managers run with its value as --watch-filter.
const LabelWatchFilter = "cluster.x-k8s.io/watch-filter"

// filteredOut reports whether obj is not the reconciler's to reconcile:
// a WatchFilter is set and obj's LabelWatchFilter differs from it.
func (r *Reconciler) filteredOut(obj client.Object) bool {
	return r.WatchFilter != "" && obj.GetLabels()[LabelWatchFilter] != r.WatchFilter
}

// kind is the kind this reconciler serves.
func (r *Reconciler) kind() Kind { return r.Kind }
