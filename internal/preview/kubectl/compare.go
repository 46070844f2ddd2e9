package kubectl

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/captf/captf/pkg/changeset"
)

// objectRef names one object: its API group, kind, namespace ("" when
// cluster-scoped) and name.
type objectRef struct {
	Group     string
	Kind      string
	Namespace string
	Name      string
}

// address is the entry address: Kind/namespace/name, or Kind/name for a
// cluster-scoped object. It is also how outputs name an object.
func (r objectRef) address() string {
	if r.Namespace == "" {
		return r.Kind + "/" + r.Name
	}
	return r.Kind + "/" + r.Namespace + "/" + r.Name
}

func (r objectRef) isSecret() bool { return r.Group == "" && r.Kind == "Secret" }

// rollingKinds are the workloads whose pods are replaced when anything under
// spec.template changes. A ReplicaSet or ReplicationController keeps its pods
// (only new pods get the template), a Job's template cannot change and a
// CronJob's only reaches its next Job, so none of those roll.
var rollingKinds = map[[2]string]bool{
	{"apps", "Deployment"}:                    true,
	{"apps", "StatefulSet"}:                   true,
	{"apps", "DaemonSet"}:                     true,
	{"argoproj.io", "Rollout"}:                true,
	{"apps.openshift.io", "DeploymentConfig"}: true,
}

// lastApplied is the annotation client-side kubectl apply keeps a copy of
// the whole object in; on a Secret it holds the values in clear.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// sensitive says whether the field at p carries a value never to be shown.
func (r objectRef) sensitive(p path) bool {
	if !r.isSecret() || len(p) == 0 {
		return false
	}
	if p[0] == "data" || p[0] == "stringData" {
		return true
	}
	return len(p) >= 3 && p[0] == "metadata" && p[1] == "annotations" && p[2] == lastApplied
}

// change is one field that differs. A side that is absent has has* false.
type change struct {
	Path      path
	Before    any
	After     any
	HasBefore bool
	HasAfter  bool
}

// objectPlan is what the plan found for one object.
type objectPlan struct {
	Ref        objectRef
	Action     string
	Disruption string
	Changes    []change
	// Hole says why the plan cannot bind the object (the API server refused
	// its dry run, it is being deleted); empty when it can.
	Hole string
	// Waits lists what the member creates first that the object's dry run
	// needs (its Namespace, its CRD): the apply dry-runs it once they are
	// there.
	Waits []string
}

// bookkeeping lists the metadata fields the server writes by itself; they
// differ between a dry run and the live object without any change.
var bookkeeping = []string{
	"managedFields", "resourceVersion", "uid", "generation", "creationTimestamp",
	"deletionTimestamp", "deletionGracePeriodSeconds", "selfLink",
}

// withoutBookkeeping returns a copy of obj without status and the metadata
// fields of bookkeeping.
func withoutBookkeeping(obj map[string]any) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		if k != "status" {
			out[k] = v
		}
	}
	if md, ok := obj["metadata"].(map[string]any); ok {
		clean := make(map[string]any, len(md))
		for k, v := range md {
			if !slices.Contains(bookkeeping, k) {
				clean[k] = v
			}
		}
		out["metadata"] = clean
	}
	return out
}

// decide compares one object. declared is the document as sent, live the
// object in the cluster (nil when there is none) and dry the server's answer
// to the dry run. A create lists every declared field with the value the
// server would store; an update lists every field that differs between the
// live object and the dry run.
func decide(ref objectRef, declared, live, dry map[string]any) objectPlan {
	if live == nil {
		return objectPlan{Ref: ref, Action: changeset.ActionCreate, Changes: declaredFields(declared, dry)}
	}
	var changes []change
	diff(nil, withoutBookkeeping(live), withoutBookkeeping(dry), true, true, &changes)
	if len(changes) == 0 {
		return objectPlan{Ref: ref, Action: changeset.ActionNoOp}
	}
	op := objectPlan{Ref: ref, Action: changeset.ActionUpdate, Changes: changes}
	if rollingKinds[[2]string{ref.Group, ref.Kind}] {
		for _, c := range changes {
			if len(c.Path) >= 2 && c.Path[0] == "spec" && c.Path[1] == "template" {
				op.Disruption = changeset.DisruptionRolling
				break
			}
		}
	}
	return op
}

// refused is the plan of an object the plan cannot bind, for the reason
// hole (the server refused its dry run): an update (a create when nothing is
// live) with unknown disruption. With no
// dry-run answer to compare, its changes are the declared fields whose live
// value differs from the manifest.
func refused(ref objectRef, declared, live map[string]any, hole string) objectPlan {
	op := objectPlan{Ref: ref, Action: changeset.ActionUpdate, Disruption: changeset.DisruptionUnknown, Hole: hole}
	if live == nil {
		op.Action = changeset.ActionCreate
		op.Changes = declaredFields(declared, nil)
		return op
	}
	for _, c := range declaredFields(declared, nil) {
		before, ok := lookup(live, c.Path)
		if ok && jsonEqual(before, c.After) {
			continue
		}
		c.Before, c.HasBefore = before, ok
		op.Changes = append(op.Changes, c)
	}
	return op
}

// declaredFields lists every field the document declares, with the value
// dry holds at its path when it holds one (the server may normalise a value,
// e.g. a quantity) and the declared value otherwise. Status and bookkeeping
// (such as the creationTimestamp: null that generated manifests carry) are
// not applied by the server, so they are not listed.
func declaredFields(declared, dry map[string]any) []change {
	var fields []change
	diff(nil, nil, withoutBookkeeping(declared), false, true, &fields)
	for i, f := range fields {
		if v, ok := lookup(dry, f.Path); ok && dry != nil {
			fields[i].After = v
		}
	}
	return fields
}

// diff appends to out each field that differs between before and after,
// down to the leaves. Maps are compared key by key; lists of the same length
// index by index; a list whose length changes is one change holding both
// whole lists. A side that is absent is walked down to its leaves, so a
// created object lists every leaf it declares. Empty maps and lists are
// leaves.
func diff(p path, before, after any, hasBefore, hasAfter bool, out *[]change) {
	bm, bIsMap := before.(map[string]any)
	am, aIsMap := after.(map[string]any)
	bl, bIsList := before.([]any)
	al, aIsList := after.([]any)
	switch {
	case hasBefore && hasAfter && bIsMap && aIsMap:
		keys := make([]string, 0, len(bm)+len(am))
		for k := range bm {
			keys = append(keys, k)
		}
		for k := range am {
			if _, ok := bm[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			bv, bok := bm[k]
			av, aok := am[k]
			diff(p.Child(k), bv, av, bok, aok, out)
		}
	case hasBefore && hasAfter && bIsList && aIsList && len(bl) == len(al):
		for i := range bl {
			diff(p.Child(i), bl[i], al[i], true, true, out)
		}
	case !hasBefore && aIsMap && len(am) > 0:
		for _, k := range sortedKeys(am) {
			diff(p.Child(k), nil, am[k], false, true, out)
		}
	case !hasAfter && bIsMap && len(bm) > 0:
		for _, k := range sortedKeys(bm) {
			diff(p.Child(k), bm[k], nil, true, false, out)
		}
	case !hasBefore && aIsList && len(al) > 0:
		for i := range al {
			diff(p.Child(i), nil, al[i], false, true, out)
		}
	case !hasAfter && bIsList && len(bl) > 0:
		for i := range bl {
			diff(p.Child(i), bl[i], nil, true, false, out)
		}
	default:
		if hasBefore && hasAfter && jsonEqual(before, after) {
			return
		}
		if !hasBefore && !hasAfter {
			return
		}
		*out = append(*out, change{Path: p, Before: before, After: after, HasBefore: hasBefore, HasAfter: hasAfter})
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// jsonEqual compares two decoded JSON values by their encoding, so that an
// int64 and a float64 of the same number are equal.
func jsonEqual(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// entry is the change-set entry of op. Values of sensitive fields are left
// out; every other value is shown as JSON.
func (op objectPlan) entry(member string) changeset.Entry {
	e := changeset.Entry{Member: member, Address: op.Ref.address(), Action: op.Action, Disruption: op.Disruption}
	if len(op.Waits) > 0 {
		e.Note = "the dry run waits for " + strings.Join(op.Waits, " and ") + ", which this member creates first; the manifest binds the body"
	}
	for _, c := range op.Changes {
		a := changeset.Attribute{Name: c.Path.String()}
		if op.Ref.sensitive(c.Path) {
			a.Sensitive = true
		} else {
			if c.HasBefore {
				a.Before = mustJSON(c.Before)
			}
			if c.HasAfter {
				a.After = mustJSON(c.After)
			}
		}
		e.Attributes = append(e.Attributes, a)
	}
	return e
}

// mustJSON encodes a value decoded from JSON. Such a value always encodes
// (it holds no NaN, no channel); null stands in should one not.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}
