package engine

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
)

// The manager's cache holds the data of its own Secrets only (labelled
// captf.io/managed=true: durable inputs, plan keys, a run's inputs and
// credentials, each small), but its state backups. Of every other Secret —
// terraform's states and their backups, variable sources, identities'
// Secrets, bootstrap data — it holds the metadata and, in place of the
// data, a keyed digest of it: a watch still tells when the data changed,
// and no state of any size sits in memory.
//
// The Reconciler's client (secretFiller) gives a Secret read through it
// its data back, read from the API server once per change and kept only
// for the Secrets the manager reads. A state is read apart (cachedState),
// and only what the manager needs of it is kept.

// annotationDataDigest holds, on a Secret in the cache only, the keyed
// digest of the data the cache left out. It is never written: a Secret
// read through the Reconciler's client gets its data back and loses the
// annotation; one read through metadataReader keeps it and is only
// looked at, never written back.
const annotationDataDigest = "captf.io/cached-data-digest"

// dataKey keys the digests of the data, for this process only: a digest
// tells whether data changed and nothing about what it is.
var dataKey = func() []byte {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		// crypto/rand.Read never fails (Go 1.24 and later).
		panic(err)
	}
	return k
}()

// dataDigest is the keyed digest of a Secret's data.
func dataDigest(data map[string][]byte) string {
	mac := hmac.New(sha256.New, dataKey)
	var n [8]byte
	for _, k := range slices.Sorted(maps.Keys(data)) {
		for _, b := range [][]byte{[]byte(k), data[k]} {
			binary.BigEndian.PutUint64(n[:], uint64(len(b)))
			mac.Write(n[:])
			mac.Write(b)
		}
	}
	return hex.EncodeToString(mac.Sum(nil))
}

// stripSecretData is the cache's transform (a TransformFunc) of a Secret:
// the data of any Secret but the manager's own, and of its state backups,
// is left out, its digest kept. Managed fields are left out of every
// Secret: the manager never reads them.
func stripSecretData(in any) (any, error) {
	s, ok := in.(*corev1.Secret)
	if !ok {
		return in, nil
	}
	s.ManagedFields = nil
	if _, backup := s.Labels[infrav1.LabelStateBackup]; s.Labels[infrav1.LabelManaged] == "true" && !backup {
		return s, nil
	}
	if _, done := s.Annotations[annotationDataDigest]; done && s.Data == nil {
		// Transformed before (a transform may see an object twice).
		return s, nil
	}
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[annotationDataDigest] = dataDigest(s.Data)
	s.Data, s.StringData = nil, nil
	return s, nil
}

// DataChanged reports whether an update of a Secret, as the cache saw it,
// changed its data.
func DataChanged(old, now *corev1.Secret) bool {
	return old.Annotations[annotationDataDigest] != now.Annotations[annotationDataDigest] ||
		!maps.EqualFunc(old.Data, now.Data, bytes.Equal)
}

// secretFiller is a client whose reads go to the cache, except that a
// Secret the cache holds without its data gets it back: from what it read
// before while the digest is the same, from the API server otherwise.
type secretFiller struct {
	client.Client
	api client.Reader

	mu   sync.Mutex
	data map[client.ObjectKey]filled
}

// filled is the data of a Secret as the API server returned it, and its
// digest.
type filled struct {
	digest string
	data   map[string][]byte
}

func newSecretFiller(c client.Client, api client.Reader) *secretFiller {
	return &secretFiller{Client: c, api: api, data: map[client.ObjectKey]filled{}}
}

func (f *secretFiller) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := f.Client.Get(ctx, key, obj, opts...); err != nil {
		if apierrors.IsNotFound(err) {
			f.forget(key)
		}
		return err
	}
	if s, ok := obj.(*corev1.Secret); ok {
		return f.fill(ctx, s)
	}
	return nil
}

func (f *secretFiller) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := f.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	if l, ok := list.(*corev1.SecretList); ok {
		for i := range l.Items {
			if err := f.fill(ctx, &l.Items[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// fill gives s, a copy from the cache, the data the cache left out.
func (f *secretFiller) fill(ctx context.Context, s *corev1.Secret) error {
	digest, stripped := s.Annotations[annotationDataDigest]
	if !stripped {
		return nil
	}
	delete(s.Annotations, annotationDataDigest)
	key := client.ObjectKeyFromObject(s)
	f.mu.Lock()
	known, ok := f.data[key]
	f.mu.Unlock()
	if ok && known.digest == digest {
		s.Data = maps.Clone(known.data)
		return nil
	}
	var fresh corev1.Secret
	if err := f.api.Get(ctx, key, &fresh); err != nil {
		if apierrors.IsNotFound(err) {
			f.forget(key)
		}
		return err
	}
	// The API server's data may be newer than the cache's: it is what is
	// kept, under its own digest.
	f.mu.Lock()
	f.data[key] = filled{digest: dataDigest(fresh.Data), data: fresh.Data}
	f.mu.Unlock()
	s.Data = maps.Clone(fresh.Data)
	return nil
}

func (f *secretFiller) forget(key client.ObjectKey) {
	f.mu.Lock()
	delete(f.data, key)
	f.mu.Unlock()
}

// fillSecrets makes r's client a secretFiller over the manager's, which
// forgets a Secret's data when the Secret is deleted.
func (r *Reconciler) fillSecrets(mgr ctrl.Manager) error {
	if _, done := r.Client.(*secretFiller); done {
		return nil
	}
	f := newSecretFiller(r.Client, r.Reader)
	inf, err := mgr.GetCache().GetInformer(context.Background(), &corev1.Secret{})
	if err != nil {
		return fmt.Errorf("informer of Secrets: %w", err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if s, ok := obj.(*corev1.Secret); ok {
			f.forget(client.ObjectKeyFromObject(s))
		}
	}}); err != nil {
		return fmt.Errorf("informer of Secrets: %w", err)
	}
	r.Client = f
	return nil
}

// cached is the client the cache answers without filling anything in.
func (f *secretFiller) cached() client.Reader { return f.Client }

// metadataReader reads from the cache without filling in any Secret's
// data: for what needs a Secret's existence, labels or owners only, which
// then costs no request and keeps no data.
func (r *Reconciler) metadataReader() client.Reader {
	if f, ok := r.Client.(*secretFiller); ok {
		return f.cached()
	}
	return r.Client
}
