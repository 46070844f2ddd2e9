package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/testenv"
	"github.com/captf/captf/internal/tfstate"
)

// TestIndexedLabel: a list that asks for one value of an indexed label of
// its type (the engine's own, or one a kind declares) goes through that
// label's index; any other list scans the namespace as before.
func TestIndexedLabel(t *testing.T) {
	in := func(key string, values ...string) labels.Selector {
		r, err := labels.NewRequirement(key, selection.In, values)
		if err != nil {
			t.Fatal(err)
		}
		return labels.NewSelector().Add(*r)
	}
	indexes := labelIndexes([]Kind{theTestKind, indexedTestKind})
	owner := OwnerLabels(theTestKind, &infrav1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Name: "a"}})
	for _, c := range []struct {
		name      string
		list      client.ObjectList
		sel       labels.Selector
		key, want string
	}{
		{"a state's Secrets", &corev1.SecretList{}, labels.SelectorFromSet(tfstate.Selector("tfc-a")), tfstate.LabelSuffix, "tfc-a"},
		{"a state's Secrets by suffix", &corev1.SecretList{}, labels.SelectorFromSet(labels.Set{tfstate.LabelSuffix: "tfc-a"}), tfstate.LabelSuffix, "tfc-a"},
		{"the object's own Secrets", &corev1.SecretList{}, labels.SelectorFromSet(owner), infrav1.LabelOwnerName, "a"},
		{"the object's Jobs", &batchv1.JobList{}, labels.SelectorFromSet(owner), infrav1.LabelOwnerName, "a"},
		{"a Job's pods", &corev1.PodList{}, labels.SelectorFromSet(labels.Set{JobNameLabel: "a-apply-12345"}), JobNameLabel, "a-apply-12345"},
		{"the machines of a cluster, as their kind declares", &infrav1.TerraformMachineList{}, labels.SelectorFromSet(labels.Set{infrav1.LabelClusterName: "c"}), infrav1.LabelClusterName, "c"},
		{"a kind that declares no index", &infrav1.TerraformClusterList{}, labels.SelectorFromSet(labels.Set{infrav1.LabelClusterName: "c"}), "", ""},
		{"a kind not given", &infrav1.TerraformMachinePoolList{}, labels.SelectorFromSet(labels.Set{infrav1.LabelClusterName: "c"}), "", ""},
		{"one value of In", &corev1.PodList{}, in(JobNameLabel, "j"), JobNameLabel, "j"},
		{"two values", &corev1.SecretList{}, in(tfstate.LabelSuffix, "tfc-a", "tfc-b"), "", ""},
		{"a cluster's Jobs", &batchv1.JobList{}, labels.SelectorFromSet(labels.Set{infrav1.LabelManaged: "true", infrav1.LabelCluster: "a"}), infrav1.LabelCluster, "a"},
		{"no indexed label", &batchv1.JobList{}, labels.SelectorFromSet(labels.Set{infrav1.LabelManaged: "true"}), "", ""},
		{"a type without indexes", &corev1.ConfigMapList{}, labels.SelectorFromSet(labels.Set{infrav1.LabelOwnerName: "a"}), "", ""},
		{"everything", &corev1.SecretList{}, labels.Everything(), "", ""},
	} {
		key, value, ok := indexedLabel(indexes, c.list, c.sel)
		if key != c.key || value != c.want || ok != (c.key != "") {
			t.Errorf("%s: index %q value %q (%t), want %q value %q", c.name, key, value, ok, c.key, c.want)
		}
	}
}

// TestLabelIndexedList: through the manager's cache, a list by an
// indexed label finds what a scan of the namespace finds.
func TestLabelIndexedList(t *testing.T) {
	ctx := context.Background()
	env := testenv.Start(t, "../../..")
	cch := startCache(t, env)
	secrets := map[string]map[string]string{
		"tfstate-default-tfc-a":        tfstate.Selector("tfc-a"),
		"tfstate-default-tfc-a-part-1": tfstate.Selector("tfc-a"),
		"tfstate-default-tfc-b":        tfstate.Selector("tfc-b"),
		"suffix-only":                  {tfstate.LabelSuffix: "tfc-a"},
		"unlabelled":                   nil,
	}
	for name, l := range secrets {
		if err := env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: l}}); err != nil {
			t.Fatal(err)
		}
	}
	list := func(sel client.ListOption) []string {
		t.Helper()
		return secretNames(t, cch, sel)
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(list(client.MatchingLabels{})) < len(secrets) {
		if time.Now().After(deadline) {
			t.Fatal("the cache does not show the Secrets within 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, c := range []struct {
		sel  client.ListOption
		want []string
	}{
		{client.MatchingLabels(tfstate.Selector("tfc-a")), []string{"tfstate-default-tfc-a", "tfstate-default-tfc-a-part-1"}},
		{client.MatchingLabels{tfstate.LabelSuffix: "tfc-a"}, []string{"suffix-only", "tfstate-default-tfc-a", "tfstate-default-tfc-a-part-1"}},
		{client.MatchingLabels(tfstate.Selector("tfc-c")), nil},
	} {
		if got := list(c.sel); !slices.Equal(got, c.want) {
			t.Errorf("list %v: %v, want %v", c.sel, got, c.want)
		}
	}
}

// createStates creates, in namespace default, the Secrets secrets gives
// for each of n state suffixes tfc-00000, tfc-00001…, 16 at a time.
func createStates(b *testing.B, c client.Client, n int, secrets func(suffix string) []*corev1.Secret) {
	var wg sync.WaitGroup
	suffixes := make(chan string)
	for range 16 {
		wg.Go(func() {
			for suffix := range suffixes {
				for _, s := range secrets(suffix) {
					if err := c.Create(context.Background(), s); err != nil {
						b.Error(err)
					}
				}
			}
		})
	}
	for i := range n {
		suffixes <- fmt.Sprintf("tfc-%05d", i)
	}
	close(suffixes)
	wg.Wait()
}

// BenchmarkCachedStateList lists one state's Secrets from the manager's
// cache among 20,000 Secrets of 10,000 states (two each), with the label
// index and with a scan of the namespace.
func BenchmarkCachedStateList(b *testing.B) {
	ctx := context.Background()
	env := testenv.Start(b, "../../..")
	const states = 10000
	createStates(b, env.Client, states, func(suffix string) []*corev1.Secret {
		var out []*corev1.Secret
		for _, n := range []string{suffix, suffix + "-part-1"} {
			out = append(out, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tfstate-default-" + n, Namespace: "default", Labels: tfstate.Selector(suffix)}})
		}
		return out
	})
	for _, c := range []struct {
		name     string
		newCache cache.NewCacheFunc
	}{{"indexed", NewCache()}, {"scan", cache.New}} {
		cch := startCacheWith(b, env, c.newCache)
		deadline := time.Now().Add(time.Minute)
		for {
			var all corev1.SecretList
			if err := cch.List(ctx, &all, client.InNamespace("default"), client.UnsafeDisableDeepCopy); err != nil {
				b.Fatal(err)
			}
			if len(all.Items) >= 2*states {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("the cache holds %d Secrets after a minute", len(all.Items))
			}
			time.Sleep(100 * time.Millisecond)
		}
		b.Run(c.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				var got corev1.SecretList
				if err := cch.List(ctx, &got, client.InNamespace("default"), client.MatchingLabels(tfstate.Selector(fmt.Sprintf("tfc-%05d", i%states)))); err != nil {
					b.Fatal(err)
				}
				if len(got.Items) != 2 {
					b.Fatalf("%d Secrets of a state, want 2", len(got.Items))
				}
				i++
			}
		})
	}
}

// secretNames are the names of the Secrets of the default namespace that
// reader lists with opts, sorted.
func secretNames(t *testing.T, reader client.Reader, opts ...client.ListOption) []string {
	t.Helper()
	var list corev1.SecretList
	if err := reader.List(context.Background(), &list, append(opts, client.InNamespace("default"))...); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list.Items {
		names = append(names, s.Name)
	}
	slices.Sort(names)
	return names
}
