package engine

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/testenv"
)

// TestRecordAppliedOnePatch: a successful apply is recorded on the durable
// inputs Secret in one write: the applied marker, the pinned digest and
// the files, image and identity it ran (three writes before).
func TestRecordAppliedOnePatch(t *testing.T) {
	env := testenv.Start(t, "../../..")
	ctx := context.Background()
	direct, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	var patches atomic.Int32
	c := interceptor.NewClient(direct, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			patches.Add(1)
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	r := &Reconciler{Kind: theTestKind, Client: c, Reader: c}
	obj := &infrav1.TerraformCluster{ObjectMeta: metav1.ObjectMeta{Name: "rec", Namespace: "default"}}
	main := []byte(`{"output":{"captf_inputs_hash":{"value":"h2:in"}}}`)
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: InputsName(r.kind().Short(), obj.Name), Namespace: "default",
			Annotations: map[string]string{infrav1.AnnotationImage: moduleImage, infrav1.AnnotationIdentity: "Secret/creds"}},
		Data: map[string][]byte{"main.tf.json": main, "terraform.tfvars.json": []byte(`{"size":"small"}`)},
	}
	if err := direct.Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "rec-apply-1", Namespace: "default", Annotations: map[string]string{annotationInputsHash: "h2:in"}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: containerName, Image: moduleImage}}}}}}
	digest := "sha256:" + strings.Repeat("a", 64)
	step := recordApplied{Digest: digest, Pin: true}
	if err := step.Apply(ctx, r, &StepContext{Obj: obj, Job: job}); err != nil {
		t.Fatal(err)
	}
	if n := patches.Load(); n != 1 {
		t.Errorf("%d writes to record the apply, want 1", n)
	}
	var got corev1.Secret
	if err := direct.Get(ctx, client.ObjectKeyFromObject(sec), &got); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		infrav1.AnnotationApplied:         "true",
		infrav1.AnnotationImageDigest:     digest,
		infrav1.AnnotationAppliedImage:    moduleImage + "@" + digest,
		infrav1.AnnotationAppliedIdentity: "Secret/creds",
	} {
		if got.Annotations[k] != want {
			t.Errorf("annotation %s = %q, want %q", k, got.Annotations[k], want)
		}
	}
	if string(got.Data[KeyAppliedMain]) != string(main) || string(got.Data[keyAppliedVars]) != `{"size":"small"}` {
		t.Errorf("the applied files: %q, %q", got.Data[KeyAppliedMain], got.Data[keyAppliedVars])
	}
	// Recorded already: no write.
	patches.Store(0)
	if err := step.Apply(ctx, r, &StepContext{Obj: obj, Job: job}); err != nil {
		t.Fatal(err)
	}
	if n := patches.Load(); n != 0 {
		t.Errorf("%d writes to record an apply recorded already, want 0", n)
	}
}
