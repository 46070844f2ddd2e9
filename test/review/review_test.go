// Package review tests kubectl captf review in a real browser (Debian's
// Chromium, headless, driven by chromedp) against a real API server, the
// manager binary and the test node running real terraform: the page a
// reviewer approves from. One API server and one browser serve every step.
package review

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/kubectlcaptf"
	"github.com/captf/captf/internal/managertest"
	"github.com/captf/captf/internal/testenv"
	"github.com/captf/captf/internal/testnode"
	"github.com/captf/captf/internal/tftest"
)

var updateDocs = flag.Bool("update-docs", false, "write the screenshots to docs/images")

const (
	moduleImage = "registry.example.com/captf-review:v1"
	// machineImage holds the quickstart's machine module.
	machineImage = "registry.example.com/captf-review-machine:v1"
	runnerImage  = "ghcr.io/captf/captf-runner:v0.1.0"
	// canary is the value of the module's sensitive variable: terraform
	// hides it in the Job's log, captf everywhere.
	canary = "CANARY-REVIEW-PAGE-5d1e"
	// freeze is the message of the admission policy that refuses approvals.
	freeze = "approvals are frozen until the release is out (ask #platform)"
)

// chromium is the browser binary: $CAPTF_CHROMIUM (hack/install-chromium.sh
// prints it; make test sets it), else Debian's.
func chromium(t *testing.T) string {
	t.Helper()
	path := os.Getenv("CAPTF_CHROMIUM")
	if path == "" {
		path = "/usr/bin/chromium"
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("no Chromium (%v): run hack/install-chromium.sh (make test does)", err)
	}
	return path
}

// browser starts one headless Chromium for the test, with a fresh
// profile, and returns a tab's context.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true), // root, in a container
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium: %v", err)
	}
	return ctx
}

// do runs steps in the browser, failing the test after a minute.
func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	get(t, ctx, what, chromedp.Steps(steps...))
}

// get runs a in the browser and returns its value, failing the test after
// a minute.
func get[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		// Read the page for a few seconds more, to say where it stood.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		page, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
		t.Fatalf("%s: %v\nthe page: %.3000s", what, err, page)
	}
	return v
}

// css is a CSS selector.
func css(selector string) chromedp.CSS { return chromedp.CSS(selector) }

// lockedBuffer is an io.Writer the review command writes to while the test
// reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var printedURL = regexp.MustCompile(`http://127\.0\.0\.1:[0-9]+/\?token=[A-Za-z0-9_-]{43}`)

// review runs kubectl captf review in this process, as kubeconfig's user,
// and returns the URL it printed.
func review(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &lockedBuffer{}
	cmd := kubectlcaptf.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: out})
	cmd.SetArgs(append([]string{"review", "--no-browser", "--kubeconfig", kubeconfig}, args...))
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("kubectl captf review: %v\n%s", err, out.String())
		}
	})
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if u := printedURL.FindString(out.String()); u != "" {
			return u
		}
		select {
		case err := <-done:
			t.Fatalf("kubectl captf review ended: %v\n%s", err, out.String())
		default:
		}
	}
	t.Fatalf("kubectl captf review printed no URL:\n%s", out.String())
	return ""
}

// addresses are the addresses of a plan's entries "<address> (<action>)".
func addresses(entries []string) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e[:strings.LastIndex(e, " (")])
	}
	return out
}

// captf runs kubectl captf in this process, as kubeconfig's user, and
// returns what it printed.
func captf(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	cmd := kubectlcaptf.NewCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	cmd.SetArgs(append(args, "--kubeconfig", kubeconfig))
	if err := cmd.Execute(); err != nil {
		t.Fatalf("kubectl captf %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

func TestReviewPage(t *testing.T) {
	ctx := context.Background()
	tab := browser(t)
	env := testenv.StartWithClusterAPI(t, "../..")
	admin := env.Kubeconfig(t)

	tf := tftest.Terraform(t)
	runtimeDir, runnerDir := t.TempDir(), t.TempDir()
	if err := os.Symlink(tf.Path, filepath.Join(runtimeDir, "terraform")); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("go", "build", "-o", filepath.Join(runnerDir, "captf-runner"), "../../cmd/captf-runner").CombinedOutput(); err != nil {
		t.Fatalf("build captf-runner: %v\n%s", err, out)
	}
	module, _ := filepath.Abs("../../examples/kubernetes/module")
	machineModule, _ := filepath.Abs("../../examples/kubernetes/machine")
	node := &testnode.Node{Client: env.Client, Namespace: "default",
		Images: map[string][]testnode.Image{
			moduleImage:  {{Path: infrav1.PathModule, Dir: module}, {Path: infrav1.PathRuntime, Dir: runtimeDir}},
			machineImage: {{Path: infrav1.PathModule, Dir: machineModule}, {Path: infrav1.PathRuntime, Dir: runtimeDir}},
			runnerImage:  {{Path: "/captf-runner", Dir: runnerDir}},
		},
		Env: append(tftest.Env(t), "KUBE_IN_CLUSTER_CONFIG=false", "KUBE_CONFIG_PATH="+admin),
	}
	node.ServeLogs(t, "node-1")
	node.Start(t)
	managertest.Start(t, managertest.Build(t, "../.."), admin, "--runner-image="+runnerImage, "--metrics-bind-address=0")
	env.RunClusterAPI(t)

	// alice approves with the sample approver role, and may list machines.
	env.CreateFromFile(t, "../../config/samples/terraformplan-rbac.yaml")
	for _, o := range []client.Object{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "machine-reader", Namespace: "default"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{infrav1.GroupVersion.Group}, Resources: []string{"terraformmachines"}, Verbs: []string{"get", "list", "watch"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "machine-reader", Namespace: "default"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "machine-reader"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "demo-token", Namespace: "default"}, StringData: map[string]string{"token": canary}},
	} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	alice := env.UserKubeconfig(t, "alice", "platform-approvers")

	tc := &infrav1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "default"},
		Spec: infrav1.TerraformClusterSpec{RunnerSpec: infrav1.RunnerSpec{
			Image:       moduleImage,
			ApplyPolicy: infrav1.ApplyManual,
			Variables: []infrav1.Variable{
				{Name: "environment", Value: &apiextensionsv1.JSON{Raw: []byte(`"demo"`)}},
				{Name: "replicas", Value: &apiextensionsv1.JSON{Raw: []byte(`3`)}},
				{Name: "api_token", ValueFrom: &infrav1.VariableSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "demo-token"}, Key: "token"}}},
			},
		}},
	}
	if err := env.Client.Create(ctx, tc); err != nil {
		t.Fatal(err)
	}
	wait(t, "the first apply", func() bool {
		return env.Client.Get(ctx, client.ObjectKeyFromObject(tc), tc) == nil && tc.Status.LastRun != nil && tc.Status.LastRun.Succeeded
	})

	pageURL := review(t, alice, "-n", "default")
	u, err := url.Parse(pageURL)
	if err != nil {
		t.Fatal(err)
	}
	token := u.Query().Get("token")
	shots := t.TempDir()
	if *updateDocs {
		shots = "../../docs/images"
	}

	// The list: empty, then the plan that starts waiting appears without
	// a reload (a reload would drop the marker set here).
	do(t, tab, "open the list", chromedp.Navigate(pageURL), chromedp.WaitVisible(css(`[data-test=empty]`)))
	mark := chromedp.Evaluate[bool](`window.notReloaded = true`)
	notReloaded := chromedp.Evaluate[bool](`window.notReloaded === true`)
	get(t, tab, "mark the page", mark)
	// Three workers become two, and the environment's name changes: a plan
	// that deletes one worker and updates the rest.
	patch := []byte(`[{"op":"replace","path":"/spec/variables/0/value","value":"demo2"},{"op":"replace","path":"/spec/variables/1/value","value":2}]`)
	if err := env.Client.Patch(ctx, tc, client.RawPatch("application/json-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
	var plan infrav1.TerraformPlan
	wait(t, "a plan that waits for approval", func() bool {
		var plans infrav1.TerraformPlanList
		if env.Client.List(ctx, &plans, client.InNamespace("default"), client.MatchingLabels{infrav1.LabelPlanPhase: string(infrav1.PlanPending)}) != nil || len(plans.Items) != 1 {
			return false
		}
		plan = plans.Items[0]
		return true
	})
	row := fmt.Sprintf(`tr[data-test=row][data-name=%q]`, plan.Name)
	do(t, tab, "the waiting plan on the list", chromedp.WaitVisible(css(row)))
	if !get(t, tab, "the marker", notReloaded) {
		t.Error("the list page reloaded to show the new plan; it should have been updated in place")
	}
	listHTML := get(t, tab, "the list's HTML", chromedp.OuterHTML(css("html")))
	s := plan.Spec.Summary
	for _, want := range []string{"TerraformCluster", "demo", string(plan.Spec.Reason),
		fmt.Sprintf("+%d", s.Create), fmt.Sprintf("~%d", s.Update), fmt.Sprintf("-/+%d", s.Replace), fmt.Sprintf("-%d", s.Delete)} {
		if !strings.Contains(listHTML, want) {
			t.Errorf("the list's row lacks %q", want)
		}
	}
	screenshot(t, tab, filepath.Join(shots, "review-list.png"))

	// The plan's page: every address and action, the hashes, the command,
	// terraform's log; no value.
	do(t, tab, "open the plan's page", chromedp.Click(css(row+` a`)), chromedp.WaitVisible(css(`[data-test=resources]`)))
	planHTML := get(t, tab, "the plan's HTML", chromedp.OuterHTML(css("html")))
	command := get(t, tab, "the command", chromedp.Text(css(`[data-test=command]`)))
	logCommand := get(t, tab, "the log's command", chromedp.Text(css(`[data-test=log-command]`)))
	if len(s.Resources) == 0 || s.Delete == 0 {
		t.Fatalf("the plan deletes nothing or records no resource: %+v", s)
	}
	rows := get(t, tab, "the resources table", chromedp.Evaluate[[]string](
		`[...document.querySelectorAll("[data-test=resource]")].map(r => r.cells[0].textContent + " (" + r.cells[1].textContent.replace("⚠ ", "") + ")")`))
	if len(rows) != len(s.Resources) {
		t.Errorf("the page shows %d resources, the plan records %d: %q", len(rows), len(s.Resources), rows)
	}
	for _, want := range s.Resources {
		if !slices.Contains(rows, want) {
			t.Errorf("the page lacks the resource %q; it shows %q", want, rows)
		}
	}
	if len(rows) > 0 && !strings.HasSuffix(rows[0], "(delete)") {
		t.Errorf("the first row is not the destructive one: %q", rows)
	}
	// The attributes each change changes, by name, from the plan Job's
	// log: a worker's and the network's input (their names) and output
	// (known after apply); nothing for the deleted worker.
	attributes := get(t, tab, "the changed attributes", chromedp.Evaluate[map[string]string](
		`Object.fromEntries([...document.querySelectorAll("[data-test=resource]")].map(r => [r.cells[0].textContent, (r.querySelector("[data-test=attributes]") || {textContent: "(no column)"}).textContent]))`))
	for _, e := range s.Resources {
		address, action := e[:strings.LastIndex(e, " (")], e[strings.LastIndex(e, " (")+2:len(e)-1]
		want := "input, output"
		if action == "delete" {
			want = "—"
		}
		if got := attributes[address]; got != want {
			t.Errorf("the page shows %q as the attributes that change of %s (%s), want %q", got, address, action, want)
		}
	}
	for _, want := range []string{plan.Spec.PlanHash, plan.Spec.InputsHash} {
		if !strings.Contains(planHTML, want) {
			t.Errorf("the plan's page lacks %q", want)
		}
	}
	if want := "kubectl captf approve " + plan.Name + " -n default --plan-hash " + plan.Spec.PlanHash; command != want {
		t.Errorf("the command on the page is %q, want %q", command, want)
	}
	if want := "kubectl captf logs " + plan.Name + " -n default"; logCommand != want {
		t.Errorf("the log's command on the page is %q, want %q", logCommand, want)
	}
	for name, html := range map[string]string{"list": listHTML, "plan": planHTML} {
		if i := strings.Index(html, canary); i >= 0 {
			t.Errorf("the %s page shows the sensitive variable's value: %s", name, html[max(0, i-300):i+40])
		}
		if !strings.Contains(html, "?token="+token) {
			t.Errorf("the %s page's links lack the token", name)
		}
	}
	screenshot(t, tab, filepath.Join(shots, "review-plan.png"))

	// terraform's log of the plan: the worker it deletes shows its old
	// output, where terraform prints the token in clear; the log hides it.
	planLog := captf(t, admin, "logs", plan.Name, "-n", "default")
	if !strings.Contains(planLog, "Plan: ") {
		t.Errorf("kubectl captf logs printed no plan:\n%s", planLog)
	}
	if i := strings.Index(planLog, canary); i >= 0 {
		t.Errorf("kubectl captf logs shows the sensitive variable's value: %s", planLog[max(0, i-300):i+40])
	}
	// The page shows the same log, as alice reads it.
	pageLog := get(t, tab, "the plan's log", chromedp.Text(css(`[data-test=plan-log]`)))
	for _, want := range append([]string{"Plan: ", "(sensitive value)"}, addresses(s.Resources)...) {
		if !strings.Contains(pageLog, want) {
			t.Errorf("the plan's log on the page lacks %q:\n%s", want, pageLog)
		}
	}
	if strings.TrimSpace(pageLog) != strings.TrimSpace(planLog) {
		t.Errorf("the plan's log on the page is not what kubectl captf logs prints:\n%s\n---\n%s", pageLog, planLog)
	}

	// An approval that an admission policy refuses: the page shows the
	// policy's message, and nothing is approved.
	refuseApprovals(t, env, &plan)
	do(t, tab, "approve against the policy", chromedp.Click(css(`[data-test=approve]`)), chromedp.WaitVisible(css(`[data-test=confirm]`)))
	if hash := get(t, tab, "the confirmation's hash", chromedp.Text(css(`[data-test=confirm-hash]`))); hash != plan.Spec.PlanHash {
		t.Errorf("the confirmation shows the hash %q, want %q", hash, plan.Spec.PlanHash)
	}
	do(t, tab, "confirm", chromedp.Click(css(`[data-test=confirm]`)), chromedp.WaitVisible(css(`[data-test=error]`)))
	refused := get(t, tab, "the refusal", chromedp.Text(css(`[data-test=error]`)))
	t.Logf("the page refused the approval: %s", refused)
	if !strings.Contains(refused, freeze) || !strings.Contains(refused, "ValidatingAdmissionPolicy") {
		t.Errorf("the refusal on the page: %q, want the policy's message %q", refused, freeze)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(&plan), &plan); err != nil || plan.Spec.Approved {
		t.Fatalf("after the refusal the plan is approved %v by %q (%v)", plan.Spec.Approved, plan.Spec.ApprovedBy, err)
	}

	// The policy lifted, Approve approves as alice and the page follows the
	// plan to Applied.
	allowApprovals(t, env, &plan)
	do(t, tab, "approve", chromedp.Click(css(`[data-test=confirm]`)), chromedp.WaitVisible(css(`[data-test=phase]`)))
	get(t, tab, "mark the page", mark)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(&plan), &plan); err != nil || !plan.Spec.Approved || plan.Spec.ApprovedBy != "alice" {
		t.Fatalf("after Approve: approved %v by %q (%v), want by alice", plan.Spec.Approved, plan.Spec.ApprovedBy, err)
	}
	wait(t, "the page to show Applied", func() bool {
		// One read in the page: the live part may be replaced between the
		// steps of a query.
		return get(t, tab, "the phase", chromedp.Evaluate[string](`document.querySelector("[data-test=phase]").textContent`)) == string(infrav1.PlanApplied)
	})
	if !get(t, tab, "the marker", notReloaded) {
		t.Error("the plan's page reloaded to show Applied; it should have been updated in place")
	}
	// The apply's log, on the page and from kubectl captf logs --apply.
	applyLog := captf(t, admin, "logs", plan.Name, "-n", "default", "--apply")
	var pageApplyLog string
	wait(t, "the apply's log on the page", func() bool {
		pageApplyLog = get(t, tab, "the apply's log", chromedp.Evaluate[string](`(document.querySelector("[data-test=apply-log]") || {textContent: ""}).textContent`))
		return strings.Contains(pageApplyLog, "Apply complete!")
	})
	for name, log := range map[string]string{"kubectl captf logs --apply": applyLog, "the page's apply log": pageApplyLog} {
		if !strings.Contains(log, "Apply complete!") || !strings.Contains(log, "Destruction complete") {
			t.Errorf("%s is not the apply's log:\n%s", name, log)
		}
		if i := strings.Index(log, canary); i >= 0 {
			t.Errorf("%s shows the sensitive variable's value: %s", name, log[max(0, i-300):i+40])
		}
	}
	if log := get(t, tab, "the plan's HTML", chromedp.OuterHTML(css("html"))); strings.Contains(log, canary) {
		t.Errorf("the applied plan's page shows the sensitive variable's value")
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(&plan), &plan); err != nil || plan.Status.Phase != infrav1.PlanApplied {
		t.Errorf("the TerraformPlan is %q (%v), the page showed Applied", plan.Status.Phase, err)
	}

	machinePlanPage(t, env, tab, pageURL, reviewedMachine(t, env))

	// Requests a page of this server never makes are refused.
	probe := func(method, target string, body io.Reader, header map[string]string) (int, string) {
		req, err := http.NewRequest(method, target, body)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		if host, ok := header["Host"]; ok {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	base := u.Scheme + "://" + u.Host
	if code, body := probe("GET", base+"/", nil, nil); code != http.StatusForbidden {
		t.Errorf("GET / without the token: %d %q", code, body)
	}
	if code, body := probe("GET", pageURL, nil, map[string]string{"Origin": "http://evil.example"}); code != http.StatusForbidden {
		t.Errorf("GET / with a foreign Origin: %d %q", code, body)
	}
	if code, body := probe("GET", pageURL, nil, map[string]string{"Host": "rebound.example:" + u.Port()}); code != http.StatusForbidden {
		t.Errorf("GET / for a foreign Host (DNS rebinding): %d %q", code, body)
	}
	form := url.Values{"plan-hash": {plan.Spec.PlanHash}}.Encode()
	if code, body := probe("POST", base+"/plans/default/"+plan.Name+"/approve?token="+token, strings.NewReader(form),
		map[string]string{"Origin": base, "Content-Type": "application/x-www-form-urlencoded"}); code != http.StatusForbidden {
		t.Errorf("POST approve without the CSRF token: %d %q", code, body)
	}
	if code, body := probe("GET", pageURL, nil, nil); code != http.StatusOK || strings.Contains(body, canary) {
		t.Errorf("GET / with the token: %d", code)
	}
}

// refuseApprovals installs a ValidatingAdmissionPolicy that refuses every
// approval of a TerraformPlan, and waits until the API server enforces it.
func refuseApprovals(t *testing.T, env *testenv.Env, plan *infrav1.TerraformPlan) {
	t.Helper()
	ctx := context.Background()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "approval-freeze"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{infrav1.GroupVersion.Group}, APIVersions: []string{"*"},
						Resources: []string{"terraformplans"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "!has(object.spec.approved) || !object.spec.approved || (has(oldObject.spec.approved) && oldObject.spec.approved)",
				Message:    freeze,
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "approval-freeze"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "approval-freeze",
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	for _, o := range []client.Object{policy, binding} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	wait(t, "the policy enforced", func() bool {
		err := approveDryRun(env, plan)
		return err != nil && strings.Contains(err.Error(), freeze)
	})
}

// allowApprovals removes the policy's binding and waits until an approval
// passes again.
func allowApprovals(t *testing.T, env *testenv.Env, plan *infrav1.TerraformPlan) {
	t.Helper()
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "approval-freeze"}}
	if err := env.Client.Delete(context.Background(), binding); err != nil {
		t.Fatal(err)
	}
	wait(t, "the policy lifted", func() bool { return approveDryRun(env, plan) == nil })
}

// approveDryRun asks the API server whether it would accept an approval
// of plan, changing nothing.
func approveDryRun(env *testenv.Env, plan *infrav1.TerraformPlan) error {
	p := plan.DeepCopy()
	patch := []byte(`{"spec":{"approved":true,"approvedBy":"captf-test-admin"}}`)
	err := env.Client.Patch(context.Background(), p, client.RawPatch("application/merge-patch+json", patch), client.DryRunAll)
	if err == nil && p.Spec.Approved && plan.Spec.Approved {
		return errors.New("already approved")
	}
	return err
}

// screenshot saves the page as a PNG at path.
func screenshot(t *testing.T, tab context.Context, path string) {
	t.Helper()
	b := get(t, tab, "screenshot", chromedp.FullScreenshot(100))
	if _, err := png.Decode(bytes.NewReader(b)); err != nil {
		t.Fatalf("the screenshot is no PNG: %v", err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// wait polls ok for up to three minutes: the Jobs run real terraform on a
// busy machine.
func wait(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Minute); !ok(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// reviewedMachine creates a Cluster API Cluster of the TerraformCluster
// demo, a Machine and its TerraformMachine under applyPolicy Manual, whose
// bootstrap data is the canary. The TerraformMachine carries the
// annotation the manager sets when an apply Job ended without a report
// (as a Job deleted mid-apply does, which a test cannot time): its apply
// is no first apply, so its plan waits for an approval in its status.
func reviewedMachine(t *testing.T, env *testenv.Env) *infrav1.TerraformMachine {
	t.Helper()
	ctx := context.Background()
	const name = "demo-node-0"
	tm := &infrav1.TerraformMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
			Annotations: map[string]string{infrav1.AnnotationInterruptedApply: "true"}},
		Spec: infrav1.TerraformMachineSpec{RunnerSpec: infrav1.RunnerSpec{
			Image: machineImage, ApplyPolicy: infrav1.ApplyManual,
		}},
	}
	for _, o := range []client.Object{
		&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "default"},
			Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "TerraformCluster", Name: "demo"}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-bootstrap", Namespace: "default",
			Labels: map[string]string{clusterv1.ClusterNameLabel: "demo"}}, StringData: map[string]string{"value": canary}},
		&clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: clusterv1.MachineSpec{ClusterName: "demo",
				Bootstrap: clusterv1.Bootstrap{DataSecretName: ptr.To(name + "-bootstrap")},
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{
					APIGroup: infrav1.GroupVersion.Group, Kind: "TerraformMachine", Name: name}}},
		tm,
	} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	return tm
}

// machinePlanPage checks the page of the plan that waits in tm's status:
// the resources with the attributes that change, terraform's log of the
// plan Job; after the approval (the annotation), terraform's log of the
// apply. No page shows the canary.
func machinePlanPage(t *testing.T, env *testenv.Env, tab context.Context, pageURL string, tm *infrav1.TerraformMachine) {
	t.Helper()
	ctx := context.Background()
	wait(t, "the machine's plan", func() bool {
		return env.Client.Get(ctx, client.ObjectKeyFromObject(tm), tm) == nil && tm.Status.Plan != nil
	})
	p := tm.Status.Plan
	if p.Reason != infrav1.ReasonManual || len(p.Resources) == 0 {
		t.Fatalf("the machine's plan: %+v", p)
	}
	row := fmt.Sprintf(`tr[data-test=row][data-name=%q]`, tm.Name)
	do(t, tab, "open the list", chromedp.Navigate(pageURL), chromedp.WaitVisible(css(row)))
	do(t, tab, "open the machine's page", chromedp.Click(css(row+` a`)), chromedp.WaitVisible(css(`[data-test=resources]`)))
	attributes := get(t, tab, "the changed attributes", chromedp.Evaluate[map[string]string](
		`Object.fromEntries([...document.querySelectorAll("[data-test=resource]")].map(r => [r.cells[0].textContent, (r.querySelector("[data-test=attributes]") || {textContent: "(no column)"}).textContent]))`))
	// The plan creates the machine's terraform_data: its input, and its
	// id and output, known after apply.
	for _, address := range addresses(p.Resources) {
		if got := attributes[address]; got != "id, input, output" {
			t.Errorf("the machine's page shows %q as the attributes that change of %s, want %q", got, address, "id, input, output")
		}
	}
	pageLog := get(t, tab, "the machine's plan log", chromedp.Evaluate[string](`(document.querySelector("[data-test=plan-log]") || {textContent: ""}).textContent`))
	for _, want := range append([]string{"Plan: ", "(sensitive value)"}, addresses(p.Resources)...) {
		if !strings.Contains(pageLog, want) {
			t.Errorf("the machine's plan log on the page lacks %q:\n%s", want, pageLog)
		}
	}
	machineHTML := get(t, tab, "the machine's HTML", chromedp.OuterHTML(css("html")))
	if i := strings.Index(machineHTML, canary); i >= 0 {
		t.Errorf("the machine's page shows the bootstrap data: %s", machineHTML[max(0, i-300):i+40])
	}

	// Approve, as alice, who may not patch machines yet: the page shows
	// the API server's refusal, and nothing is approved.
	get(t, tab, "mark the page", chromedp.Evaluate[bool](`window.notReloaded = true`))
	do(t, tab, "approve the machine's plan", chromedp.Click(css(`[data-test=approve]`)), chromedp.WaitVisible(css(`[data-test=confirm]`)))
	if hash := get(t, tab, "the confirmation's hash", chromedp.Text(css(`[data-test=confirm-hash]`))); hash != p.PlanHash {
		t.Errorf("the machine's confirmation shows the hash %q, want %q", hash, p.PlanHash)
	}
	do(t, tab, "confirm without the right to patch", chromedp.Click(css(`[data-test=confirm]`)), chromedp.WaitVisible(css(`[data-test=error]`)))
	refused := get(t, tab, "the refusal", chromedp.Text(css(`[data-test=error]`)))
	t.Logf("the page refused the machine's approval: %s", refused)
	if !strings.Contains(refused, `User "alice" cannot patch resource "terraformmachines"`) {
		t.Errorf("the refusal on the machine's page: %q, want the API server's RBAC message", refused)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(tm), tm); err != nil || tm.Annotations[infrav1.AnnotationApprovePlan] != "" {
		t.Fatalf("after the refusal the machine carries the approval %q (%v)", tm.Annotations[infrav1.AnnotationApprovePlan], err)
	}

	// With the right to patch machines, Approve sets the annotation of the
	// hash as alice, and the page follows the apply to its end and shows
	// its log, without a reload.
	for _, o := range []client.Object{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "machine-approver", Namespace: "default"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{infrav1.GroupVersion.Group}, Resources: []string{"terraformmachines"}, Verbs: []string{"patch"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "machine-approver", Namespace: "default"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "machine-approver"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}}},
	} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	do(t, tab, "confirm", chromedp.Click(css(`[data-test=confirm]`)), chromedp.WaitVisible(css(`[data-test=status]`)))
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(tm), tm); err != nil || tm.Annotations[infrav1.AnnotationApprovePlan] != p.PlanHash {
		t.Fatalf("after Approve the machine carries the approval %q (%v), want %s", tm.Annotations[infrav1.AnnotationApprovePlan], err, p.PlanHash)
	}
	get(t, tab, "mark the page", chromedp.Evaluate[bool](`window.notReloaded = true`))
	wait(t, "the machine's page to show the apply Applied", func() bool {
		return strings.HasPrefix(get(t, tab, "the apply's status", chromedp.Evaluate[string](`(document.querySelector("[data-test=apply-status]") || {textContent: ""}).textContent`)), "Applied:")
	})
	if !get(t, tab, "the marker", chromedp.Evaluate[bool](`window.notReloaded === true`)) {
		t.Error("the machine's page reloaded to show the apply; it should have been updated in place")
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(tm), tm); err != nil || tm.Status.LastRun == nil ||
		tm.Status.LastRun.Operation != infrav1.OperationApply || !tm.Status.LastRun.Succeeded {
		t.Fatalf("the machine's page shows Applied; the machine's last run: %+v (%v)", tm.Status.LastRun, err)
	}
	applyLog := get(t, tab, "the machine's apply log", chromedp.Evaluate[string](`(document.querySelector("[data-test=apply-log]") || {textContent: ""}).textContent`))
	if !strings.Contains(applyLog, "Apply complete!") || !strings.Contains(applyLog, addresses(p.Resources)[0]) {
		t.Errorf("the machine's page shows no log of the approved apply:\n%s", applyLog)
	}
	if html := get(t, tab, "the machine's HTML", chromedp.OuterHTML(css("html"))); strings.Contains(html, canary) {
		t.Errorf("the machine's page after the apply shows the bootstrap data")
	}
}
