package engine

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/tfstate"
)

// TestBackupsListedFromCache: backing up a new serial lists the object's
// backups from the manager's cache, which holds their metadata and none
// of their data, and writes the new one: no read of the API server. Past
// the limit, the cache's list prunes the oldest.
func TestBackupsListedFromCache(t *testing.T) {
	ctx := context.Background()
	cch, c, direct := cachedEnv(t)
	reader, reads := recordReads(direct)
	r := &Reconciler{Kind: theTestKind, Client: newSecretFiller(c, reader), Reader: reader, StateBackups: 2}
	tc, first := withState(t, direct, "backed", 1, 1024)

	// backUp writes the state of serial into its Secret and backs it up
	// as an apply's outcome does: the state read whole (setStateOwner),
	// then its backup.
	backUp := func(serial int64) {
		t.Helper()
		if serial > 1 {
			if err := direct.Get(ctx, client.ObjectKeyFromObject(first), first); err != nil {
				t.Fatal(err)
			}
			first.Data[tfstate.DataKey] = bigState(t, serial, 1024)
			if err := direct.Update(ctx, first); err != nil {
				t.Fatal(err)
			}
		}
		st, err := r.setStateOwner(ctx, tc, true)
		if err != nil || st == nil || st.Serial != serial {
			t.Fatalf("serial %d: read %+v, %v", serial, st, err)
		}
		reads()
		if err := r.syncBackups(ctx, tc, st); err != nil {
			t.Fatal(err)
		}
		if got := reads(); len(got) != 0 {
			t.Errorf("backing up serial %d: reads of the API server %v, want none", serial, got)
		}
		// The next serial's list is the cache's: it waits for the
		// cache to show this backup.
		name := BackupName(theTestKind.Short(), tc.Name, serial)
		var cached corev1.Secret
		if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			return cch.Get(ctx, client.ObjectKey{Namespace: tc.Namespace, Name: name}, &cached) == nil, nil
		}); err != nil {
			t.Fatalf("the cache does not show backup %s", name)
		}
		if _, stripped := cached.Annotations[annotationDataDigest]; len(cached.Data) != 0 || !stripped {
			t.Errorf("the cache holds backup %s with %d keys of data (digest kept: %t), want none", name, len(cached.Data), stripped)
		}
	}
	serials := func() []int64 {
		var out []int64
		for _, b := range tc.Status.StateBackups {
			out = append(out, b.Serial)
		}
		return out
	}

	backUp(1)
	backUp(2)
	if got, want := serials(), []int64{2, 1}; !slices.Equal(got, want) {
		t.Errorf("after serial 2, status.stateBackups has serials %v, want %v", got, want)
	}
	backUp(3)
	if got, want := serials(), []int64{3, 2}; !slices.Equal(got, want) {
		t.Errorf("after serial 3, status.stateBackups has serials %v, want %v", got, want)
	}
	var left corev1.SecretList
	if err := direct.List(ctx, &left, client.InNamespace(tc.Namespace), client.HasLabels{infrav1.LabelStateBackup}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range left.Items {
		names = append(names, s.Name)
	}
	want := []string{BackupName(theTestKind.Short(), tc.Name, 2), BackupName(theTestKind.Short(), tc.Name, 3)}
	if slices.Sort(names); !slices.Equal(names, want) {
		t.Errorf("backups left on the API server %v, want %v (the oldest pruned)", names, want)
	}
}

// TestKeptBackups: the newest backups of applied serials are kept up to
// the limit, whatever refreshes wrote in between; of the refreshes'
// serials only the newest, and only while it is the newest of all.
func TestKeptBackups(t *testing.T) {
	mk := func(serial int64, refresh bool) backup {
		s := &corev1.Secret{}
		s.Labels = map[string]string{infrav1.LabelStateBackup: strconv.FormatInt(serial, 10)}
		if refresh {
			s.Annotations = map[string]string{annotationRefreshSerial: "true"}
		}
		return backup{first: s}
	}
	serials := func(list []backup) (out []int64) {
		for _, b := range list {
			out = append(out, b.serial())
		}
		return out
	}
	for _, tt := range []struct {
		name          string
		list          []backup
		keep          int
		kept, dropped []int64
	}{
		{name: "applies only", list: []backup{mk(9, false), mk(8, false), mk(7, false), mk(6, false)}, keep: 3, kept: []int64{9, 8, 7}, dropped: []int64{6}},
		{name: "an autoscaled pool's refreshes after its applies", keep: 2,
			list: []backup{mk(12, true), mk(11, true), mk(10, true), mk(9, true), mk(8, false), mk(7, true), mk(6, false), mk(5, false)},
			kept: []int64{12, 8, 6}, dropped: []int64{11, 10, 9, 7, 5}},
		{name: "an apply after refreshes", keep: 2, list: []backup{mk(13, false), mk(12, true), mk(8, false), mk(6, false)},
			kept: []int64{13, 8}, dropped: []int64{12, 6}},
		{name: "refreshes only", keep: 2, list: []backup{mk(3, true), mk(2, true)}, kept: []int64{3}, dropped: []int64{2}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			kept, dropped := keptBackups(tt.list, tt.keep)
			if !slices.Equal(serials(kept), tt.kept) || !slices.Equal(serials(dropped), tt.dropped) {
				t.Errorf("kept %v, dropped %v; want %v, %v", serials(kept), serials(dropped), tt.kept, tt.dropped)
			}
		})
	}
}
