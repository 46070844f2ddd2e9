// Package predicatetest runs a watch's update predicate over a table of
// changes, for the tests of the kinds' watches.
package predicatetest

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// Update is a change of an object, and whether a predicate lets it
// through.
type Update[T client.Object] struct {
	Name   string
	Change func(T)
	Want   bool
}

// Check runs pred on each update of an object made by base, as a subtest
// named for it.
func Check[T client.Object](t *testing.T, pred func(event.UpdateEvent) bool, base func() T, updates []Update[T]) {
	t.Helper()
	for _, u := range updates {
		t.Run(u.Name, func(t *testing.T) {
			old, now := base(), base()
			u.Change(now)
			if got := pred(event.UpdateEvent{ObjectOld: old, ObjectNew: now}); got != u.Want {
				t.Errorf("= %v, want %v", got, u.Want)
			}
		})
	}
}
