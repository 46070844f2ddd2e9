package engine

import (
	"context"
	"fmt"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
)

// JobRecord is what a manager knows of each cluster's Jobs beyond its
// cache, shared by the reconcilers of all its kinds (Reconciler.Jobs).
// Before a Job starts, the Jobs of its cluster must be complete: a Job the
// list misses could be a second one on the same state. The cache may lag
// behind the API server, but only by what was written since it last
// heard; every Job is created by this manager (with --leader-elect, the
// only one that starts Jobs), and it records each one it created until
// the cache shows it. So the cache serves a start once this manager read
// the cluster's Jobs from the API server itself, every Job it created
// since is in the cache, and no create failed since (a create that
// reported an error may have been written all the same). Otherwise the
// API server is read, which makes all three true again. Starts of one
// cluster are serialized (clusterStarts), so no create runs meanwhile.
// A manager that starts has an empty record: it reads each cluster's Jobs
// from the API server once. The zero value is ready to use.
type JobRecord struct {
	mu       sync.Mutex
	clusters map[string]*clusterJobRecord
}

type clusterJobRecord struct {
	// read: the cluster's Jobs were read from the API server, and every
	// create since succeeded.
	read bool
	// unseen are the Jobs created since that the cache did not show yet.
	unseen map[types.UID]bool
}

// clusterKey names obj's cluster in a JobRecord and clusterStarts.
func clusterKey(obj Object) string { return obj.GetNamespace() + "/" + ClusterName(obj) }

// complete reports whether cached, the cache's Jobs of the cluster key,
// are all its Jobs; it forgets the created Jobs cached shows. A nil record
// knows nothing.
func (j *JobRecord) complete(key string, cached []batchv1.Job) bool {
	if j == nil {
		return false
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	c := j.clusters[key]
	if c == nil || !c.read {
		return false
	}
	for i := range cached {
		delete(c.unseen, cached[i].UID)
	}
	return len(c.unseen) == 0
}

// read records that the cluster key's Jobs were just read from the API
// server: that list has every Job created before.
func (j *JobRecord) read(key string) {
	if j == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.clusters == nil {
		j.clusters = map[string]*clusterJobRecord{}
	}
	j.clusters[key] = &clusterJobRecord{read: true}
}

// created records a Job of the cluster key this manager created; err is
// the create's error: after one, the API server is asked next time.
func (j *JobRecord) created(key string, job *batchv1.Job, err error) {
	if j == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	c := j.clusters[key]
	switch {
	case c == nil:
	case err != nil:
		c.read = false
	default:
		if c.unseen == nil {
			c.unseen = map[types.UID]bool{}
		}
		c.unseen[job.UID] = true
	}
}

// clusterJobs are the Jobs of obj's cluster (their captf.io/cluster
// label), of every kind: the cache's when they are complete (r.Jobs),
// otherwise the API server's. Called with the cluster's clusterStarts
// lock held.
func (r *Reconciler) clusterJobs(ctx context.Context, obj Object) ([]batchv1.Job, error) {
	key := clusterKey(obj)
	selector := []client.ListOption{client.InNamespace(obj.GetNamespace()),
		client.MatchingLabels{infrav1.LabelManaged: "true", infrav1.LabelCluster: NameLabel(ClusterName(obj))}}
	var list batchv1.JobList
	if r.Jobs != nil {
		if err := r.Client.List(ctx, &list, selector...); err != nil {
			return nil, fmt.Errorf("list the Jobs of cluster %s: %w", ClusterName(obj), err)
		}
		if r.Jobs.complete(key, list.Items) {
			return list.Items, nil
		}
	}
	if err := r.Reader.List(ctx, &list, selector...); err != nil {
		return nil, fmt.Errorf("list the Jobs of cluster %s: %w", ClusterName(obj), err)
	}
	r.Jobs.read(key)
	return list.Items, nil
}
