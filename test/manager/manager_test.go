// Package manager runs the manager binary, as a Deployment would, against a
// real API server: it serves its probes and turns a TerraformCluster into
// its plan key Secret and a runner Job. (No node runs the Job here; the
// reconciler's flows are tested in internal/controller.)
package manager

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/testenv"
)

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func TestManagerBinary(t *testing.T) {
	env := testenv.Start(t, "../..")
	ctx := context.Background()
	bin := filepath.Join(t.TempDir(), "manager")
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/manager").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	probes := freePort(t)
	cmd := exec.Command(bin, "--runner-image=example.test/captf-runner:dev", "--metrics-bind-address=0",
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probes), "--leader-elect", "--leader-election-namespace=default",
		"--zap-log-level=debug")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Kubeconfig(t))
	log, err := os.Create(filepath.Join(t.TempDir(), "manager.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Stop the manager and wait for it before the API server stops.
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})

	waitFor(t, "/readyz", func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", probes))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, log.Name())

	const canary = "CANARY-MANAGER-LOG-3c9d"
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "token", Namespace: "default"}, Data: map[string][]byte{"token": []byte(canary)}}
	if err := env.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	tc := &infrav1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke", Namespace: "default"},
		Spec: infrav1.TerraformClusterSpec{RunnerSpec: infrav1.RunnerSpec{
			Image: "example.test/module:1",
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
	waitFor(t, "a plan key Secret and an apply Job", func() bool {
		var s corev1.Secret
		if env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "captf-plankey-tfc-smoke"}, &s) != nil {
			return false
		}
		var jobs batchv1.JobList
		if env.Client.List(ctx, &jobs, client.InNamespace("default"), client.MatchingLabels{infrav1.LabelOwnerName: "smoke"}) != nil {
			return false
		}
		return len(jobs.Items) == 1 && jobs.Items[0].Labels["captf.io/operation"] == "apply"
	}, log.Name())

	// The manager's log (at its most verbose) never holds a variable value.
	b, err := os.ReadFile(log.Name())
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 {
		t.Fatal("the manager logged nothing: the check below proves nothing")
	}
	if strings.Contains(string(b), canary) {
		t.Error("a variable value reached the manager's log")
	}
}

func waitFor(t *testing.T, what string, ok func() bool, logPath string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logPath)
			t.Fatalf("%s: not within 60s; manager log:\n%s", what, b)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
