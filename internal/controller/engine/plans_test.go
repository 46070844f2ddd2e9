package engine

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/captf/captf/api/v1alpha1"
)

// TestPrunableTies: of finished plans made within the same second, pruning
// keeps the same ones whatever order the list comes in (the cache's order
// is a map's): the newer second first, then the greater name.
func TestPrunableTies(t *testing.T) {
	base := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	plan := func(name string, sec int) *infrav1.TerraformPlan {
		return &infrav1.TerraformPlan{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(base.Add(time.Duration(sec) * time.Second))}}
	}
	// Four plans of the newer second, ten of one second before: the cut
	// after KeepFinished (10) falls among the ten.
	var list []*infrav1.TerraformPlan
	for _, n := range []string{"z-1", "a-2", "m-3", "b-4"} {
		list = append(list, plan(n, 1))
	}
	for _, n := range []string{"p-7", "p-2", "p-9", "p-0", "p-4", "p-1", "p-8", "p-3", "p-6", "p-5"} {
		list = append(list, plan(n, 0))
	}
	if KeepFinished != 10 {
		t.Fatalf("KeepFinished is %d; the cut is made for 10", KeepFinished)
	}
	// The six greatest names of the older second stay.
	want := []string{"p-3", "p-2", "p-1", "p-0"}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 500 {
		rng.Shuffle(len(list), func(i, j int) { list[i], list[j] = list[j], list[i] })
		var got []string
		for _, p := range prunable(list) {
			got = append(got, p.Name)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("order %s (round %d): deleted (-want +got):\n%s", planNames(list), round, diff)
		}
	}
	if got := prunable(list[:KeepFinished]); got != nil {
		t.Errorf("%d plans: deleted %s, want none", KeepFinished, planNames(got))
	}
}

func planNames(plans []*infrav1.TerraformPlan) string {
	var s []string
	for _, p := range plans {
		s = append(s, p.Name)
	}
	return fmt.Sprint(s)
}
