package manager

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"

	"github.com/captf/captf/internal/managertest"
	"github.com/captf/captf/internal/testenv"
)

// TestMetricsSecure scrapes the manager binary's metrics endpoint as
// config/default and config/prometheus set it up: HTTPS, and only for a
// caller whose token the API server accepts and whom it allows a get of
// /metrics, which the ClusterRole of config/rbac/metrics_reader_role.yaml
// grants. A caller without a token, or whose ServiceAccount is not bound
// to it, is refused.
func TestMetricsSecure(t *testing.T) {
	env := testenv.Start(t, "../..")
	ctx := context.Background()
	port := managertest.FreePort(t)
	m := managertest.Start(t, managertest.Build(t, "../.."), env.Kubeconfig(t),
		"--runner-image=example.test/captf-runner:dev", fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", port))

	// The ClusterRole as config/rbac has it, bound to one ServiceAccount.
	role := testenv.Objects(t, "../../config/rbac/metrics_reader_role.yaml")[0]
	if err := env.Client.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"prometheus", "stranger"} {
		if err := env.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Client.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-metrics"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.GetName()},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: "default"}},
	}); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	token := func(sa string) string {
		t.Helper()
		tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("a token of %s: %v", sa, err)
		}
		return tr.Status.Token
	}
	// The certificate is the self-signed one the manager made at start.
	httpc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	scrape := func(scheme, bearer string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s://127.0.0.1:%d/metrics", scheme, port), nil)
		if err != nil {
			return 0, "", err
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := httpc.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	// A run for the manager to count: an object's first apply Job, which
	// fails with no report (no node runs it here).
	tc := &infrav1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "counted", Namespace: "default"},
		Spec:       infrav1.TerraformClusterSpec{RunnerSpec: infrav1.RunnerSpec{Image: "example.test/module:1"}},
	}
	if err := env.Client.Create(ctx, tc); err != nil {
		t.Fatal(err)
	}
	var job batchv1.Job
	m.WaitFor(t, "the first apply Job", func() bool {
		var jobs batchv1.JobList
		if env.Client.List(ctx, &jobs, client.InNamespace("default"), client.MatchingLabels{infrav1.LabelOwnerName: tc.Name}) != nil || len(jobs.Items) != 1 {
			return false
		}
		job = jobs.Items[0]
		return true
	})
	now := metav1.Now()
	job.Status.StartTime = &now
	job.Status.Failed = 1
	job.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: now, LastProbeTime: now},
		{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: now, LastProbeTime: now},
	}
	if err := env.Client.Status().Update(ctx, &job); err != nil {
		t.Fatal(err)
	}

	allowed := token("prometheus")
	const counted = `captf_runs_total{kind="TerraformCluster",operation="apply",outcome="no-report"} 1`
	var code int
	var body string
	m.WaitFor(t, "the scrape to count the failed run", func() bool {
		code, body, err = scrape("https", allowed)
		return err == nil && code == http.StatusOK && strings.Contains(body, counted)
	})
	// controller-runtime's families and client-go's beside the manager's.
	for _, family := range []string{"controller_runtime_reconcile_total", "rest_client_requests_total"} {
		if !strings.Contains(body, "\n# TYPE "+family+" ") {
			t.Errorf("the scrape has no %s", family)
		}
	}
	if code, _, err := scrape("https", ""); err != nil || code != http.StatusUnauthorized {
		t.Errorf("a scrape without a token: %d, %v; want 401", code, err)
	}
	if code, _, err := scrape("https", token("stranger")); err != nil || code != http.StatusForbidden {
		t.Errorf("a scrape by a ServiceAccount not bound to %s: %d, %v; want 403", role.GetName(), code, err)
	}
	if code, _, err := scrape("http", allowed); err == nil && code == http.StatusOK {
		t.Errorf("plain HTTP is served: %d", code)
	}
}
