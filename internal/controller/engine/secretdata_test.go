package engine

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/tfstate"
)

// TestSecretsCachedWithoutData: the manager's cache holds the data of its
// own Secrets only. A variable source and a 256 KiB state are held as
// metadata; read through the Reconciler's client, the source has its data,
// read from the API server once per change of it (not per read, not for a
// change of its labels), and the state its serial and inputs hash, read
// once per new content.
func TestSecretsCachedWithoutData(t *testing.T) {
	ctx := context.Background()
	cch, c, direct := cachedEnv(t)
	var apiReads atomic.Int32
	api := interceptor.NewClient(direct, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			apiReads.Add(1)
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			apiReads.Add(1)
			return c.List(ctx, list, opts...)
		},
	})
	f := newSecretFiller(c, api)
	r := &Reconciler{Kind: theTestKind, Client: f, Reader: api}
	obj := &infrav1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "default"}}

	const canary = "canary-b8c1f0e2"
	source := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default"},
		Data:       map[string][]byte{"password": []byte(canary)},
	}
	own := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "own", Namespace: "default", Labels: map[string]string{infrav1.LabelManaged: "true"}},
		Data:       map[string][]byte{"key": []byte("the manager's own")},
	}
	suffix := StateSuffix(r.kind().Short(), obj.Name)
	state := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: tfstate.SecretName(suffix), Namespace: "default", Labels: tfstate.Selector(suffix)},
		Data:       map[string][]byte{"tfstate": bigState(t, 1, 256<<10)},
	}
	for _, s := range []*corev1.Secret{source, own, state} {
		if err := direct.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	// inCache is the Secret as the cache holds it, once it holds s's
	// resourceVersion or a later one.
	inCache := func(s *corev1.Secret) *corev1.Secret {
		t.Helper()
		var got corev1.Secret
		want, _ := strconv.ParseInt(s.ResourceVersion, 10, 64)
		deadline := time.Now().Add(30 * time.Second)
		for {
			if cch.Get(ctx, client.ObjectKeyFromObject(s), &got) == nil {
				if rv, _ := strconv.ParseInt(got.ResourceVersion, 10, 64); rv >= want {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("the cache does not show Secret %s within 30s", s.Name)
			}
			time.Sleep(20 * time.Millisecond)
		}
		return &got
	}
	for _, s := range []*corev1.Secret{source, state} {
		if got := inCache(s); got.Data != nil || got.Annotations[annotationDataDigest] == "" || got.ManagedFields != nil {
			t.Errorf("the cache holds Secret %s with %d keys of data, digest %q, %d managed fields: want no data, a digest, no managed fields",
				s.Name, len(got.Data), got.Annotations[annotationDataDigest], len(got.ManagedFields))
		}
	}
	if got := inCache(own); string(got.Data["key"]) != "the manager's own" {
		t.Errorf("the cache holds the manager's own Secret with data %q", got.Data)
	}

	read := func(what string, wantAPI int32) *corev1.Secret {
		t.Helper()
		apiReads.Store(0)
		var got corev1.Secret
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(source), &got); err != nil {
			t.Fatal(err)
		}
		if n := apiReads.Load(); n != wantAPI {
			t.Errorf("%s: %d reads of the API server, want %d", what, n, wantAPI)
		}
		if _, ok := got.Annotations[annotationDataDigest]; ok {
			t.Errorf("%s: the digest annotation reached the reader", what)
		}
		return &got
	}
	if got := read("the first read", 1); string(got.Data["password"]) != canary {
		t.Errorf("the first read: data %q", got.Data)
	}
	read("a second read", 0)
	source.Labels = map[string]string{"team": "a"}
	if err := direct.Update(ctx, source); err != nil {
		t.Fatal(err)
	}
	inCache(source)
	read("after a change of labels", 0)
	source.Data["password"] = []byte(canary + "-rotated")
	if err := direct.Update(ctx, source); err != nil {
		t.Fatal(err)
	}
	inCache(source)
	if got := read("after a change of data", 1); string(got.Data["password"]) != canary+"-rotated" {
		t.Errorf("after a change of data: %q", got.Data)
	}
	var list corev1.SecretList
	if err := r.Client.List(ctx, &list, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Items {
		if s.Name == source.Name && string(s.Data["password"]) != canary+"-rotated" {
			t.Errorf("listed: %q", s.Data)
		}
	}

	readState := func(what string, wantAPI int32, wantSerial int64) {
		t.Helper()
		apiReads.Store(0)
		st, err := r.readState(ctx, r.Client, obj)
		if err != nil {
			t.Fatal(err)
		}
		if n := apiReads.Load(); n != wantAPI {
			t.Errorf("%s: %d reads of the API server, want %d", what, n, wantAPI)
		}
		if st == nil || st.Serial != wantSerial || st.InputsHash() != "sha256:inputs" {
			t.Errorf("%s: state %+v, want serial %d with the inputs hash", what, st, wantSerial)
		}
	}
	readState("the first read of the state", 1, 1)
	readState("a second read of the state", 0, 1)
	state.Data["tfstate"] = bigState(t, 2, 256<<10)
	if err := direct.Update(ctx, state); err != nil {
		t.Fatal(err)
	}
	inCache(state)
	readState("a new serial", 1, 2)
	if v, ok := r.states.Load(client.ObjectKeyFromObject(obj)); !ok || v.(stateRead).chunks != nil {
		t.Errorf("what is kept of the state: %+v, want no chunks", v)
	}

	// After an apply, the list that makes the object the owner of its
	// state reads the new state: publishing its serial reads it no more.
	obj.Spec.Image = moduleImage
	if err := direct.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	state.Data["tfstate"] = bigState(t, 3, 256<<10)
	if err := direct.Update(ctx, state); err != nil {
		t.Fatal(err)
	}
	apiReads.Store(0)
	if _, err := r.setStateOwner(ctx, obj, true); err != nil {
		t.Fatal(err)
	}
	if n := apiReads.Load(); n != 1 {
		t.Errorf("making the object the owner of its state: %d reads of the API server, want 1 (the list)", n)
	}
	if err := direct.Get(ctx, client.ObjectKeyFromObject(state), state); err != nil {
		t.Fatal(err)
	}
	if len(state.OwnerReferences) != 1 {
		t.Fatalf("the state's owners: %+v", state.OwnerReferences)
	}
	inCache(state)
	readState("the state the owner's list read", 0, 3)

	// Without the filler, the cache's state is refused, not taken for none.
	if _, err := (&Reconciler{Kind: theTestKind, Client: c, Reader: api}).readState(ctx, c, obj); err == nil || !strings.Contains(err.Error(), "holds no state's data") {
		t.Errorf("a state read from the cache without the filler: %v", err)
	}
}

// bigState is a gzip'ed terraform state of serial that records the inputs
// hash sha256:inputs, padded with random text to about size bytes.
func bigState(t testing.TB, serial int64, size int) []byte {
	t.Helper()
	pad := make([]byte, size)
	if _, err := rand.Read(pad); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(map[string]any{
		"version": 4, "serial": serial, "lineage": "big", "terraform_version": "1.14.0",
		"outputs": map[string]any{"captf_inputs_hash": map[string]any{"value": "sha256:inputs", "type": "string"}},
		"resources": []any{map[string]any{"mode": "managed", "type": "terraform_data", "name": "pad", "instances": []any{
			map[string]any{"attributes": map[string]any{"output": base64.StdEncoding.EncodeToString(pad)}},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return gz.Bytes()
}
