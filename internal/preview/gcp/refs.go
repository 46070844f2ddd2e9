package gcp

import (
	"fmt"
	"slices"
	"strings"
)

// refField is a reference a kind's spec may hold: {name: …} (an object of
// the manifest, or one Config Connector would find by that name) or
// {external: …} (the value as the API takes it).
type refField struct {
	// Path is where the reference is in the spec: keys joined by dots,
	// "[]" after a key for each element of a list. A path that ends in
	// "[]" is a list of references (RunService's cloudSqlInstance.instances).
	Path string
	// Field is the body field the reference becomes, beside it in the
	// same object; "" when it becomes the object that holds it
	// (ipAddress: {addressRef: …} is ipAddress: "projects/…").
	Field string
	// Kind is the kind it names, a key of refKinds; "" for a plain value
	// that names nothing and stands, as written, for the object that
	// holds it (ComputeForwardingRule's ipAddress.ip).
	Kind string
	// Plain says the field is a plain string in Config Connector, the
	// named object's name or its full name, rather than {name} or
	// {external} (SpannerInstance's config).
	Plain bool
	// Refused, when set, says why captf cannot resolve the reference:
	// setting it is an error of the plan.
	Refused string
}

// refKind says what a reference to an object of one kind by its name
// stands for.
type refKind struct {
	// Format is the value a name stands for, {project}, {location} and
	// {value} filled in from the named object; "" for a kind that a name
	// alone does not place (a KMS key needs its key ring), which takes
	// external only.
	Format string
	// Global is the format for an object whose location is "global",
	// when the kind has both.
	Global string
	// LocationField is the spec field of the named object that holds its
	// location; "" is location.
	LocationField string
}

// refKinds are the kinds a reference of a mapped kind can name, with
// what their name stands for in the API that takes the reference, from
// the kinds' CRDs in GoogleCloudPlatform/k8s-config-connector
// (config/crds/resources: the kind a reference names and the form of
// its external), Config Connector's resource reference docs and
// Google's REST references. LocationField is the field the kind's CRD
// holds its region in where it is not location.
var refKinds = map[string]refKind{
	"PubSubTopic":                {Format: "projects/{project}/topics/{value}"},
	"PubSubSchema":               {Format: "projects/{project}/schemas/{value}"},
	"StorageBucket":              {Format: "{value}"},
	"SpannerInstanceConfig":      {Format: "projects/{project}/instanceConfigs/{value}"},
	"KMSCryptoKey":               {},
	"BigQueryTable":              {},
	"ComputeNetwork":             {Format: "projects/{project}/global/networks/{value}"},
	"ComputeSubnetwork":          {Format: "projects/{project}/regions/{location}/subnetworks/{value}", LocationField: "region"},
	"ComputeAddress":             {Format: "projects/{project}/regions/{location}/addresses/{value}", Global: "projects/{project}/global/addresses/{value}"},
	"ComputeBackendService":      {Format: "projects/{project}/regions/{location}/backendServices/{value}", Global: "projects/{project}/global/backendServices/{value}"},
	"ComputeTargetHTTPProxy":     {Format: "projects/{project}/regions/{location}/targetHttpProxies/{value}", Global: "projects/{project}/global/targetHttpProxies/{value}"},
	"ComputeTargetHTTPSProxy":    {Format: "projects/{project}/regions/{location}/targetHttpsProxies/{value}", Global: "projects/{project}/global/targetHttpsProxies/{value}"},
	"ComputeTargetSSLProxy":      {Format: "projects/{project}/global/targetSslProxies/{value}"},
	"ComputeTargetTCPProxy":      {Format: "projects/{project}/regions/{location}/targetTcpProxies/{value}", Global: "projects/{project}/global/targetTcpProxies/{value}"},
	"ComputeTargetGRPCProxy":     {Format: "projects/{project}/global/targetGrpcProxies/{value}"},
	"ComputeTargetVPNGateway":    {Format: "projects/{project}/regions/{location}/targetVpnGateways/{value}", LocationField: "region"},
	"ComputeServiceAttachment":   {Format: "projects/{project}/regions/{location}/serviceAttachments/{value}"},
	"IAMServiceAccount":          {Format: "{value}@{project}.iam.gserviceaccount.com"},
	"SecretManagerSecret":        {Format: "projects/{project}/secrets/{value}"},
	"SecretManagerSecretVersion": {},
	"VPCAccessConnector":         {Format: "projects/{project}/locations/{location}/connectors/{value}"},
	"SQLInstance":                {Format: "{project}:{location}:{value}", LocationField: "region"},
}

// refError is a reference the plan cannot resolve.
type refError struct {
	path, reason string
}

func (e *refError) Error() string { return "spec." + e.path + ": " + e.reason }

// resolveRefs replaces, in body (a copy of the spec), each reference the
// kind's table lists with the field it sets, and returns the objects of
// the manifest it names. A reference it cannot resolve, and one the
// table does not list, is an error that names it.
func (r *resource) resolveRefs(body map[string]any, byName map[string]*resource) ([]*resource, error) {
	var deps []*resource
	for _, rf := range r.Map.Refs {
		err := walkRef(body, strings.Split(rf.Path, "."), "", func(parent map[string]any, key, at string) error {
			named, err := r.replaceRef(rf, parent, key, at, byName)
			for _, dep := range named {
				if !slices.Contains(deps, dep) {
					deps = append(deps, dep)
				}
			}
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	unwrapWhole(body)
	if at := unknownRef(body, ""); at != "" {
		return nil, &refError{at, fmt.Sprintf("%s has no reference there that captf knows, so it cannot say what it names; write the field the API takes instead", r.Doc.Kind)}
	}
	return deps, nil
}

// replaceRef replaces the reference parent[key] (a list of them when key
// ends in "[]") with the field it sets, and returns the objects of the
// manifest it names. at is its path, for errors.
func (r *resource) replaceRef(rf refField, parent map[string]any, key, at string, byName map[string]*resource) ([]*resource, error) {
	if rf.Refused != "" {
		return nil, &refError{at, rf.Refused}
	}
	var value any
	var named []*resource
	if list, ok := strings.CutSuffix(key, "[]"); ok {
		key = list
		items, isList := parent[key].([]any)
		if !isList {
			return nil, &refError{at, "must be a list of references"}
		}
		values := make([]any, len(items))
		for i, it := range items {
			v, dep, err := r.reference(rf, it, byName)
			if err != nil {
				return nil, &refError{fmt.Sprintf("%s.%d", at, i), err.Error()}
			}
			values[i] = v
			if dep != nil {
				named = append(named, dep)
			}
		}
		value = values
	} else {
		v, dep, err := r.reference(rf, parent[key], byName)
		if err != nil {
			return nil, &refError{at, err.Error()}
		}
		value = v
		if dep != nil {
			named = append(named, dep)
		}
	}
	delete(parent, key)
	if rf.Field != "" {
		parent[rf.Field] = value
		return named, nil
	}
	// The reference stands for the whole object that holds it.
	if len(parent) > 0 {
		holder := at[:strings.LastIndex(at, ".")]
		return nil, &refError{at, fmt.Sprintf("%s stands for the whole %s: set nothing beside it", key, holder)}
	}
	parent[refWhole] = value
	return named, nil
}

// refWhole marks, while references are resolved, an object that a
// reference stands for whole.
const refWhole = "\x00ref"

// walkRef calls fn with the object that holds the last key of keys, for
// each place keys reach in v; a "[]" key other than the last goes into
// each element of the list. at is the path so far, for errors. A path
// that is not there is no reference.
func walkRef(v any, keys []string, at string, fn func(parent map[string]any, key, at string) error) error {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	key := keys[0]
	name := strings.TrimSuffix(key, "[]")
	child, present := m[name]
	if !present {
		return nil
	}
	if at != "" {
		at += "."
	}
	at += name
	if len(keys) == 1 {
		return fn(m, key, at)
	}
	if name == key {
		return walkRef(child, keys[1:], at, fn)
	}
	items, _ := child.([]any)
	for i, it := range items {
		if err := walkRef(it, keys[1:], fmt.Sprintf("%s.%d", at, i), fn); err != nil {
			return err
		}
	}
	return nil
}

// unwrapWhole replaces each object that holds only refWhole with its
// value, at any depth.
func unwrapWhole(v any) any {
	switch x := v.(type) {
	case map[string]any:
		if w, ok := x[refWhole]; ok && len(x) == 1 {
			return w
		}
		for k, c := range x {
			x[k] = unwrapWhole(c)
		}
	case []any:
		for i, c := range x {
			x[i] = unwrapWhole(c)
		}
	}
	return v
}

// refKeys are the keys of a Config Connector reference object.
var refKeys = []string{"name", "namespace", "external", "kind", "apiVersion"}

// unknownRef is the path of the first reference left in v, a key ending
// in "Ref" (or "Refs") that holds a reference object (or a list of them):
// "" when there is none.
func unknownRef(v any, at string) string {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(x) {
			here := k
			if at != "" {
				here = at + "." + k
			}
			if strings.HasSuffix(k, "Ref") && isRefObject(x[k]) {
				return here
			}
			if items, ok := x[k].([]any); ok && strings.HasSuffix(k, "Refs") && len(items) > 0 && isRefObject(items[0]) {
				return here
			}
			if found := unknownRef(x[k], here); found != "" {
				return found
			}
		}
	case []any:
		for i, c := range x {
			if found := unknownRef(c, fmt.Sprintf("%s.%d", at, i)); found != "" {
				return found
			}
		}
	}
	return ""
}

func isRefObject(v any) bool {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		return false
	}
	for k := range m {
		if !slices.Contains(refKeys, k) {
			return false
		}
	}
	return true
}

// reference is the value one reference to an object of kind stands for,
// and the object of the manifest it names (nil for none): a plain value
// of no kind is v as written; {external: v}, or a plain string where the
// field is one, is v as written, but a bare name, which stands for what
// {name: v} does; {name: v} stands for the kind's format filled in with
// the project, location and name of the manifest's object of that kind
// and metadata.name v, else with r's project and location and v.
func (r *resource) reference(rf refField, v any, byName map[string]*resource) (any, *resource, error) {
	kind := rf.Kind
	if kind == "" {
		s, ok := v.(string)
		if !ok {
			return nil, nil, fmt.Errorf("must be a string")
		}
		return s, nil, nil
	}
	rk, known := refKinds[kind]
	if !known {
		return nil, nil, fmt.Errorf("captf does not know the kind %s", kind)
	}
	var name, ext string
	switch x := v.(type) {
	case string:
		if !rf.Plain {
			return nil, nil, fmt.Errorf("must be a reference {name: …} or {external: …} to a %s", kind)
		}
		ext = x
	case map[string]any:
		e, hasExt := x["external"].(string)
		n, hasName := x["name"].(string)
		switch {
		case hasExt && hasName:
			return nil, nil, fmt.Errorf("sets both name and external; set one")
		case hasExt:
			ext = e
		case hasName:
			name = n
		}
	default:
		return nil, nil, fmt.Errorf("must be a reference {name: …} or {external: …} to a %s", kind)
	}
	switch {
	case ext != "" && (rk.Format == "" || strings.ContainsAny(ext, "/:@.")):
		return ext, nil, nil
	case ext != "":
		name = ext
	case name == "":
		return nil, nil, fmt.Errorf("names no %s: set name or external", kind)
	}
	if rk.Format == "" {
		return nil, nil, fmt.Errorf("a %s cannot be named by its name %q alone: set external to its full name", kind, name)
	}
	project, location, id := r.Project, r.Location, name
	var dep *resource
	if ext == "" {
		dep = byName[kind+"/"+name]
	}
	if dep != nil {
		project, location, id = dep.Project, dep.Location, dep.Name
		if project == "" {
			project = r.Project
		}
	}
	format := rk.Format
	if location == "global" && rk.Global != "" {
		format = rk.Global
	}
	if strings.Contains(format, "{location}") && location == "" {
		return nil, nil, fmt.Errorf("%s %s has no location to name it by: set external to its full name", kind, name)
	}
	if dep != nil && dep.Map == nil {
		// Not one gcp-apply creates: nothing to order.
		dep = nil
	}
	return fill(format, project, location, id), dep, nil
}
