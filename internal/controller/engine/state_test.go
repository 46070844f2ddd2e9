package engine

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/testenv"
	"github.com/captf/captf/internal/tfstate"
)

// TestStateByName calls stateByName against the real API server: a state
// whose first Secret holds it all is read by that Secret's name, as the
// list of its Secrets reads it; with no first Secret, one without the
// backend's labels, or a full first chunk (parts follow), the list decides.
func TestStateByName(t *testing.T) {
	env := testenv.Start(t, "../../..")
	ctx := context.Background()
	const suffix = "tfc-byname"
	read := func(what string) (*stateRead, bool) {
		t.Helper()
		st, ok, err := stateByName(ctx, env.Client, "default", suffix)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return st, ok
	}
	if _, ok := read("no Secret"); ok {
		t.Error("no first Secret: read by name, want the list")
	}

	first := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: tfstate.SecretName(suffix), Namespace: "default", Labels: tfstate.Selector(suffix)},
		Data:       map[string][]byte{tfstate.DataKey: bigState(t, 7, 4096)},
	}
	if err := env.Client.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	st, ok := read("one Secret")
	if !ok || st == nil || st.Serial != 7 || st.InputsHash() != "sha256:inputs" {
		t.Fatalf("one Secret: %+v, %t; want serial 7 read by name", st, ok)
	}
	if listed, err := stateByList(ctx, env.Client, "default", suffix); err != nil || listed.version != st.version || listed.Serial != st.Serial {
		t.Errorf("by name %+v, by the list %+v (%v): want the same", st, listed, err)
	}

	unlabelled := first.DeepCopy()
	unlabelled.Labels = nil
	if err := env.Client.Update(ctx, unlabelled); err != nil {
		t.Fatal(err)
	}
	if _, ok := read("without the backend's labels"); ok {
		t.Error("a first Secret without the backend's labels: read by name, want the list")
	}

	full := unlabelled.DeepCopy()
	full.Labels = tfstate.Selector(suffix)
	full.Data[tfstate.DataKey] = bigState(t, 8, 2*tfstate.ChunkSize)[:tfstate.ChunkSize]
	if err := env.Client.Update(ctx, full); err != nil {
		t.Fatal(err)
	}
	if _, ok := read("a full first chunk"); ok {
		t.Error("a full first chunk: read by name, want the list of its parts")
	}
}

// BenchmarkStateRead reads one state from the API server among 20,000
// state Secrets: its first Secret by name (stateByName), and the list by
// label (stateByList) it replaces where the state fits one Secret.
func BenchmarkStateRead(b *testing.B) {
	ctx := context.Background()
	env := testenv.Start(b, "../../..")
	const states = 20000
	data := bigState(b, 1, 4096)
	createStates(b, env.Client, states, func(suffix string) []*corev1.Secret {
		return []*corev1.Secret{{ObjectMeta: metav1.ObjectMeta{Name: tfstate.SecretName(suffix), Namespace: "default", Labels: tfstate.Selector(suffix)},
			Data: map[string][]byte{tfstate.DataKey: data}}}
	})
	b.Run("by name", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if st, ok, err := stateByName(ctx, env.Client, "default", fmt.Sprintf("tfc-%05d", i%states)); err != nil || !ok || st.Serial != 1 {
				b.Fatal(st, ok, err)
			}
		}
	})
	b.Run("list", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if st, err := stateByList(ctx, env.Client, "default", fmt.Sprintf("tfc-%05d", i%states)); err != nil || st.Serial != 1 {
				b.Fatal(st, err)
			}
		}
	})
}

// TestStateOwnerByName: after an apply, the state Secret that holds the
// whole state is read by its name to be marked as the object's (one GET,
// no list of the namespace's Secrets), and what it holds is remembered as
// read; a state in parts is listed, and each of its Secrets marked.
func TestStateOwnerByName(t *testing.T) {
	env := testenv.Start(t, "../../..")
	ctx := context.Background()
	direct := directClient(t, env)
	reader, reads := recordReads(direct)
	r := &Reconciler{Kind: theTestKind, Client: env.Client, Reader: reader}
	tc, first := withState(t, env.Client, "owned", 3, 4096)
	suffix := StateSuffix("tfc", tc.Name)
	owned := func(what string, names ...string) {
		t.Helper()
		for _, name := range names {
			var s corev1.Secret
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, &s); err != nil {
				t.Fatal(err)
			}
			_, labelled := s.Labels[infrav1.LabelMove]
			if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != tc.UID || !labelled {
				t.Errorf("%s: Secret %s has owners %+v, move label %t; want the object and the label", what, name, s.OwnerReferences, labelled)
			}
		}
	}

	if _, err := r.setStateOwner(ctx, tc, true); err != nil {
		t.Fatal(err)
	}
	if got, want := reads(), []string{"get *v1.Secret"}; !slices.Equal(got, want) {
		t.Errorf("a state in one Secret: reads of the API server %v, want %v", got, want)
	}
	owned("one Secret", first.Name)
	if kept, ok := r.states.Load(client.ObjectKeyFromObject(tc)); !ok || kept.(stateRead).Serial != 3 {
		t.Errorf("a state in one Secret: remembered %+v, want serial 3", kept)
	}

	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(first), first); err != nil {
		t.Fatal(err)
	}
	first.Data[tfstate.DataKey] = bigState(t, 4, 2*tfstate.ChunkSize)[:tfstate.ChunkSize]
	first.OwnerReferences = nil
	if err := env.Client.Update(ctx, first); err != nil {
		t.Fatal(err)
	}
	part := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: tfstate.PartName(suffix, 1), Namespace: "default", Labels: tfstate.Selector(suffix)},
		Data:       map[string][]byte{tfstate.DataKey: []byte("rest")},
	}
	if err := env.Client.Create(ctx, part); err != nil {
		t.Fatal(err)
	}
	if _, err := r.setStateOwner(ctx, tc, true); err != nil {
		t.Fatal(err)
	}
	if got, want := reads(), []string{"get *v1.Secret", "list *v1.SecretList"}; !slices.Equal(got, want) {
		t.Errorf("a state in parts: reads of the API server %v, want %v", got, want)
	}
	owned("parts", first.Name, part.Name)
}

// frozenSecrets is the manager's cache as it was when snapshot was taken:
// it lists the state Secrets it held then, stripped as the cache strips
// them.
type frozenSecrets struct {
	client.Client
	snapshot []corev1.Secret
}

func (c *frozenSecrets) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	l, ok := list.(*corev1.SecretList)
	if !ok {
		return c.Client.List(ctx, list, opts...)
	}
	for i := range c.snapshot {
		s, err := stripSecretData(c.snapshot[i].DeepCopy())
		if err != nil {
			return err
		}
		l.Items = append(l.Items, *s.(*corev1.Secret))
	}
	return nil
}

// TestCachedStateBehind: after an apply, the outcome reads the state the
// apply wrote from the API server (ownState). While the cache still shows
// the state from before, older than that read, the state is what the read
// found, with no read again; once the cache shows a write newer than the
// read, the state is read from the API server.
func TestCachedStateBehind(t *testing.T) {
	env := testenv.Start(t, "../../..")
	ctx := context.Background()
	direct := directClient(t, env)
	reader, reads := recordReads(direct)
	cached := &frozenSecrets{Client: env.Client}
	r := &Reconciler{Kind: theTestKind, Client: newSecretFiller(cached, reader), Reader: reader}
	tc, first := withState(t, env.Client, "behind", 1, 1024)
	// write gives the state a new serial, as an apply does.
	write := func(serial int64) {
		t.Helper()
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(first), first); err != nil {
			t.Fatal(err)
		}
		first.Data[tfstate.DataKey] = bigState(t, serial, 1024)
		if err := env.Client.Update(ctx, first); err != nil {
			t.Fatal(err)
		}
	}
	read := func(what string, serial int64, want []string) {
		t.Helper()
		reads()
		st, err := r.readState(ctx, r.Client, tc)
		if err != nil {
			t.Fatal(err)
		}
		if st == nil || st.Serial != serial {
			t.Errorf("%s: state %+v, want serial %d", what, st, serial)
		}
		if got := reads(); !slices.Equal(got, want) {
			t.Errorf("%s: reads of the API server %v, want %v", what, got, want)
		}
	}

	cached.snapshot = []corev1.Secret{*first.DeepCopy()}
	read("the cache shows serial 1, nothing remembered", 1, []string{"get *v1.Secret"})
	// The apply writes serial 2; its outcome reads it.
	write(2)
	if _, err := r.setStateOwner(ctx, tc, true); err != nil {
		t.Fatal(err)
	}
	read("the cache still shows serial 1, the outcome read serial 2", 2, nil)
	// Someone writes serial 3, and the cache shows it.
	write(3)
	cached.snapshot = []corev1.Secret{*first.DeepCopy()}
	read("the cache shows serial 3, newer than the outcome's read", 3, []string{"get *v1.Secret"})
}

// withState creates the TerraformCluster name and the first Secret of its
// state, of serial and about size bytes (bigState), whole in that Secret.
func withState(t *testing.T, c client.Client, name string, serial int64, size int) (*infrav1.TerraformCluster, *corev1.Secret) {
	t.Helper()
	ctx := context.Background()
	tc := &infrav1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       infrav1.TerraformClusterSpec{RunnerSpec: infrav1.RunnerSpec{Image: moduleImage}},
	}
	if err := c.Create(ctx, tc); err != nil {
		t.Fatal(err)
	}
	suffix := StateSuffix("tfc", tc.Name)
	first := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: tfstate.SecretName(suffix), Namespace: "default", Labels: tfstate.Selector(suffix)},
		Data:       map[string][]byte{tfstate.DataKey: bigState(t, serial, size)},
	}
	if err := c.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	return tc, first
}
