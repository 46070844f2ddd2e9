package terraformcluster

import (
	"context"
	"sync/atomic"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/testenv"
)

// TestStatusWrittenOnlyWhenChanged calls Reconcile directly against the
// real API server and counts the status patches it sends: a reconcile that
// changes nothing (an idle re-check) sends none, one that changes the
// status still sends it. (The scale benchmark measured one empty patch per
// object per re-check before.)
func TestStatusWrittenOnlyWhenChanged(t *testing.T) {
	env := testenv.Start(t, "../../..")
	ctx := context.Background()
	direct, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	var statusPatches atomic.Int32
	c := interceptor.NewClient(direct, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if sub == "status" {
				statusPatches.Add(1)
			}
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	r := &engine.Reconciler{Kind: Kind, Client: c, Reader: direct, RunnerImage: runnerImage}

	// Inputs that cannot be rendered yet: the Secret is missing.
	tc := &infrav1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "quiet", Namespace: "default"},
		Spec: infrav1.TerraformClusterSpec{RunnerSpec: infrav1.RunnerSpec{
			Image: moduleImage, ApplyPolicy: infrav1.ApplyManual,
			Variables: []infrav1.Variable{
				{Name: "size", Value: &apiextensionsv1.JSON{Raw: []byte(`"small"`)}},
				{Name: "token", ValueFrom: &infrav1.VariableSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "later"}, Key: "token"}}},
			},
		}},
	}
	if err := direct.Create(ctx, tc); err != nil {
		t.Fatal(err)
	}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tc)}
	reconcile := func(want int32, why string) {
		t.Helper()
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatalf("%s: reconcile: %v", why, err)
		}
		if got := statusPatches.Load(); got != want {
			t.Errorf("%s: %d status patches in all, want %d", why, got, want)
		}
	}

	reconcile(1, "first reconcile: the InvalidInputs condition is new")
	if err := direct.Get(ctx, req.NamespacedName, tc); err != nil {
		t.Fatal(err)
	}
	if c := condition(tc, infrav1.ConditionApplyJobSucceeded); c == nil || c.Reason != engine.ReasonInvalidInputs {
		t.Fatalf("condition %+v, want reason %s", c, engine.ReasonInvalidInputs)
	}
	rv := tc.ResourceVersion
	reconcile(1, "re-check with nothing new")
	reconcile(1, "another re-check with nothing new")
	if err := direct.Get(ctx, req.NamespacedName, tc); err != nil {
		t.Fatal(err)
	}
	if tc.ResourceVersion != rv {
		t.Errorf("the object changed on a re-check with nothing new: resourceVersion %s, was %s", tc.ResourceVersion, rv)
	}

	// The Secret appears: the next reconcile starts the first apply and
	// writes its status.
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "later", Namespace: "default"}, Data: map[string][]byte{"token": []byte(canary)}}
	if err := direct.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	reconcile(2, "new inputs start a Job")
	if err := direct.Get(ctx, req.NamespacedName, tc); err != nil {
		t.Fatal(err)
	}
	if tc.Status.ActiveJob == nil || tc.Status.ActiveJob.Operation != infrav1.OperationApply {
		t.Fatalf("active Job %+v, want the first apply", tc.Status.ActiveJob)
	}
	var job batchv1.Job
	if err := direct.Get(ctx, client.ObjectKey{Namespace: "default", Name: tc.Status.ActiveJob.Name}, &job); err != nil {
		t.Errorf("the recorded Job: %v", err)
	}
}
