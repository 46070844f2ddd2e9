// Package manager runs the manager binary, as a Deployment would, against a
// real API server: it serves its probes and turns a TerraformCluster into
// its plan key Secret and a runner Job. (No node runs the Job here; the
// reconciler's flows are tested in internal/controller.)
package manager

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/managertest"
	"github.com/captf/captf/internal/testenv"
)

func TestManagerBinary(t *testing.T) {
	env := testenv.Start(t, "../..")
	ctx := context.Background()
	pprof := managertest.FreePort(t)
	m := managertest.Start(t, managertest.Build(t, "../.."), env.Kubeconfig(t),
		"--runner-image=example.test/captf-runner:dev", "--metrics-bind-address=0",
		"--leader-elect", "--leader-election-namespace=default", "--zap-log-level=debug",
		fmt.Sprintf("--pprof-bind-address=127.0.0.1:%d", pprof))

	const canary = "CANARY-MANAGER-LOG-3c9d"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "token", Namespace: "default"}, Data: map[string][]byte{"token": []byte(canary)}}
	if err := env.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	const credential = "CANARY-CREDENTIAL-LOG-8e21"
	cloud := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cloud", Namespace: "default"}, Data: map[string][]byte{"AWS_SECRET_ACCESS_KEY": []byte(credential)}}
	if err := env.Client.Create(ctx, cloud); err != nil {
		t.Fatal(err)
	}
	tc := &infrav1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke", Namespace: "default"},
		Spec: infrav1.TerraformClusterSpec{RunnerSpec: infrav1.RunnerSpec{
			Image:       "example.test/module:1",
			IdentityRef: &infrav1.IdentityReference{Kind: infrav1.IdentityKindSecret, Name: "cloud"},
			Variables: []infrav1.Variable{
				{Name: "size", Value: &apiextensionsv1.JSON{Raw: []byte(`"small"`)}},
				{Name: "token", ValueFrom: &infrav1.VariableSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "token"}, Key: "token"}}},
			},
		}},
	}
	if err := env.Client.Create(ctx, tc); err != nil {
		t.Fatal(err)
	}
	m.WaitFor(t, "a plan key Secret and an apply Job", func() bool {
		var s corev1.Secret
		if env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "captf-plankey-tfc-smoke"}, &s) != nil {
			return false
		}
		var jobs batchv1.JobList
		if env.Client.List(ctx, &jobs, client.InNamespace("default"), client.MatchingLabels{infrav1.LabelOwnerName: "smoke"}) != nil {
			return false
		}
		return len(jobs.Items) == 1 && jobs.Items[0].Labels["captf.io/operation"] == "apply"
	})
	// The Job's credentials Secret is owned by the Job, so it comes after it.
	m.WaitFor(t, "the Job's credentials Secret (else the manager handled no credential and the check below proves nothing)", func() bool {
		var jobs batchv1.JobList
		if env.Client.List(ctx, &jobs, client.InNamespace("default"), client.MatchingLabels{infrav1.LabelOwnerName: "smoke"}) != nil || len(jobs.Items) != 1 {
			return false
		}
		var cred corev1.Secret
		return env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "captf-cred-" + jobs.Items[0].Name}, &cred) == nil &&
			string(cred.Data["AWS_SECRET_ACCESS_KEY"]) == credential
	})

	// --pprof-bind-address serves the runtime's profiles.
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap?debug=1", pprof))
	if err != nil {
		t.Fatal(err)
	}
	heap, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(heap), "heap profile:") {
		t.Errorf("GET /debug/pprof/heap: %d %.80q (%v), want the heap profile", resp.StatusCode, heap, err)
	}

	// The manager's log (at its most verbose) never holds a variable value
	// or a credential.
	b := m.Log(t)
	if len(b) == 0 {
		t.Fatal("the manager logged nothing: the check below proves nothing")
	}
	if strings.Contains(string(b), canary) {
		t.Error("a variable value reached the manager's log")
	}
	if strings.Contains(string(b), credential) {
		t.Error("a credential reached the manager's log")
	}
}
