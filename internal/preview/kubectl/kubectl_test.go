package kubectl

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/captf/captf/internal/preview"
	"github.com/captf/captf/internal/preview/previewtest"
	"github.com/captf/captf/internal/testenv"
	"github.com/captf/captf/pkg/changeset"
)

var update = flag.Bool("update", false, "rewrite golden files")

func ptr[T any](v T) *T { return &v }

// canary is a Secret value that must appear nowhere: not in a plan, an
// error, an output or a hole.
const canary = "canary-7f3a9c-s3cr3t"

// cluster is one real kube-apiserver and etcd shared by the subtests of a
// test; each subtest works in a namespace of its own.
type cluster struct {
	env        *testenv.Env
	kubeconfig string
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	env := testenv.Start(t, "../../..")
	return &cluster{env: env, kubeconfig: env.Kubeconfig(t)}
}

// step is one kubectl-apply step over a manifest file the test rewrites.
type step struct {
	t      *testing.T
	c      *cluster
	ns     string
	root   string
	inputs map[string]any
}

// newStep makes a namespace and a step whose manifest is k8s.yaml.
func (c *cluster) newStep(t *testing.T, ns string) *step {
	t.Helper()
	if err := c.env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	return &step{t: t, c: c, ns: ns, root: t.TempDir(), inputs: map[string]any{
		"manifest": "k8s.yaml", "kubeconfig": c.kubeconfig, "namespace": ns,
	}}
}

func (s *step) manifest(yaml string) {
	s.t.Helper()
	if err := os.WriteFile(filepath.Join(s.root, "k8s.yaml"), []byte(yaml), 0o600); err != nil {
		s.t.Fatal(err)
	}
}

func (s *step) request() preview.Request {
	return preview.Request{Component: "web", Environment: "test", Root: s.root, WorkDir: s.t.TempDir(), Inputs: s.inputs, Key: previewtest.Key()}
}

func (s *step) plan() *preview.Plan {
	s.t.Helper()
	p, err := Capability{}.Plan(context.Background(), s.request())
	if err != nil {
		s.t.Fatalf("plan: %v", err)
	}
	stack, _ := s.inputs["stack"].(string)
	if stack == "" {
		stack = "web"
	}
	if p.Member.Name != stack || p.Member.Capability != Kind || p.Member.Status != changeset.StatusPlanned || !strings.HasPrefix(p.Member.PlanDigest, DigestPrefix) {
		s.t.Fatalf("member: %+v", p.Member)
	}
	b, err := json.Marshal(p)
	if err != nil {
		s.t.Fatal(err)
	}
	if strings.Contains(string(b), canary) {
		s.t.Fatalf("the canary is in the plan: %s", b)
	}
	return p
}

func (s *step) apply(p *preview.Plan) preview.Outputs {
	s.t.Helper()
	out, err := Capability{}.Apply(context.Background(), s.request(), p)
	if err != nil {
		s.t.Fatalf("apply: %v", err)
	}
	return out
}

// entry returns the plan's entry for address, or fails.
func entry(t *testing.T, p *preview.Plan, address string) changeset.Entry {
	t.Helper()
	for _, e := range p.Entries {
		if e.Address == address {
			return e
		}
	}
	t.Fatalf("no entry %s in %+v", address, p.Entries)
	return changeset.Entry{}
}

// attr returns an entry's attribute by name and whether it is there.
func attr(e changeset.Entry, name string) (changeset.Attribute, bool) {
	for _, a := range e.Attributes {
		if a.Name == name {
			return a, true
		}
	}
	return changeset.Attribute{}, false
}

func actions(p *preview.Plan) map[string]string {
	m := map[string]string{}
	for _, e := range p.Entries {
		m[e.Address] = e.Action
	}
	return m
}

func configMap(name, data string) string {
	return `apiVersion: v1
kind: ConfigMap
metadata:
  name: ` + name + `
data:
` + data + "\n---\n"
}

func deployment(image string, replicas int, app string) string {
	r := []byte{byte('0' + replicas)}
	return `apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
spec:
  replicas: ` + string(r) + `
  selector:
    matchLabels: {app: ` + app + `}
  template:
    metadata:
      labels: {app: ` + app + `}
    spec:
      containers:
      - name: api
        image: ` + image + "\n---\n"
}

const secret = `apiVersion: v1
kind: Secret
metadata:
  name: creds
stringData:
  password: ` + canary + "\n---\n"

func TestKubectlApply(t *testing.T) {
	c := startCluster(t)
	ctx := context.Background()

	t.Run("create lists every declared field and changes nothing", func(t *testing.T) {
		s := c.newStep(t, "create")
		s.manifest(configMap("settings", "  color: blue\n  size: \"3\"") + deployment("nginx:1.27", 2, "api") + secret)
		p := s.plan()
		if diff := cmp.Diff(map[string]string{
			"ConfigMap/create/settings": "create", "Deployment/create/api": "create", "Secret/create/creds": "create",
		}, actions(p)); diff != "" {
			t.Errorf("actions (-want +got):\n%s", diff)
		}
		cm := entry(t, p, "ConfigMap/create/settings")
		want := []changeset.Attribute{
			{Name: "apiVersion", After: json.RawMessage(`"v1"`)},
			{Name: "data.color", After: json.RawMessage(`"blue"`)},
			{Name: "data.size", After: json.RawMessage(`"3"`)},
			{Name: "kind", After: json.RawMessage(`"ConfigMap"`)},
			{Name: `metadata.labels["app.kubernetes.io/managed-by"]`, After: json.RawMessage(`"captf"`)},
			{Name: `metadata.labels["captf.io/stack"]`, After: json.RawMessage(`"web"`)},
			{Name: "metadata.name", After: json.RawMessage(`"settings"`)},
			{Name: "metadata.namespace", After: json.RawMessage(`"create"`)},
		}
		if diff := cmp.Diff(want, cm.Attributes); diff != "" {
			t.Errorf("ConfigMap attributes (-want +got):\n%s", diff)
		}
		dep := entry(t, p, "Deployment/create/api")
		if a, ok := attr(dep, "spec.template.spec.containers.0.image"); !ok || string(a.After) != `"nginx:1.27"` || a.Before != nil {
			t.Errorf("Deployment image attribute: %+v, %v", a, ok)
		}
		if a, ok := attr(dep, "spec.replicas"); !ok || string(a.After) != `2` {
			t.Errorf("Deployment replicas attribute: %+v, %v", a, ok)
		}
		if dep.Disruption != "" {
			t.Errorf("a create has disruption %q", dep.Disruption)
		}
		sec := entry(t, p, "Secret/create/creds")
		if diff := cmp.Diff(changeset.Attribute{Name: "stringData.password", Sensitive: true}, func() changeset.Attribute { a, _ := attr(sec, "stringData.password"); return a }()); diff != "" {
			t.Errorf("Secret attribute (-want +got):\n%s", diff)
		}
		// A dry run creates nothing.
		err := c.env.Client.Get(ctx, client.ObjectKey{Namespace: "create", Name: "settings"}, &corev1.ConfigMap{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("the plan created the ConfigMap: %v", err)
		}
	})

	t.Run("after apply the same manifest is a no-op under captf's field manager and labels", func(t *testing.T) {
		s := c.newStep(t, "noop")
		s.manifest(configMap("settings", "  color: blue") + deployment("nginx:1.27", 2, "api") + secret)
		s.apply(s.plan())
		p := s.plan()
		if diff := cmp.Diff(map[string]string{
			"ConfigMap/noop/settings": "no-op", "Deployment/noop/api": "no-op", "Secret/noop/creds": "no-op",
		}, actions(p)); diff != "" {
			t.Errorf("actions (-want +got):\n%s", diff)
		}
		var cm corev1.ConfigMap
		if err := c.env.Client.Get(ctx, client.ObjectKey{Namespace: "noop", Name: "settings"}, &cm); err != nil {
			t.Fatal(err)
		}
		if cm.Labels[StackLabel] != "web" || cm.Labels[ManagedByLabel] != "captf" {
			t.Errorf("labels: %v", cm.Labels)
		}
		managers := []string{}
		for _, f := range cm.ManagedFields {
			managers = append(managers, f.Manager+"/"+string(f.Operation))
		}
		if diff := cmp.Diff([]string{"captf:web/Apply"}, managers); diff != "" {
			t.Errorf("field managers (-want +got):\n%s", diff)
		}
		var sec corev1.Secret
		if err := c.env.Client.Get(ctx, client.ObjectKey{Namespace: "noop", Name: "creds"}, &sec); err != nil {
			t.Fatal(err)
		}
		if string(sec.Data["password"]) != canary {
			t.Error("the Secret was not applied with its value")
		}
	})

	t.Run("update lists each changed path with before and after", func(t *testing.T) {
		s := c.newStep(t, "update")
		s.manifest(configMap("settings", "  color: blue\n  size: \"3\"\n  gone: x"))
		s.apply(s.plan())
		s.manifest(configMap("settings", "  color: red\n  size: \"3\"\n  added: new"))
		var before, after corev1.ConfigMap
		key := client.ObjectKey{Namespace: "update", Name: "settings"}
		if err := c.env.Client.Get(ctx, key, &before); err != nil {
			t.Fatal(err)
		}
		p := s.plan()
		if err := c.env.Client.Get(ctx, key, &after); err != nil {
			t.Fatal(err)
		}
		if before.ResourceVersion != after.ResourceVersion || after.Data["color"] != "blue" {
			t.Errorf("the plan wrote the object: resourceVersion %s then %s", before.ResourceVersion, after.ResourceVersion)
		}
		want := []changeset.Entry{{
			Member: "web", Address: "ConfigMap/update/settings", Action: "update",
			Attributes: []changeset.Attribute{
				{Name: "data.added", After: json.RawMessage(`"new"`)},
				{Name: "data.color", Before: json.RawMessage(`"blue"`), After: json.RawMessage(`"red"`)},
				{Name: "data.gone", Before: json.RawMessage(`"x"`)},
			},
		}}
		if diff := cmp.Diff(want, p.Entries); diff != "" {
			t.Errorf("entries (-want +got):\n%s", diff)
		}
	})

	t.Run("a Secret update is sensitive and the canary is nowhere", func(t *testing.T) {
		s := c.newStep(t, "secret")
		s.manifest(secret)
		s.apply(s.plan())
		s.manifest(strings.Replace(secret, canary, canary+"-2", 1))
		p := s.plan()
		want := []changeset.Entry{{
			Member: "web", Address: "Secret/secret/creds", Action: "update",
			Attributes: []changeset.Attribute{{Name: "data.password", Sensitive: true}},
		}}
		if diff := cmp.Diff(want, p.Entries); diff != "" {
			t.Errorf("entries (-want +got):\n%s", diff)
		}
		// A value the server cannot decode is refused; neither the hole nor
		// the plan holds it.
		s.manifest("apiVersion: v1\nkind: Secret\nmetadata:\n  name: bad\ndata:\n  password: \"" + canary + "!!\"\n")
		p = s.plan()
		if len(p.Member.Holes) != 1 || p.Member.Holes[0].Address != "Secret/secret/bad" {
			t.Fatalf("holes: %+v", p.Member.Holes)
		}
		_, err := Capability{}.Apply(ctx, s.request(), p)
		if err == nil || strings.Contains(err.Error(), canary) {
			t.Errorf("apply of a refused Secret: %v", err)
		}
	})

	t.Run("a server message that echoes a Secret value is redacted", func(t *testing.T) {
		s := c.newStep(t, "echo")
		// An admission policy whose message quotes the Secret's value: the
		// API server itself puts the value in its answer.
		policy := &admissionv1.ValidatingAdmissionPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "echo-secrets"},
			Spec: admissionv1.ValidatingAdmissionPolicySpec{
				MatchConstraints: &admissionv1.MatchResources{
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "echo"}},
					ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
						Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
						Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"secrets"}},
					}}},
				},
				Validations: []admissionv1.Validation{{
					Expression:        "false",
					MessageExpression: "'refusing the password ' + string(object.data['password'])",
				}},
			},
		}
		binding := &admissionv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "echo-secrets"},
			Spec:       admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "echo-secrets", ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}},
		}
		for _, o := range []client.Object{policy, binding} {
			if err := c.env.Client.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		s.manifest(secret)
		// The API server loads a new policy within a few seconds.
		var p *preview.Plan
		for range 50 {
			if p = s.plan(); len(p.Member.Holes) > 0 {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		want := []changeset.Hole{{Address: "Secret/echo/creds", Reason: "the API server refused the dry run: secrets \"creds\" is forbidden: ValidatingAdmissionPolicy 'echo-secrets' with binding 'echo-secrets' denied request: refusing the password <redacted>"}}
		if diff := cmp.Diff(want, p.Member.Holes); diff != "" {
			t.Errorf("holes (-want +got):\n%s", diff)
		}
		_, err := Capability{}.Apply(ctx, s.request(), p)
		if err == nil || strings.Contains(err.Error(), canary) || !strings.Contains(err.Error(), "<redacted>") {
			t.Errorf("apply: %v", err)
		}

		// The same policy in warn mode: the dry run passes with a warning,
		// which goes to the context's logger redacted.
		binding.Spec.ValidationActions = []admissionv1.ValidationAction{admissionv1.Warn}
		if err := c.env.Client.Update(ctx, binding); err != nil {
			t.Fatal(err)
		}
		var logged []string
		logCtx := klog.NewContext(ctx, funcr.New(func(prefix, args string) { logged = append(logged, args) }, funcr.Options{}))
		for range 50 {
			logged = nil
			p, err = Capability{}.Plan(logCtx, s.request())
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Member.Holes) == 0 {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		all := strings.Join(logged, "\n")
		if strings.Contains(all, canary) || strings.Contains(all, "Y2FuYXJ5") || !strings.Contains(all, "refusing the password <redacted>") {
			t.Errorf("logged: %s", all)
		}
	})

	t.Run("a template change rolls, a replicas change does not", func(t *testing.T) {
		s := c.newStep(t, "rolling")
		s.manifest(deployment("nginx:1.27", 2, "api"))
		s.apply(s.plan())

		s.manifest(deployment("nginx:1.28", 2, "api"))
		e := entry(t, s.plan(), "Deployment/rolling/api")
		want := changeset.Entry{Member: "web", Address: "Deployment/rolling/api", Action: "update", Disruption: "rolling",
			Attributes: []changeset.Attribute{{Name: "spec.template.spec.containers.0.image", Before: json.RawMessage(`"nginx:1.27"`), After: json.RawMessage(`"nginx:1.28"`)}}}
		if diff := cmp.Diff(want, e); diff != "" {
			t.Errorf("template change (-want +got):\n%s", diff)
		}

		s.manifest(deployment("nginx:1.27", 5, "api"))
		e = entry(t, s.plan(), "Deployment/rolling/api")
		want = changeset.Entry{Member: "web", Address: "Deployment/rolling/api", Action: "update",
			Attributes: []changeset.Attribute{{Name: "spec.replicas", Before: json.RawMessage(`2`), After: json.RawMessage(`5`)}}}
		if diff := cmp.Diff(want, e); diff != "" {
			t.Errorf("replicas change (-want +got):\n%s", diff)
		}
	})

	t.Run("a refused selector change is an update with unknown disruption and the server's message", func(t *testing.T) {
		s := c.newStep(t, "selector")
		s.manifest(deployment("nginx:1.27", 2, "api"))
		s.apply(s.plan())
		s.manifest(deployment("nginx:1.27", 2, "api2"))
		p := s.plan()
		e := entry(t, p, "Deployment/selector/api")
		if e.Action != "update" || e.Disruption != "unknown" {
			t.Errorf("entry: %+v", e)
		}
		if a, ok := attr(e, "spec.selector.matchLabels.app"); !ok || string(a.Before) != `"api"` || string(a.After) != `"api2"` {
			t.Errorf("selector attribute: %+v %v", a, ok)
		}
		if len(p.Member.Holes) != 1 || p.Member.Holes[0].Address != "Deployment/selector/api" ||
			!strings.Contains(p.Member.Holes[0].Reason, "field is immutable") {
			t.Fatalf("holes: %+v", p.Member.Holes)
		}
		_, err := Capability{}.Apply(ctx, s.request(), p)
		if err == nil || !strings.Contains(err.Error(), "field is immutable") || errors.Is(err, preview.ErrMoved) {
			t.Errorf("apply of a refused plan: %v", err)
		}
	})

	t.Run("owned-only deletes the stack's dropped objects, never deletes nothing", func(t *testing.T) {
		s := c.newStep(t, "prune")
		// Its own stack: the stack label is the owner across the cluster.
		s.inputs["stack"] = "prune"
		role := "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: reader\nrules: []\n---\n"
		s.manifest(configMap("keep", "  a: \"1\"") + configMap("drop", "  a: \"1\"") + secret + role)
		s.apply(s.plan())
		// Objects that are not this stack's: another stack's, and one with
		// the stack label but without captf's marker.
		other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "prune", Name: "other", Labels: map[string]string{StackLabel: "other", ManagedByLabel: "captf"}}}
		unmarked := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "prune", Name: "unmarked", Labels: map[string]string{StackLabel: "prune"}}}
		// And one a controller owns, with the stack's labels copied from
		// its owner (as an EndpointSlice gets its Service's).
		var keep corev1.ConfigMap
		if err := c.env.Client.Get(ctx, client.ObjectKey{Namespace: "prune", Name: "keep"}, &keep); err != nil {
			t.Fatal(err)
		}
		owned := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "prune", Name: "owned", Labels: keep.Labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "keep", UID: keep.UID, Controller: ptr(true)}}}}
		for _, o := range []client.Object{other, unmarked, owned} {
			if err := c.env.Client.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		// The Secret's and the Role's kinds are no longer declared at all:
		// they are found among every kind the API server serves.
		s.manifest(configMap("keep", "  a: \"1\""))
		if diff := cmp.Diff(map[string]string{"ConfigMap/prune/keep": "no-op"}, actions(s.plan())); diff != "" {
			t.Errorf("delete: never (-want +got):\n%s", diff)
		}
		s.inputs["delete"] = DeleteOwnedOnly
		p := s.plan()
		if diff := cmp.Diff(map[string]string{"ConfigMap/prune/keep": "no-op", "ConfigMap/prune/drop": "delete", "Secret/prune/creds": "delete", "Role/prune/reader": "delete"}, actions(p)); diff != "" {
			t.Errorf("delete: owned-only (-want +got):\n%s", diff)
		}
		s.apply(p)
		var list corev1.ConfigMapList
		if err := c.env.Client.List(ctx, &list, client.InNamespace("prune")); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, cm := range list.Items {
			names = append(names, cm.Name)
		}
		slices.Sort(names)
		if diff := cmp.Diff([]string{"keep", "other", "owned", "unmarked"}, names); diff != "" {
			t.Errorf("ConfigMaps left (-want +got):\n%s", diff)
		}
		err := c.env.Client.Get(ctx, client.ObjectKey{Namespace: "prune", Name: "creds"}, &corev1.Secret{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("the dropped Secret is still there: %v", err)
		}
	})

	t.Run("the digest is stable and moves with the manifest, a Secret value and the delete mode", func(t *testing.T) {
		s := c.newStep(t, "digest")
		s.manifest(configMap("settings", "  color: blue") + secret)
		first, second := s.plan().Member.PlanDigest, s.plan().Member.PlanDigest
		if first != second {
			t.Errorf("two plans of the same manifest: %s and %s", first, second)
		}
		s.manifest(configMap("settings", "  color: red") + secret)
		if d := s.plan().Member.PlanDigest; d == first {
			t.Error("a manifest change did not move the digest")
		}
		s.manifest(configMap("settings", "  color: blue") + strings.Replace(secret, canary, canary+"-2", 1))
		if d := s.plan().Member.PlanDigest; d == first {
			t.Error("a Secret value change did not move the digest")
		}
		s.manifest(configMap("settings", "  color: blue") + secret)
		s.inputs["delete"] = DeleteOwnedOnly
		if d := s.plan().Member.PlanDigest; d == first {
			t.Error("the delete mode did not move the digest")
		}
	})

	t.Run("the digest binds Secret values under the key, across separate plans", func(t *testing.T) {
		s := c.newStep(t, "keyed")
		s.manifest(configMap("settings", "  color: blue") + secret)
		s.apply(s.plan())
		// Each plan is a fresh Capability with no Private: what a review
		// job and a later apply job each compute.
		s.manifest(configMap("settings", "  color: blue") + strings.Replace(secret, canary, canary+"-2", 1))
		reviewed, again := s.plan(), s.plan()
		if again.Member.PlanDigest != reviewed.Member.PlanDigest {
			t.Errorf("one Secret value, two digests: %s and %s", reviewed.Member.PlanDigest, again.Member.PlanDigest)
		}
		otherKey := s.request()
		otherKey.Key = previewtest.OtherKey()
		underOther, err := Capability{}.Plan(ctx, otherKey)
		if err != nil {
			t.Fatal(err)
		}
		if underOther.Member.PlanDigest == reviewed.Member.PlanDigest {
			t.Errorf("two keys, one digest %s", reviewed.Member.PlanDigest)
		}
		s.manifest(configMap("settings", "  color: blue") + strings.Replace(secret, canary, canary+"-3", 1))
		changed := s.plan()
		if changed.Member.PlanDigest == reviewed.Member.PlanDigest {
			t.Errorf("another Secret value, same digest %s", reviewed.Member.PlanDigest)
		}
		if diff := cmp.Diff(reviewed.Entries, changed.Entries); diff != "" {
			t.Errorf("the entries show the Secret's change (-reviewed +changed):\n%s", diff)
		}
		for _, p := range []*preview.Plan{reviewed, changed, underOther} {
			b, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range append(previewtest.KeyForms(previewtest.Key()), previewtest.KeyForms(previewtest.OtherKey())...) {
				if strings.Contains(string(b)+fmt.Sprintf("%#v", p.Private), k) {
					t.Errorf("the plan holds the key as %q", k)
				}
			}
		}

		// The reviewed value, applied by another process that has only
		// the approved member, after the live Secret moved underneath:
		// the before side moved, so nothing is applied.
		s.manifest(configMap("settings", "  color: blue") + strings.Replace(secret, canary, canary+"-2", 1))
		approved := &preview.Plan{Member: reviewed.Member}
		var live corev1.Secret
		key := client.ObjectKey{Namespace: "keyed", Name: "creds"}
		if err := c.env.Client.Get(ctx, key, &live); err != nil {
			t.Fatal(err)
		}
		live.Data["password"] = []byte(canary + "-drift")
		if err := c.env.Client.Update(ctx, &live); err != nil {
			t.Fatal(err)
		}
		_, err = Capability{}.Apply(ctx, s.request(), approved)
		if !errors.Is(err, preview.ErrMoved) || strings.Contains(err.Error(), canary) {
			t.Fatalf("apply over a drifted Secret: %v, want ErrMoved naming no value", err)
		}
		var after corev1.Secret
		if err := c.env.Client.Get(ctx, key, &after); err != nil {
			t.Fatal(err)
		}
		if string(after.Data["password"]) != canary+"-drift" || after.ResourceVersion != live.ResourceVersion {
			t.Error("the refused apply changed the Secret")
		}
	})

	t.Run("apply applies an unchanged plan and refuses a moved one without changing the cluster", func(t *testing.T) {
		s := c.newStep(t, "moved")
		s.manifest(configMap("settings", "  a: \"1\"\n  b: \"2\"") + deployment("nginx:1.27", 2, "api"))
		s.apply(s.plan())

		s.manifest(configMap("settings", "  a: \"9\"\n  b: \"2\"") + deployment("nginx:1.28", 2, "api"))
		approved := s.plan()
		// Drift between plan and apply, on a field the manifest sets.
		var cm corev1.ConfigMap
		key := client.ObjectKey{Namespace: "moved", Name: "settings"}
		if err := c.env.Client.Get(ctx, key, &cm); err != nil {
			t.Fatal(err)
		}
		cm.Data["b"] = "7"
		if err := c.env.Client.Update(ctx, &cm); err != nil {
			t.Fatal(err)
		}
		var dep appsv1.Deployment
		if err := c.env.Client.Get(ctx, client.ObjectKey{Namespace: "moved", Name: "api"}, &dep); err != nil {
			t.Fatal(err)
		}
		versions := []string{cm.ResourceVersion, dep.ResourceVersion}

		_, err := Capability{}.Apply(ctx, s.request(), approved)
		if !errors.Is(err, preview.ErrMoved) {
			t.Fatalf("apply after drift: %v, want ErrMoved", err)
		}
		fresh := s.plan().Member.PlanDigest
		if !strings.Contains(err.Error(), approved.Member.PlanDigest) || !strings.Contains(err.Error(), fresh) {
			t.Errorf("the error names not both digests: %v", err)
		}
		if err := c.env.Client.Get(ctx, key, &cm); err != nil {
			t.Fatal(err)
		}
		if err := c.env.Client.Get(ctx, client.ObjectKey{Namespace: "moved", Name: "api"}, &dep); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(versions, []string{cm.ResourceVersion, dep.ResourceVersion}); diff != "" {
			t.Errorf("resourceVersions after a refused apply (-before +after):\n%s", diff)
		}

		// Planned again, the same change applies.
		s.apply(s.plan())
		if err := c.env.Client.Get(ctx, key, &cm); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(map[string]string{"a": "9", "b": "2"}, cm.Data); diff != "" {
			t.Errorf("data after apply (-want +got):\n%s", diff)
		}
		if err := c.env.Client.Get(ctx, client.ObjectKey{Namespace: "moved", Name: "api"}, &dep); err != nil {
			t.Fatal(err)
		}
		if img := dep.Spec.Template.Spec.Containers[0].Image; img != "nginx:1.28" {
			t.Errorf("image after apply: %s", img)
		}
	})

	t.Run("drift under a field the plan changes moves the digest: before values are bound", func(t *testing.T) {
		s := c.newStep(t, "before")
		s.manifest(deployment("nginx:1.27", 2, "api"))
		s.apply(s.plan())
		s.manifest(deployment("nginx:1.27", 5, "api"))
		approved := s.plan() // replicas 2 -> 5
		var dep appsv1.Deployment
		key := client.ObjectKey{Namespace: "before", Name: "api"}
		if err := c.env.Client.Get(ctx, key, &dep); err != nil {
			t.Fatal(err)
		}
		dep.Spec.Replicas = ptr(int32(3))
		if err := c.env.Client.Update(ctx, &dep, client.FieldOwner("someone")); err != nil {
			t.Fatal(err)
		}
		rv := dep.ResourceVersion
		// Now the same manifest would be replicas 3 -> 5: another change.
		if _, err := (Capability{}).Apply(ctx, s.request(), approved); !errors.Is(err, preview.ErrMoved) {
			t.Fatalf("apply: %v, want ErrMoved", err)
		}
		if err := c.env.Client.Get(ctx, key, &dep); err != nil {
			t.Fatal(err)
		}
		if dep.ResourceVersion != rv || *dep.Spec.Replicas != 3 {
			t.Errorf("the refused apply changed the Deployment: replicas %d", *dep.Spec.Replicas)
		}
	})

	t.Run("outputs and planned outputs", func(t *testing.T) {
		s := c.newStep(t, "outputs")
		svc := "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  ports:\n  - port: 80\n---\n"
		s.manifest(svc + configMap("settings", "  url: http://web"))
		s.inputs["outputs"] = map[string]any{
			"url":       map[string]any{"object": "ConfigMap/outputs/settings", "field": "data.url"},
			"clusterIP": map[string]any{"object": "Service/outputs/web", "field": "spec.clusterIP"},
			"port":      map[string]any{"object": "Service/outputs/web", "field": "spec.ports.0.port"},
		}
		none, err := Capability{}.Outputs(ctx, s.request())
		if err != nil || len(none) != 0 {
			t.Errorf("outputs before any apply: %v, %v", none, err)
		}
		p := s.plan()
		// On a create only the fields the manifest sets are known.
		if diff := cmp.Diff(preview.Outputs{"url": json.RawMessage(`"http://web"`), "port": json.RawMessage(`80`)}, p.PlannedOutputs); diff != "" {
			t.Errorf("planned outputs of a create (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"clusterIP", "port", "url"}, p.DeclaredOutputs); diff != "" {
			t.Errorf("declared outputs (-want +got):\n%s", diff)
		}
		applied := s.apply(p)
		var live corev1.Service
		if err := c.env.Client.Get(ctx, client.ObjectKey{Namespace: "outputs", Name: "web"}, &live); err != nil {
			t.Fatal(err)
		}
		want := preview.Outputs{"url": json.RawMessage(`"http://web"`), "port": json.RawMessage(`80`), "clusterIP": json.RawMessage(`"` + live.Spec.ClusterIP + `"`)}
		if live.Spec.ClusterIP == "" {
			t.Fatal("the Service has no cluster IP")
		}
		if diff := cmp.Diff(want, applied); diff != "" {
			t.Errorf("outputs returned by apply (-want +got):\n%s", diff)
		}
		read, err := Capability{}.Outputs(ctx, s.request())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, read); diff != "" {
			t.Errorf("outputs read (-want +got):\n%s", diff)
		}
		// Unchanged, the Service's server-set field is known before apply.
		if diff := cmp.Diff(want, s.plan().PlannedOutputs); diff != "" {
			t.Errorf("planned outputs of a no-op (-want +got):\n%s", diff)
		}
	})

	t.Run("a namespace the manifest creates takes the objects planned into it", func(t *testing.T) {
		s := &step{t: t, c: c, root: t.TempDir(), inputs: map[string]any{"manifest": "k8s.yaml", "kubeconfig": c.kubeconfig, "namespace": "fresh"}}
		s.manifest("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: fresh\n---\n" + configMap("settings", "  a: \"1\""))
		p := s.plan()
		if diff := cmp.Diff(map[string]string{"Namespace/fresh": "create", "ConfigMap/fresh/settings": "create"}, actions(p)); diff != "" {
			t.Errorf("actions (-want +got):\n%s", diff)
		}
		if len(p.Member.Holes) != 0 {
			t.Errorf("holes: %+v", p.Member.Holes)
		}
		s.apply(p)
		if err := c.env.Client.Get(ctx, client.ObjectKey{Namespace: "fresh", Name: "settings"}, &corev1.ConfigMap{}); err != nil {
			t.Errorf("the ConfigMap was not created: %v", err)
		}
	})

	t.Run("a field another manager owns is taken, and the plan shows it", func(t *testing.T) {
		s := c.newStep(t, "conflict")
		s.manifest(deployment("nginx:1.27", 2, "api"))
		s.apply(s.plan())
		// Someone scales by hand: replicas now belong to another manager.
		var dep appsv1.Deployment
		key := client.ObjectKey{Namespace: "conflict", Name: "api"}
		if err := c.env.Client.Get(ctx, key, &dep); err != nil {
			t.Fatal(err)
		}
		dep.Spec.Replicas = ptr(int32(7))
		if err := c.env.Client.Update(ctx, &dep, client.FieldOwner("someone")); err != nil {
			t.Fatal(err)
		}
		p := s.plan()
		want := []changeset.Entry{{Member: "web", Address: "Deployment/conflict/api", Action: "update",
			Attributes: []changeset.Attribute{{Name: "spec.replicas", Before: json.RawMessage(`7`), After: json.RawMessage(`2`)}}}}
		if diff := cmp.Diff(want, p.Entries); diff != "" {
			t.Errorf("entries (-want +got):\n%s", diff)
		}
		s.apply(p)
		if err := c.env.Client.Get(ctx, key, &dep); err != nil {
			t.Fatal(err)
		}
		if *dep.Spec.Replicas != 2 {
			t.Errorf("replicas after apply: %d", *dep.Spec.Replicas)
		}
	})

	t.Run("the digest binds the context; a relative kubeconfig is read from the root", func(t *testing.T) {
		s := c.newStep(t, "target")
		s.manifest(configMap("settings", "  a: \"1\""))
		first := s.plan().Member.PlanDigest
		// The same cluster under another context name, in a kubeconfig
		// inside the repository.
		kc, err := clientcmd.LoadFromFile(c.kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		kc.Contexts["second"] = kc.Contexts[kc.CurrentContext].DeepCopy()
		if err := clientcmd.WriteToFile(*kc, filepath.Join(s.root, "kubeconfig")); err != nil {
			t.Fatal(err)
		}
		s.inputs["kubeconfig"] = "kubeconfig"
		if d := s.plan().Member.PlanDigest; d != first {
			t.Errorf("the same kubeconfig read from the root moved the digest: %s, %s", first, d)
		}
		s.inputs["context"] = "second"
		if d := s.plan().Member.PlanDigest; d == first {
			t.Error("another context did not move the digest")
		}
		s.inputs["context"] = "nowhere"
		if _, err := (Capability{}).Plan(ctx, s.request()); err == nil || err.Error() != `kubeconfig: no context "nowhere"` {
			t.Errorf("a context that does not exist: %v", err)
		}
	})

	t.Run("golden plan", func(t *testing.T) {
		s := c.newStep(t, "golden")
		s.manifest(configMap("settings", "  color: blue\n  size: \"3\"") + deployment("nginx:1.27", 2, "api") + secret)
		s.apply(s.plan())
		s.manifest(configMap("settings", "  color: red\n  size: \"3\"") + deployment("nginx:1.28", 3, "api") +
			strings.Replace(secret, canary, canary+"-2", 1) + configMap("new", "  k: v"))
		s.inputs["outputs"] = map[string]any{"color": map[string]any{"object": "ConfigMap/golden/settings", "field": "data.color"}}
		p := s.plan()
		p.Member.PlanDigest = DigestPrefix + "…"
		got, err := json.MarshalIndent(p, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, '\n')
		golden := filepath.Join("testdata", "golden-plan.json")
		if *update {
			if err := os.WriteFile(golden, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(string(want), string(got)); diff != "" {
			t.Errorf("plan differs from %s (-want +got):\n%s", golden, diff)
		}
	})

	t.Run("an object being deleted is a create with a hole, not a no-op", func(t *testing.T) {
		s := c.newStep(t, "terminating")
		s.manifest(configMap("settings", "  a: \"1\""))
		s.apply(s.plan())
		var cm corev1.ConfigMap
		key := client.ObjectKey{Namespace: "terminating", Name: "settings"}
		if err := c.env.Client.Get(ctx, key, &cm); err != nil {
			t.Fatal(err)
		}
		cm.Finalizers = []string{"example.com/hold"}
		if err := c.env.Client.Update(ctx, &cm); err != nil {
			t.Fatal(err)
		}
		if err := c.env.Client.Delete(ctx, &cm); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := c.env.Client.Get(ctx, key, &cm); err == nil {
				cm.Finalizers = nil
				_ = c.env.Client.Update(ctx, &cm)
			}
		})
		p := s.plan()
		e := entry(t, p, "ConfigMap/terminating/settings")
		if e.Action != "create" || e.Disruption != "unknown" {
			t.Errorf("entry: %+v", e)
		}
		want := []changeset.Hole{{Address: "ConfigMap/terminating/settings", Reason: beingDeleted}}
		if diff := cmp.Diff(want, p.Member.Holes); diff != "" {
			t.Errorf("holes (-want +got):\n%s", diff)
		}
	})

	t.Run("bad input is a precise error", func(t *testing.T) {
		s := c.newStep(t, "bad")
		cases := []struct {
			name, manifest, want string
		}{
			{"unknown kind", "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n", "k8s.yaml: document 1: the cluster serves no kind Widget in example.com/v1"},
			{"duplicate", configMap("a", "  k: v") + configMap("a", "  k: w"), "k8s.yaml: document 2: ConfigMap/bad/a is already declared at k8s.yaml: document 1"},
			{"cluster-scoped with a namespace", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n  namespace: other\n", "k8s.yaml: document 1: Namespace is cluster-scoped and cannot set metadata.namespace"},
			{"captf's label taken", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels: {captf.io/stack: other}\n", `k8s.yaml: document 1: metadata.labels["captf.io/stack"] is set to another value`},
		}
		for _, tc := range cases {
			s.manifest(tc.manifest)
			_, err := Capability{}.Plan(ctx, s.request())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
			}
		}
	})
}

func TestPlanWithMissingInputsReadsNothing(t *testing.T) {
	req := preview.Request{Component: "web", Root: t.TempDir(), Missing: []string{"db"}, Key: previewtest.Key(),
		Inputs: map[string]any{"manifest": "k8s.yaml", "kubeconfig": "does-not-exist"}}
	p, err := Capability{}.Plan(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := []changeset.Hole{{Reason: "inputs from db; re-checked on apply"}}
	if diff := cmp.Diff(want, p.Member.Holes); diff != "" {
		t.Errorf("holes (-want +got):\n%s", diff)
	}
	if len(p.Entries) != 0 || !strings.HasPrefix(p.Member.PlanDigest, DigestPrefix) {
		t.Errorf("plan: %+v", p)
	}
	if _, err := (Capability{}).Apply(context.Background(), req, p); err == nil {
		t.Error("apply with missing inputs did not fail")
	}
	req.Key = previewtest.OtherKey()
	if other, err := (Capability{}).Plan(context.Background(), req); err != nil || other.Member.PlanDigest == p.Member.PlanDigest {
		t.Errorf("under another key: %v, digest %s, want another than %s", err, other.Member.PlanDigest, p.Member.PlanDigest)
	}
}

// TestShortKey: a key missing or shorter than 32 bytes is refused before
// the cluster is read (the kubeconfig does not exist), by Plan and Apply.
func TestShortKey(t *testing.T) {
	for _, key := range [][]byte{nil, previewtest.Key()[:31]} {
		for _, missing := range [][]string{nil, {"db"}} {
			req := preview.Request{Component: "web", Root: t.TempDir(), Missing: missing, Key: key,
				Inputs: map[string]any{"manifest": "k8s.yaml", "kubeconfig": "does-not-exist"}}
			_, err := Capability{}.Plan(context.Background(), req)
			if !errors.Is(err, preview.ErrShortKey) || !strings.Contains(err.Error(), fmt.Sprintf("holds %d bytes", len(key))) {
				t.Errorf("plan with a %d-byte key (missing %v): %v, want ErrShortKey", len(key), missing, err)
			}
			_, err = Capability{}.Apply(context.Background(), req, &preview.Plan{Member: changeset.Member{PlanDigest: DigestPrefix + "x"}})
			if missing == nil && !errors.Is(err, preview.ErrShortKey) {
				t.Errorf("apply with a %d-byte key: %v, want ErrShortKey", len(key), err)
			}
		}
	}
}
