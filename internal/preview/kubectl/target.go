package kubectl

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

// target is the cluster a step applies to.
type target struct {
	// Server is the API server's URL and Context the kubeconfig context
	// used; both go into the digest.
	Server  string
	Context string
	// Namespace is the context's namespace, "default" when it names none.
	Namespace string
	dyn       dynamic.Interface
	disc      discovery.CachedDiscoveryInterface
	mapper    *restmapper.DeferredDiscoveryRESTMapper
}

// connect loads the kubeconfig with the standard loading rules (KUBECONFIG,
// then ~/.kube/config), or the kubeconfig input (relative to root), and the
// context input or the current context.
// redact removes the Secret values seen so far from a warning.
func connect(root string, cfg config, redact func(string) string) (*target, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if cfg.Kubeconfig != "" {
		p := cfg.Kubeconfig
		if !filepath.IsAbs(p) {
			p = filepath.Join(root, p)
		}
		rules.ExplicitPath = p
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: cfg.Context})
	raw, err := cc.RawConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	name := cfg.Context
	if name == "" {
		name = raw.CurrentContext
	}
	// With no kubeconfig at all, client-go falls back to the pod's service
	// account when it runs in a cluster.
	inCluster := cfg.Kubeconfig == "" && cfg.Context == "" && len(raw.Contexts) == 0
	if _, ok := raw.Contexts[name]; !ok && !inCluster {
		if name == "" {
			return nil, fmt.Errorf("kubeconfig: no current context, and the context input is not set")
		}
		return nil, fmt.Errorf("kubeconfig: no context %q", name)
	}
	if inCluster {
		name = "in-cluster"
	}
	rc, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	// client-go's defaults (5 requests a second) would make a plan of a
	// hundred objects wait; kubectl raises them the same way.
	if rc.QPS == 0 {
		rc.QPS, rc.Burst = 50, 100
	}
	rc.WarningHandlerWithContext = warnings{redact: redact}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes discovery: %w", err)
	}
	cached := memory.NewMemCacheClient(disc)
	return &target{
		Server:    rc.Host,
		Context:   name,
		Namespace: ns,
		dyn:       dyn,
		disc:      cached,
		mapper:    restmapper.NewDeferredDiscoveryRESTMapper(cached),
	}, nil
}

// warnings logs the API server's warnings (a deprecated API, an unknown
// field, a policy in warn mode) to the context's logger, with every Secret
// value the plan saw redacted: a policy's message may quote one.
type warnings struct{ redact func(string) string }

// HandleWarningHeaderWithContext logs one warning.
func (w warnings) HandleWarningHeaderWithContext(ctx context.Context, code int, _ string, text string) {
	if code != 299 || text == "" {
		return
	}
	klog.FromContext(ctx).Info("Warning from the API server", "warning", w.redact(text))
}

// mapping finds the resource of a kind, asking discovery again once when the
// kind is not known yet (a CRD installed since the last look).
func (t *target) mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := t.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		t.mapper.Reset()
		m, err = t.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	return m, err
}

// deletableKinds is every kind the API server serves that can be listed
// and deleted, at its preferred version, less core Endpoints (the
// endpoints controller copies a Service's labels onto them). unread names
// the API groups discovery could not read (an aggregated API that is
// down): their kinds are left out.
func (t *target) deletableKinds() (kinds []*meta.RESTMapping, unread []string, err error) {
	lists, err := discovery.ServerPreferredResources(t.disc)
	var failed *discovery.ErrGroupDiscoveryFailed
	if errors.As(err, &failed) {
		for gv := range failed.Groups {
			unread = append(unread, gv.String())
		}
		slices.Sort(unread)
	} else if err != nil {
		return nil, nil, fmt.Errorf("discovery: %w", err)
	}
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			return nil, nil, fmt.Errorf("discovery: %w", err)
		}
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "delete") ||
				gv.Group == "" && r.Kind == "Endpoints" {
				continue
			}
			scope := meta.RESTScopeRoot
			if r.Namespaced {
				scope = meta.RESTScopeNamespace
			}
			kinds = append(kinds, &meta.RESTMapping{Resource: gv.WithResource(r.Name), GroupVersionKind: gv.WithKind(r.Kind), Scope: scope})
		}
	}
	return kinds, unread, nil
}

// resource is the client of one object's resource, in its namespace.
func (t *target) resource(m *meta.RESTMapping, namespace string) dynamic.ResourceInterface {
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return t.dyn.Resource(m.Resource).Namespace(namespace)
	}
	return t.dyn.Resource(m.Resource)
}
