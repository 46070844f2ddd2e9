package gcp

import "strings"

// How a kind's resource is created, updated and where its location goes.
const (
	// createPut PUTs the body to the resource's own URL (Pub/Sub).
	createPut = "put"
	// createPost POSTs the body, which names the resource, to the
	// collection (Cloud Storage, Compute Engine).
	createPost = "post"
	// createPostID POSTs the body to the collection with the name in the
	// query parameter idParam (Cloud Run).
	createPostID = "post-id"
	// createPostWrapped POSTs {idParam: name, wrap: body} to the collection
	// (Spanner).
	createPostWrapped = "post-wrapped"

	// updatePatch PATCHes the fields that differ (Cloud Storage).
	updatePatch = "patch"
	// updatePatchMask PATCHes {wrap: fields, maskParam: "a,b"} (Pub/Sub,
	// Spanner).
	updatePatchMask = "patch-mask"
	// updatePatchWhole PATCHes the whole body (Cloud Run).
	updatePatchWhole = "patch-whole"
	// updateSetLabels POSTs {labels, labelFingerprint} to …/setLabels: a
	// Compute Engine resource whose only field that changes in place is
	// its labels.
	updateSetLabels = "set-labels"
	// updateNone: the kind has no in-place update.
	updateNone = ""
)

// mapping says how one Config Connector kind is read and written through
// Google's REST API. Paths are relative to the endpoint (or to the
// service's host) and hold {project}, {location} and {name}.
type mapping struct {
	Kind string
	// Service is Google's host of the API when no endpoint is given.
	Service string
	// Path is the resource's URL path.
	Path string
	// Collection is the URL path its list and its create go to.
	Collection string
	// ListKey is the field of a list answer that holds the resources.
	ListKey string
	// Location says where spec.location goes: "" (the kind has none in
	// its URL: it stays a body field), else the URL's {location}.
	Location bool
	Create   string
	Update   string
	// Wrap is the field that wraps the body of a wrapped create or a
	// masked update; IDParam names the resource in a create; MaskParam
	// lists the fields of a masked update.
	Wrap, IDParam, MaskParam string
	// Operation is the path of a long-running operation named by its
	// answer's name ({project}, {location}, {name} filled in), empty for
	// an answer whose name is the operation's full path after the version
	// (OperationVersion).
	Operation        string
	OperationVersion string
	// Immutable are Compute Engine fields that cannot change in place: a
	// difference in one is "replace required", a hole.
	Immutable []string
	// Refs maps a spec field holding a reference ({name} or {external})
	// to the body field it sets and the path a bare name is written as.
	Refs map[string]ref
	// Renames maps a spec field to the body field of another name.
	Renames map[string]string
	// Output names the output the kind has, "<name>"+Output, read from
	// the live field OutputField.
	Output, OutputField string
}

// ref is where a reference goes: the body field, and the full path a bare
// name stands for ({project}, {location}, {value}).
type ref struct {
	Field  string
	Format string
}

// mappings is the table of the kinds gcp-apply maps to REST, each from
// Google's API reference. A kind not here is a hole: the apply skips it.
// Deletes go in the reverse of this order (a subscription before its
// topic).
var mappings = []*mapping{
	{
		Kind: "PubSubTopic", Service: "pubsub.googleapis.com",
		Path: "v1/projects/{project}/topics/{name}", Collection: "v1/projects/{project}/topics", ListKey: "topics",
		Create: createPut, Update: updatePatchMask, Wrap: "topic", MaskParam: "updateMask",
		Refs: map[string]ref{"kmsKeyRef": {Field: "kmsKeyName"}},
	},
	{
		Kind: "PubSubSubscription", Service: "pubsub.googleapis.com",
		Path: "v1/projects/{project}/subscriptions/{name}", Collection: "v1/projects/{project}/subscriptions", ListKey: "subscriptions",
		Create: createPut, Update: updatePatchMask, Wrap: "subscription", MaskParam: "updateMask",
		Refs: map[string]ref{"topicRef": {Field: "topic", Format: "projects/{project}/topics/{value}"}},
	},
	{
		Kind: "StorageBucket", Service: "storage.googleapis.com",
		Path: "storage/v1/b/{name}", Collection: "storage/v1/b?project={project}", ListKey: "items",
		Create: createPost, Update: updatePatch,
	},
	{
		Kind: "SpannerInstance", Service: "spanner.googleapis.com",
		Path: "v1/projects/{project}/instances/{name}", Collection: "v1/projects/{project}/instances", ListKey: "instances",
		Create: createPostWrapped, Update: updatePatchMask, Wrap: "instance", IDParam: "instanceId", MaskParam: "fieldMask",
		OperationVersion: "v1",
		Renames:          map[string]string{"numNodes": "nodeCount"},
		Refs:             map[string]ref{"config": {Field: "config", Format: "projects/{project}/instanceConfigs/{value}"}},
	},
	{
		Kind: "ComputeAddress", Service: "compute.googleapis.com",
		Path:       "compute/v1/projects/{project}/regions/{location}/addresses/{name}",
		Collection: "compute/v1/projects/{project}/regions/{location}/addresses", ListKey: "items",
		Location: true, Create: createPost, Update: updateSetLabels,
		Operation: "compute/v1/projects/{project}/regions/{location}/operations/{name}",
		Immutable: []string{"address", "addressType", "description", "ipVersion", "network", "networkTier", "prefixLength", "purpose", "subnetwork"},
		Refs: map[string]ref{
			"networkRef":    {Field: "network", Format: "projects/{project}/global/networks/{value}"},
			"subnetworkRef": {Field: "subnetwork", Format: "projects/{project}/regions/{location}/subnetworks/{value}"},
		},
		Output: "Address", OutputField: "address",
	},
	{
		Kind: "ComputeForwardingRule", Service: "compute.googleapis.com",
		Path:       "compute/v1/projects/{project}/regions/{location}/forwardingRules/{name}",
		Collection: "compute/v1/projects/{project}/regions/{location}/forwardingRules", ListKey: "items",
		Location: true, Create: createPost, Update: updateNone,
		Operation: "compute/v1/projects/{project}/regions/{location}/operations/{name}",
		Immutable: []string{"IPAddress", "IPProtocol", "backendService", "description", "loadBalancingScheme", "network", "networkTier", "portRange", "ports", "subnetwork"},
		Renames:   map[string]string{"ipAddress": "IPAddress", "ipProtocol": "IPProtocol"},
		Refs: map[string]ref{
			"backendServiceRef": {Field: "backendService", Format: "projects/{project}/regions/{location}/backendServices/{value}"},
			"networkRef":        {Field: "network", Format: "projects/{project}/global/networks/{value}"},
			"subnetworkRef":     {Field: "subnetwork", Format: "projects/{project}/regions/{location}/subnetworks/{value}"},
		},
		Output: "IpAddress", OutputField: "IPAddress",
	},
	{
		Kind: "RunService", Service: "run.googleapis.com",
		Path:       "v2/projects/{project}/locations/{location}/services/{name}",
		Collection: "v2/projects/{project}/locations/{location}/services", ListKey: "services",
		Location: true, Create: createPostID, Update: updatePatchWhole, IDParam: "serviceId",
		OperationVersion: "v2",
		Output:           "Uri", OutputField: "uri",
	},
}

// lookupKind returns the mapping of a Config Connector object: its kind,
// in an apiVersion of a cnrm.cloud.google.com group; nil for any other.
func lookupKind(apiVersion, kind string) *mapping {
	group, _, _ := strings.Cut(apiVersion, "/")
	if !strings.HasSuffix(group, ".cnrm.cloud.google.com") {
		return nil
	}
	for _, m := range mappings {
		if m.Kind == kind {
			return m
		}
	}
	return nil
}

// fill writes the placeholders of a path.
func fill(path, project, location, name string) string {
	return strings.NewReplacer("{project}", project, "{location}", location, "{name}", name, "{value}", name).Replace(path)
}
