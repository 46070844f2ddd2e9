package engine

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/tfstate"
)

// The cache's list by label looks at every object of the namespace: at
// thousands of objects, each with its Jobs, their pods and several
// Secrets, that is tens of thousands of objects per list, several lists
// per reconcile, and an idle re-check cost tens of milliseconds of CPU
// (the scale benchmark at N=5,000: 50 re-checks a second took 1.4 cores).
// So the labels the manager lists its own objects by are indexed, and a
// list that asks for one value of such a label reads the objects that
// carry it.

// labelIndex is an indexed label key of the objects of one type, listed
// in lists of another.
type labelIndex struct {
	obj    client.Object
	list   client.ObjectList
	labels []string
}

// ownIndexes are the labels the engine lists the objects it makes by: a
// Job's owner (jobsOf) and cluster (clusterJobs), a pod's Job (its pods),
// a state's suffix (the state and its parts), and the owner of the
// manager's own Secrets.
var ownIndexes = []labelIndex{
	{&batchv1.Job{}, &batchv1.JobList{}, []string{infrav1.LabelOwnerName, infrav1.LabelCluster}},
	{&corev1.Pod{}, &corev1.PodList{}, []string{JobNameLabel}},
	{&corev1.Secret{}, &corev1.SecretList{}, []string{tfstate.LabelSuffix, infrav1.LabelOwnerName}},
}

// labelIndexes are ownIndexes and the labels each of kinds declares its
// objects are listed by (Kind.IndexedLabels).
func labelIndexes(kinds []Kind) []labelIndex {
	indexes := slices.Clone(ownIndexes)
	for _, k := range kinds {
		if labels := k.IndexedLabels(); len(labels) > 0 {
			indexes = append(indexes, labelIndex{k.New(), k.NewList(), labels})
		}
	}
	return indexes
}

// indexName is the name of the cache's index of the label key.
func indexName(key string) string { return "captf.io/label:" + key }

// NewCache makes the manager's cache (made with CacheOptions) with the
// labelIndexes of kinds: a list of one of their types that selects one
// value of an indexed label reads the objects of that value only.
func NewCache(kinds ...Kind) cache.NewCacheFunc {
	indexes := labelIndexes(kinds)
	return func(cfg *rest.Config, opts cache.Options) (cache.Cache, error) {
		c, err := cache.New(cfg, opts)
		if err != nil {
			return nil, err
		}
		indexed := map[indexKind]bool{}
		for _, ix := range indexes {
			for _, key := range ix.labels {
				extract := func(obj client.Object) []string {
					if v, ok := obj.GetLabels()[key]; ok {
						return []string{v}
					}
					return nil
				}
				err := c.IndexField(context.Background(), ix.obj, indexName(key), extract)
				if meta.IsNoMatchError(err) {
					// A kind the API server does not serve (its CRD is not
					// installed) is not listed either.
					continue
				}
				if err != nil {
					return nil, fmt.Errorf("index %T by label %s: %w", ix.obj, key, err)
				}
				indexed[indexKind{reflect.TypeOf(ix.list), key}] = true
			}
		}
		return &labelIndexed{Cache: c, indexes: indexes, indexed: indexed}, nil
	}
}

// labelIndexed is a cache whose lists by an indexed label use its index.
type labelIndexed struct {
	cache.Cache
	// indexes are the labels indexed, by type.
	indexes []labelIndex
	// indexed are the indexes there are.
	indexed map[indexKind]bool
}

// indexKind is an index of the label key of the objects of a list type.
type indexKind struct {
	list reflect.Type
	key  string
}

func (c *labelIndexed) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	if o.FieldSelector == nil && o.LabelSelector != nil {
		if key, value, ok := indexedLabel(c.indexes, list, o.LabelSelector); ok && c.indexed[indexKind{reflect.TypeOf(list), key}] {
			// The label selector still applies to what the index gives.
			opts = append(opts, client.MatchingFields{indexName(key): value})
		}
	}
	return c.Cache.List(ctx, list, opts...)
}

// indexedLabel is the first label of sel that indexes has for list's type
// and that sel asks for one value of.
func indexedLabel(indexes []labelIndex, list client.ObjectList, sel labels.Selector) (key, value string, ok bool) {
	reqs, selectable := sel.Requirements()
	if !selectable {
		return "", "", false
	}
	for _, ix := range indexes {
		if reflect.TypeOf(ix.list) != reflect.TypeOf(list) {
			continue
		}
		for _, key := range ix.labels {
			for _, r := range reqs {
				if r.Key() != key {
					continue
				}
				switch r.Operator() {
				case selection.Equals, selection.DoubleEquals, selection.In:
					if vs := r.Values(); vs.Len() == 1 {
						return key, vs.UnsortedList()[0], true
					}
				}
			}
		}
	}
	return "", "", false
}
