package terraformcluster

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
)

// promptly is how soon a watched change must show on an idle object: far
// within the re-check interval (the harness's reconcilers keep the default,
// engine.Recheck), so only a watch explains it.
const promptly = 30 * time.Second

// waitPromptly polls tc until cond holds, failing after promptly.
func (h *harness) waitPromptly(tc *infrav1.TerraformCluster, what string, cond func(*infrav1.TerraformCluster) bool) {
	h.t.Helper()
	deadline := time.Now().Add(promptly)
	for {
		if err := h.c.Get(context.Background(), client.ObjectKeyFromObject(tc), tc); err != nil {
			h.t.Fatal(err)
		}
		if cond(tc) {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: not within %s (re-check every %s); ApplyJobSucceeded: %+v", what, promptly, engine.Recheck, condition(tc, infrav1.ConditionApplyJobSucceeded))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// applyJobReason is a condition on ApplyJobSucceeded's reason.
func applyJobReason(reason string) func(*infrav1.TerraformCluster) bool {
	return func(tc *infrav1.TerraformCluster) bool {
		c := condition(tc, infrav1.ConditionApplyJobSucceeded)
		return c != nil && c.Reason == reason
	}
}

// TestIdentityWatched: an idle object shows at once that it may no longer
// use its TerraformClusterIdentity, and that it may again, whichever
// changed: the identity (its allowed namespaces), the Secret it names (gone,
// back), or the labels of the object's namespace its selector matches.
// Nothing else brings the object back within the test: its re-check is
// minutes away and drift checks are off.
func TestIdentityWatched(t *testing.T) {
	if engine.Recheck < 10*promptly {
		t.Fatalf("re-check every %s: too close to %s to tell a watch from it", engine.Recheck, promptly)
	}
	h := start(t)
	ctx := context.Background()
	if err := h.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "platform"}}); err != nil {
		t.Fatal(err)
	}
	secret := func() *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: "platform"}, Data: map[string][]byte{"SHARED_KEY": []byte("k")}}
	}
	if err := h.c.Create(ctx, secret()); err != nil {
		t.Fatal(err)
	}
	id := &infrav1.TerraformClusterIdentity{ObjectMeta: metav1.ObjectMeta{Name: "shared"},
		Spec: infrav1.TerraformClusterIdentitySpec{SecretRef: infrav1.SecretReference{Name: "shared", Namespace: "platform"},
			AllowedNamespaces: &infrav1.AllowedNamespaces{List: []string{"default"}}}}
	if err := h.c.Create(ctx, id); err != nil {
		t.Fatal(err)
	}
	tc := h.create("watched-identity", infrav1.ApplyAutomatic, "small", func(tc *infrav1.TerraformCluster) {
		tc.Spec.IdentityRef = &infrav1.IdentityReference{Kind: infrav1.IdentityKindTerraformClusterIdentity, Name: "shared"}
	})
	h.wait(tc, "first apply", ready)
	applied := applyJobReason(engine.ReasonApplied)
	jobs := len(h.jobs(tc))

	setAllowed := func(a *infrav1.AllowedNamespaces) {
		t.Helper()
		if err := h.c.Get(ctx, client.ObjectKeyFromObject(id), id); err != nil {
			t.Fatal(err)
		}
		id.Spec.AllowedNamespaces = a
		if err := h.c.Update(ctx, id); err != nil {
			t.Fatal(err)
		}
	}

	// The identity: no longer allowing the namespace, then again.
	setAllowed(&infrav1.AllowedNamespaces{List: []string{"elsewhere"}})
	h.waitPromptly(tc, "IdentityNotAllowed after the identity's change", applyJobReason(engine.ReasonIdentityNotAllowed))
	setAllowed(&infrav1.AllowedNamespaces{List: []string{"default"}})
	h.waitPromptly(tc, "Applied after the identity allows the namespace again", applied)

	// The Secret the identity names: deleted, then back.
	if err := h.c.Delete(ctx, secret()); err != nil {
		t.Fatal(err)
	}
	h.waitPromptly(tc, "IdentityNotFound after the identity's Secret went", applyJobReason(engine.ReasonIdentityNotFound))
	if err := h.c.Create(ctx, secret()); err != nil {
		t.Fatal(err)
	}
	h.waitPromptly(tc, "Applied after the identity's Secret is back", applied)

	// The namespace's labels, which the identity's selector matches.
	setLabels := func(l map[string]string) {
		t.Helper()
		var ns corev1.Namespace
		if err := h.c.Get(ctx, client.ObjectKey{Name: "default"}, &ns); err != nil {
			t.Fatal(err)
		}
		ns.Labels = l
		if err := h.c.Update(ctx, &ns); err != nil {
			t.Fatal(err)
		}
	}
	setLabels(map[string]string{"kubernetes.io/metadata.name": "default", "team": "infra"})
	setAllowed(&infrav1.AllowedNamespaces{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "infra"}}})
	// The identity's own change brings the object back; it is allowed.
	time.Sleep(2 * time.Second)
	h.waitPromptly(tc, "Applied under a selector that matches the namespace", applied)
	setLabels(map[string]string{"kubernetes.io/metadata.name": "default", "team": "other"})
	h.waitPromptly(tc, "IdentityNotAllowed after the namespace's label changed", applyJobReason(engine.ReasonIdentityNotAllowed))
	setLabels(map[string]string{"kubernetes.io/metadata.name": "default", "team": "infra"})
	h.waitPromptly(tc, "Applied after the namespace's label is back", applied)

	// Nothing was due throughout: no Job ran for any of it.
	if n := len(h.jobs(tc)); n != jobs {
		t.Errorf("%d Jobs, want the %d of the first apply", n, jobs)
	}
}
