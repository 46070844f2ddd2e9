package kubectl

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/captf/captf/internal/preview"
	"github.com/captf/captf/pkg/changeset"
)

// Labels captf sets on every object it applies. The stack label says which
// member owns the object; the managed-by label marks it as captf's. Only an
// object carrying both is ever deleted by delete: owned-only.
const (
	StackLabel     = "captf.io/stack"
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "captf"
)

// FieldManager is the server-side apply field manager of a stack.
func FieldManager(stack string) string { return "captf:" + stack }

// resolved is a document placed in the cluster: its resource, its namespace
// defaulted and captf's labels set.
type resolved struct {
	document
	Ref     objectRef
	Mapping *meta.RESTMapping
	// CRD is the CustomResourceDefinition of the manifest that defines
	// the kind, when the cluster does not serve it yet; nil otherwise.
	CRD *objectRef
}

// deletion is a live object delete: owned-only would remove.
type deletion struct {
	Ref     objectRef
	Mapping *meta.RESTMapping
	UID     string
}

// planned is one plan with what Apply and the outputs need beside it.
type planned struct {
	cfg     config
	target  *target
	docs    []resolved
	objects []objectPlan // one per document, in order, then the deletes
	live    []map[string]any
	dry     []map[string]any
	deletes []deletion
	holes   []changeset.Hole
	// secrets are the Secret values the plan saw, to keep out of messages.
	secrets []string
	// inSecret is true while a request about a Secret is under way, for
	// the warnings it may bring.
	inSecret bool
	digest   string
}

// plan reads the manifest and the cluster and decides every object. Its
// digest binds the Secret values under req.Key; a key shorter than
// preview.MinKeySize is refused before the cluster is read.
func plan(ctx context.Context, req preview.Request) (*planned, error) {
	cfg, err := parseInputs(req.Component, req.Inputs)
	if err != nil {
		return nil, err
	}
	if err := preview.CheckKey(req.Key); err != nil {
		return nil, fmt.Errorf("member %s: %w", cfg.Stack, err)
	}
	p := &planned{cfg: cfg}
	if len(req.Missing) > 0 {
		p.holes = []changeset.Hole{{Reason: "inputs from " + strings.Join(req.Missing, ", ") + "; re-checked on apply"}}
		p.digest, err = missingDigest(cfg, req.Missing, req.Key)
		return p, err
	}
	docs, err := readManifest(req.Root, cfg.Manifest)
	if err != nil {
		return nil, err
	}
	if p.target, err = connect(req.Root, cfg, p.redactWarning); err != nil {
		return nil, err
	}
	if p.docs, err = p.resolve(docs); err != nil {
		return nil, err
	}
	for _, d := range p.docs {
		if d.Ref.isSecret() {
			p.secrets = append(p.secrets, secretValues(d.Object)...)
		}
	}
	for _, d := range p.docs {
		if err := p.planObject(ctx, d); err != nil {
			return nil, err
		}
	}
	if cfg.Delete == DeleteOwnedOnly {
		if err := p.planDeletes(ctx); err != nil {
			return nil, err
		}
	}
	for _, op := range p.objects {
		if op.Hole != "" {
			p.holes = append(p.holes, changeset.Hole{Address: op.Ref.address(), Reason: op.Hole})
		}
	}
	p.digest, err = p.computeDigest(req.Key)
	return p, err
}

// resolve puts the documents in the order the apply takes (applyOrder),
// maps each to its resource (a kind the cluster does not serve yet to the
// one a CRD of the manifest defines), defaults its namespace, sets captf's
// labels and refuses an object declared twice.
func (p *planned) resolve(docs []document) ([]resolved, error) {
	docs = applyOrder(docs)
	out := make([]resolved, 0, len(docs))
	seen := map[objectRef]string{}
	for _, d := range docs {
		gv, err := schema.ParseGroupVersion(d.APIVersion)
		if err != nil {
			return nil, fmt.Errorf("%s: apiVersion: %w", d.Where, err)
		}
		var crd *objectRef
		m, err := p.target.mapping(gv.WithKind(d.Kind))
		if meta.IsNoMatchError(err) {
			if m, crd = definedBy(docs, gv.WithKind(d.Kind)); m == nil {
				return nil, fmt.Errorf("%s: the cluster serves no kind %s in %s, and no CustomResourceDefinition of the manifest defines it", d.Where, d.Kind, d.APIVersion)
			}
			err = nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: discovery: %w", d.Where, err)
		}
		md := d.Object["metadata"].(map[string]any) // checkObject made sure
		ns, _ := md["namespace"].(string)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			if ns == "" {
				ns = p.defaultNamespace()
			}
			md["namespace"] = ns
		} else if ns != "" {
			return nil, fmt.Errorf("%s: %s is cluster-scoped and cannot set metadata.namespace", d.Where, d.Kind)
		}
		labels, _ := md["labels"].(map[string]any)
		if labels == nil {
			labels = map[string]any{}
		}
		for _, l := range [][2]string{{StackLabel, p.cfg.Stack}, {ManagedByLabel, ManagedByValue}} {
			if have, ok := labels[l[0]]; ok && have != l[1] {
				return nil, fmt.Errorf("%s: metadata.labels[%q] is set to another value; captf sets it to mark what it applies", d.Where, l[0])
			}
			labels[l[0]] = l[1]
		}
		md["labels"] = labels
		ref := objectRef{Group: gv.Group, Kind: d.Kind, Namespace: ns, Name: d.Name}
		if first, dup := seen[ref]; dup {
			return nil, fmt.Errorf("%s: %s is already declared at %s", d.Where, ref.address(), first)
		}
		seen[ref] = d.Where
		out = append(out, resolved{document: d, Ref: ref, Mapping: m, CRD: crd})
	}
	return out, nil
}

// applyOptions are those of the real apply; the plan adds dryRun=All. Force
// takes the fields the manifest sets from any other field manager, as the
// reviewed plan shows them changing.
func (p *planned) applyOptions(dryRun bool) metav1.ApplyOptions {
	o := metav1.ApplyOptions{FieldManager: FieldManager(p.cfg.Stack), Force: true}
	if dryRun {
		o.DryRun = []string{metav1.DryRunAll}
	}
	return o
}

// planObject reads one object and dry-runs its apply.
func (p *planned) planObject(ctx context.Context, d resolved) error {
	secret := d.Ref.isSecret()
	p.inSecret = secret
	defer func() { p.inSecret = false }()
	if waits := p.waitsFor(d); len(waits) > 0 {
		// What the object needs does not exist yet, so neither does the
		// object, and the server cannot dry-run it: a create of what the
		// manifest declares, which the digest binds, dry-run by the apply
		// once what it waits for is there.
		op := decide(d.Ref, d.Object, nil, nil)
		op.Waits = waits
		p.objects = append(p.objects, op)
		p.live = append(p.live, nil)
		p.dry = append(p.dry, nil)
		return nil
	}
	client := p.target.resource(d.Mapping, d.Ref.Namespace)
	var live map[string]any
	got, err := client.Get(ctx, d.Ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("%s: read %s: %w", d.Where, d.Ref.address(), errors.New(p.redact(err.Error(), secret)))
	default:
		live = got.Object
		if secret {
			p.secrets = append(p.secrets, secretValues(live)...)
		}
	}
	if live != nil && got.GetDeletionTimestamp() != nil {
		// An apply would change an object that is going away (its
		// finalizers still run); the reviewer must see that, not a no-op.
		p.objects = append(p.objects, refused(d.Ref, d.Object, nil, beingDeleted))
		p.live = append(p.live, nil)
		p.dry = append(p.dry, nil)
		return nil
	}
	var op objectPlan
	var dry map[string]any
	answer, err := client.Apply(ctx, d.Ref.Name, &unstructured.Unstructured{Object: d.Object}, p.applyOptions(true))
	var status apierrors.APIStatus
	switch {
	case err == nil:
		dry = answer.Object
		op = decide(d.Ref, d.Object, live, dry)
	case errors.As(err, &status):
		op = refused(d.Ref, d.Object, live, "the API server refused the dry run: "+p.redact(status.Status().Message, secret))
	default:
		return fmt.Errorf("%s: dry run of %s: %w", d.Where, d.Ref.address(), errors.New(p.redact(err.Error(), secret)))
	}
	p.objects = append(p.objects, op)
	p.live = append(p.live, live)
	p.dry = append(p.dry, dry)
	return nil
}

// beingDeleted is the hole of an object whose deletion is under way.
const beingDeleted = "the live object is being deleted (its finalizers have not finished); plan again once it is gone"

// waitsFor lists what the member creates before d that d's dry run
// needs: the Namespace it is in, the CRD that defines its kind. Both are
// planned before d (applyOrder).
func (p *planned) waitsFor(d resolved) []string {
	var waits []string
	if d.Ref.Namespace != "" && p.creates(objectRef{Kind: "Namespace", Name: d.Ref.Namespace}) {
		waits = append(waits, "Namespace/"+d.Ref.Namespace)
	}
	if d.CRD != nil {
		waits = append(waits, d.CRD.address())
	}
	return waits
}

// creates says whether the plan so far creates ref, without a hole.
func (p *planned) creates(ref objectRef) bool {
	for _, op := range p.objects {
		if op.Ref == ref && op.Action == changeset.ActionCreate && op.Hole == "" {
			return true
		}
	}
	return false
}

// planDeletes lists the objects of every kind the API server serves that
// carry both of captf's labels for this stack, and plans a delete for each
// one the manifest no longer declares, so that dropping the last object of
// any kind still deletes it. An object a controller owns (an EndpointSlice
// with its Service's labels) is the controller's, never deleted here.
// Namespaced kinds are listed in the step's namespaces: the default one,
// each one a document is in and each Namespace the manifest declares. Cluster-scoped kinds are listed across
// the cluster. API groups discovery cannot read leave a hole.
func (p *planned) planDeletes(ctx context.Context) error {
	declared := map[objectRef]bool{}
	var mappings []*meta.RESTMapping
	kinds := map[schema.GroupKind]bool{}
	namespaces := []string{p.defaultNamespace()}
	for _, d := range p.docs {
		declared[d.Ref] = true
		if gk := d.Mapping.GroupVersionKind.GroupKind(); !kinds[gk] {
			kinds[gk] = true
			mappings = append(mappings, d.Mapping)
		}
		ns := d.Ref.Namespace
		if d.Ref.Group == "" && d.Ref.Kind == "Namespace" {
			ns = d.Ref.Name
		}
		if ns != "" && !slices.Contains(namespaces, ns) {
			namespaces = append(namespaces, ns)
		}
	}
	served, unread, err := p.target.deletableKinds()
	if err != nil {
		return fmt.Errorf("delete %s: %w", DeleteOwnedOnly, err)
	}
	for _, m := range served {
		if gk := m.GroupVersionKind.GroupKind(); !kinds[gk] {
			kinds[gk] = true
			mappings = append(mappings, m)
		}
	}
	if len(unread) > 0 {
		p.holes = append(p.holes, changeset.Hole{Reason: fmt.Sprintf("delete %s: the API groups %s could not be read, so objects of their kinds are not planned for delete", DeleteOwnedOnly, strings.Join(unread, ", "))})
	}
	selector := StackLabel + "=" + p.cfg.Stack + "," + ManagedByLabel + "=" + ManagedByValue
	var found []deletion
	for _, m := range mappings {
		scopes := []string{""}
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			scopes = namespaces
		}
		for _, ns := range scopes {
			list, err := p.target.resource(m, ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
			switch {
			case apierrors.IsForbidden(err):
				// Not this identity's to list, so not its to delete.
				p.holes = append(p.holes, changeset.Hole{Reason: fmt.Sprintf("delete %s: listing %s%s is forbidden, so its objects are not planned for delete", DeleteOwnedOnly, m.Resource.GroupResource(), inNamespace(ns))})
				continue
			case apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err):
				continue // gone since discovery
			case err != nil:
				return fmt.Errorf("list %s for delete %s: %w", m.Resource.Resource, DeleteOwnedOnly, err)
			}
			for _, item := range list.Items {
				ref := objectRef{Group: m.GroupVersionKind.Group, Kind: m.GroupVersionKind.Kind, Namespace: item.GetNamespace(), Name: item.GetName()}
				if declared[ref] || item.GetDeletionTimestamp() != nil || metav1.GetControllerOfNoCopy(&item) != nil {
					continue
				}
				found = append(found, deletion{Ref: ref, Mapping: m, UID: string(item.GetUID())})
			}
		}
	}
	// The reverse of the apply's order: the objects in a namespace or of
	// a custom kind before their CRDs, CRDs before Namespaces.
	slices.SortFunc(found, func(a, b deletion) int {
		if c := applyRank(b.Ref.Group, b.Ref.Kind) - applyRank(a.Ref.Group, a.Ref.Kind); c != 0 {
			return c
		}
		return strings.Compare(a.Ref.Group+"\x00"+a.Ref.address(), b.Ref.Group+"\x00"+b.Ref.address())
	})
	for _, d := range found {
		p.deletes = append(p.deletes, d)
		p.objects = append(p.objects, objectPlan{Ref: d.Ref, Action: changeset.ActionDelete})
	}
	return nil
}

func inNamespace(ns string) string {
	if ns == "" {
		return ""
	}
	return " in namespace " + ns
}

// defaultNamespace is the namespace of a namespaced object that names none:
// the namespace input, else the kubeconfig context's.
func (p *planned) defaultNamespace() string {
	if p.cfg.Namespace != "" {
		return p.cfg.Namespace
	}
	return p.target.Namespace
}

// secretValues returns the values of a Secret's data (as written and
// decoded) and stringData (as written and encoded).
func secretValues(obj map[string]any) []string {
	var vals []string
	if data, ok := obj["data"].(map[string]any); ok {
		for _, v := range data {
			s, _ := v.(string)
			vals = append(vals, s)
			if dec, err := base64.StdEncoding.DecodeString(s); err == nil {
				vals = append(vals, string(dec))
			}
		}
	}
	if data, ok := obj["stringData"].(map[string]any); ok {
		for _, v := range data {
			s, _ := v.(string)
			// The server stores stringData in data, base64-encoded, and
			// may quote it that way.
			vals = append(vals, s, base64.StdEncoding.EncodeToString([]byte(s)))
		}
	}
	return vals
}

// minRedacted is the shortest Secret value looked for in a message about an
// object that is not a Secret. A message about a Secret that holds a shorter
// value is withheld whole, since replacing every occurrence of a short
// string would not read.
const minRedacted = 4

// withheld replaces a message that could hold a short Secret value.
const withheld = "(message withheld: it could hold a Secret value)"

// redact removes every Secret value the plan saw from a server's message.
// aboutSecret says the message answers a request about a Secret, where a
// short value is as likely to be quoted as a long one.
func (p *planned) redact(msg string, aboutSecret bool) string {
	return redact(msg, p.secrets, aboutSecret)
}

// redactWarning redacts a warning of the request under way.
func (p *planned) redactWarning(msg string) string {
	return p.redact(msg, p.inSecret)
}

func redact(msg string, secrets []string, aboutSecret bool) string {
	// Longest first: a value may hold another.
	secrets = slices.Clone(secrets)
	slices.SortFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	for _, s := range secrets {
		if s == "" || !strings.Contains(msg, s) {
			continue
		}
		if len(s) < minRedacted {
			if aboutSecret {
				return withheld
			}
			continue
		}
		msg = strings.ReplaceAll(msg, s, "<redacted>")
	}
	return msg
}

// entries are the change-set entries of the plan.
func (p *planned) entries() []changeset.Entry {
	out := make([]changeset.Entry, 0, len(p.objects))
	for _, op := range p.objects {
		out = append(out, op.entry(p.cfg.Stack))
	}
	return out
}
