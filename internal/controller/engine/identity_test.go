package engine

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/testenv"
)

// countingReader counts the reads of one Secret through it.
type countingReader struct {
	client.Reader
	key   client.ObjectKey
	reads int
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.Secret); ok && key == c.key {
		c.reads++
	}
	return c.Reader.Get(ctx, key, obj, opts...)
}

// TestCredentialsReadOncePerStart: the reconcile that starts a Job reads
// the identity's Secret from the API server once, for both the check that
// the object may use it and the per-run copy, which holds its keys.
func TestCredentialsReadOncePerStart(t *testing.T) {
	env := testenv.Start(t, "../../..")
	ctx := context.Background()
	c := env.Client
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cloud", Namespace: "default"}, Data: map[string][]byte{"KEY": []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	tc := &infrav1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "once", Namespace: "default"},
		Spec: infrav1.TerraformClusterSpec{RunnerSpec: infrav1.RunnerSpec{Image: moduleImage,
			IdentityRef: &infrav1.IdentityReference{Kind: infrav1.IdentityKindSecret, Name: "cloud"}}},
	}
	if err := c.Create(ctx, tc); err != nil {
		t.Fatal(err)
	}
	reader := &countingReader{Reader: c, key: client.ObjectKey{Namespace: "default", Name: "cloud"}}
	r := &Reconciler{Kind: theTestKind, Client: c, Reader: reader, RunnerImage: runnerImage, RetryBase: time.Second}
	var jobs []batchv1.Job
	for pass := 0; len(jobs) == 0; pass++ {
		if pass == 5 {
			t.Fatal("no Job started in 5 reconciles")
		}
		reader.reads = 0
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tc)}); err != nil {
			t.Fatal(err)
		}
		var err error
		if jobs, err = r.jobsOf(ctx, c, tc); err != nil {
			t.Fatal(err)
		}
	}
	if reader.reads != 1 {
		t.Errorf("the reconcile that started Job %s read the identity's Secret %d times, want 1", jobs[0].Name, reader.reads)
	}
	var creds corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: CredentialsName(jobs[0].Name)}, &creds); err != nil {
		t.Fatalf("per-run credentials: %v", err)
	}
	if string(creds.Data["KEY"]) != "v" {
		t.Errorf("per-run credentials hold keys %v", creds.Data)
	}
}
