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
	"github.com/captf/captf/internal/render"
	"github.com/captf/captf/internal/testenv"
	"github.com/captf/captf/internal/tfstate"
)

// TestAppliedKeptAtStart: a successful apply is recorded on the durable
// inputs Secret in one write (the applied marker, the pinned digest), and
// in none once it is recorded: what it ran stays as the Secret's current
// files. The next apply's start keeps those under the applied keys, with
// their image, pinned, and identity, because the state records their
// inputs hash; a start after an apply that never wrote the state keeps the
// earlier ones. (Before, every successful apply copied its files to the
// applied keys: a second write to the Secret per approved apply.)
func TestAppliedKeptAtStart(t *testing.T) {
	env := testenv.Start(t, "../../..")
	ctx := context.Background()
	direct := directClient(t, env)
	var patches atomic.Int32
	c := interceptor.NewClient(direct, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			patches.Add(1)
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	r := &Reconciler{Kind: theTestKind, Client: c, Reader: c}
	obj := &infrav1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "rec", Namespace: "default"},
		Spec: infrav1.TerraformClusterSpec{RunnerSpec: infrav1.RunnerSpec{Image: moduleImage,
			IdentityRef: &infrav1.IdentityReference{Kind: "Secret", Name: "creds"}}},
	}
	if err := direct.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	// Files that hash to inputs (bigState's states record sha256:inputs).
	files := func(inputs, size string) *render.Root {
		return &render.Root{
			MainTF: []byte(`{"output":{"captf_inputs_hash":{"value":"` + inputs + `"}}}`), Vars: []byte(`{"size":"` + size + `"}`),
			InputsHash: inputs, ApprovalHash: inputs,
		}
	}
	durable := func() *corev1.Secret {
		t.Helper()
		var s corev1.Secret
		if err := direct.Get(ctx, client.ObjectKey{Namespace: "default", Name: InputsName(r.kind().Short(), obj.Name)}, &s); err != nil {
			t.Fatal(err)
		}
		return &s
	}
	start := func(root *render.Root) {
		t.Helper()
		if err := r.writeDurableInputs(ctx, obj, root); err != nil {
			t.Fatal(err)
		}
	}
	digest := "sha256:" + strings.Repeat("a", 64)
	job := func(inputs string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "rec-apply", Namespace: "default", Annotations: map[string]string{annotationInputsHash: inputs}},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: containerName, Image: moduleImage}}}}}}
	}
	succeeded := func(what, inputs string, want int32) {
		t.Helper()
		patches.Store(0)
		if err := (recordApplied{Digest: digest, Pin: true}).Apply(ctx, r, &StepContext{Obj: obj, Job: job(inputs)}); err != nil {
			t.Fatal(err)
		}
		if n := patches.Load(); n != want {
			t.Errorf("%s: %d writes to record the apply, want %d", what, n, want)
		}
	}

	start(files("sha256:inputs", "small"))
	succeeded("the first apply", "sha256:inputs", 1)
	got := durable()
	for k, want := range map[string]string{infrav1.AnnotationApplied: "true", infrav1.AnnotationImageDigest: digest} {
		if got.Annotations[k] != want {
			t.Errorf("annotation %s = %q, want %q", k, got.Annotations[k], want)
		}
	}
	succeeded("the first apply, recorded already", "sha256:inputs", 0)

	// The state the first apply wrote records its inputs hash.
	suffix := StateSuffix("tfc", obj.Name)
	state := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: tfstate.SecretName(suffix), Namespace: "default", Labels: tfstate.Selector(suffix)},
		Data:       map[string][]byte{tfstate.DataKey: bigState(t, 1, 1024)},
	}
	if err := direct.Create(ctx, state); err != nil {
		t.Fatal(err)
	}
	kept := func(what string) {
		t.Helper()
		got := durable()
		if string(got.Data[KeyAppliedMain]) != string(files("sha256:inputs", "").MainTF) || string(got.Data[keyAppliedVars]) != `{"size":"small"}` {
			t.Errorf("%s: the applied files %q, %q; want the first apply's", what, got.Data[KeyAppliedMain], got.Data[keyAppliedVars])
		}
		for k, want := range map[string]string{
			infrav1.AnnotationAppliedImage:    moduleImage + "@" + digest,
			infrav1.AnnotationAppliedIdentity: "Secret/creds",
		} {
			if got.Annotations[k] != want {
				t.Errorf("%s: annotation %s = %q, want %q", what, k, got.Annotations[k], want)
			}
		}
	}
	patches.Store(0)
	start(files("sha256:second", "large"))
	if n := patches.Load(); n != 1 {
		t.Errorf("the second apply's start: %d writes, want 1", n)
	}
	kept("the second apply's start")
	if main := durable().Data["main.tf.json"]; string(main) != string(files("sha256:second", "").MainTF) {
		t.Errorf("the second apply's start wrote %s", main)
	}
	// The second apply fails before it writes the state (still the first
	// apply's): the third apply's start keeps the first apply's files.
	start(files("sha256:third", "huge"))
	kept("the third apply's start, the state still the first apply's")
	// The third apply succeeds: its files are the current ones already.
	succeeded("the third apply", "sha256:third", 0)
}
