package engine

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
