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
	// Refs are the references the kind's spec may hold, at any depth.
	Refs []refField
	// Renames maps a spec field to the body field of another name.
	Renames map[string]string
	// Output names the output the kind has, "<name>"+Output, read from
	// the live field OutputField.
	Output, OutputField string
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
		Refs: []refField{
			{Path: "kmsKeyRef", Field: "kmsKeyName", Kind: "KMSCryptoKey"},
			{Path: "schemaSettings.schemaRef", Field: "schema", Kind: "PubSubSchema"},
		},
	},
	{
		Kind: "PubSubSubscription", Service: "pubsub.googleapis.com",
		Path: "v1/projects/{project}/subscriptions/{name}", Collection: "v1/projects/{project}/subscriptions", ListKey: "subscriptions",
		Create: createPut, Update: updatePatchMask, Wrap: "subscription", MaskParam: "updateMask",
		Refs: []refField{
			{Path: "topicRef", Field: "topic", Kind: "PubSubTopic"},
			{Path: "deadLetterPolicy.deadLetterTopicRef", Field: "deadLetterTopic", Kind: "PubSubTopic"},
			{Path: "bigqueryConfig.tableRef", Field: "table", Kind: "BigQueryTable"},
			{Path: "cloudStorageConfig.bucketRef", Field: "bucket", Kind: "StorageBucket"},
		},
	},
	{
		Kind: "StorageBucket", Service: "storage.googleapis.com",
		Path: "storage/v1/b/{name}", Collection: "storage/v1/b?project={project}", ListKey: "items",
		Create: createPost, Update: updatePatch,
		Refs: []refField{
			{Path: "encryption.kmsKeyRef", Field: "defaultKmsKeyName", Kind: "KMSCryptoKey"},
			{Path: "ipFilter.vpcNetworkSources[].networkRef", Field: "network", Kind: "ComputeNetwork"},
		},
	},
	{
		Kind: "SpannerInstance", Service: "spanner.googleapis.com",
		Path: "v1/projects/{project}/instances/{name}", Collection: "v1/projects/{project}/instances", ListKey: "instances",
		Create: createPostWrapped, Update: updatePatchMask, Wrap: "instance", IDParam: "instanceId", MaskParam: "fieldMask",
		OperationVersion: "v1",
		Renames:          map[string]string{"numNodes": "nodeCount"},
		// config is a plain string in Config Connector, a name of the
		// instance config, which the API takes as a path.
		Refs: []refField{{Path: "config", Field: "config", Kind: "SpannerInstanceConfig", Plain: true}},
	},
	{
		Kind: "ComputeAddress", Service: "compute.googleapis.com",
		Path:       "compute/v1/projects/{project}/regions/{location}/addresses/{name}",
		Collection: "compute/v1/projects/{project}/regions/{location}/addresses", ListKey: "items",
		Location: true, Create: createPost, Update: updateSetLabels,
		Operation: "compute/v1/projects/{project}/regions/{location}/operations/{name}",
		Immutable: []string{"address", "addressType", "description", "ipVersion", "network", "networkTier", "prefixLength", "purpose", "subnetwork"},
		Refs: []refField{
			{Path: "networkRef", Field: "network", Kind: "ComputeNetwork"},
			{Path: "subnetworkRef", Field: "subnetwork", Kind: "ComputeSubnetwork"},
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
		// ipAddress and target are objects holding one reference (or
		// one plain value) in Config Connector, single fields in the API.
		Refs: []refField{
			{Path: "backendServiceRef", Field: "backendService", Kind: "ComputeBackendService"},
			{Path: "networkRef", Field: "network", Kind: "ComputeNetwork"},
			{Path: "subnetworkRef", Field: "subnetwork", Kind: "ComputeSubnetwork"},
			{Path: "ipAddress.addressRef", Kind: "ComputeAddress"},
			{Path: "ipAddress.ip", Plain: true},
			{Path: "target.googleAPIsBundle", Plain: true},
			{Path: "target.targetHTTPProxyRef", Kind: "ComputeTargetHTTPProxy"},
			{Path: "target.targetHTTPSProxyRef", Kind: "ComputeTargetHTTPSProxy"},
			{Path: "target.targetSSLProxyRef", Kind: "ComputeTargetSSLProxy"},
			{Path: "target.targetTCPProxyRef", Kind: "ComputeTargetTCPProxy"},
			{Path: "target.targetGRPCProxyRef", Kind: "ComputeTargetGRPCProxy"},
			{Path: "target.targetVPNGatewayRef", Kind: "ComputeTargetVPNGateway"},
			{Path: "target.serviceAttachmentRef", Kind: "ComputeServiceAttachment"},
			// Config Connector reads the attachment from the
			// MemorystoreInstance's status, which a plan cannot.
			{Path: "target.memorystoreInstanceServiceAttachmentRef", Refused: "names the service attachment through a MemorystoreInstance's status, which captf cannot read; set target.serviceAttachmentRef.external to the attachment instead"},
		},
		Output: "IpAddress", OutputField: "IPAddress",
	},
	{
		Kind: "RunService", Service: "run.googleapis.com",
		Path:       "v2/projects/{project}/locations/{location}/services/{name}",
		Collection: "v2/projects/{project}/locations/{location}/services", ListKey: "services",
		Location: true, Create: createPostID, Update: updatePatchWhole, IDParam: "serviceId",
		OperationVersion: "v2",
		Refs: []refField{
			{Path: "template.serviceAccountRef", Field: "serviceAccount", Kind: "IAMServiceAccount"},
			{Path: "template.encryptionKeyRef", Field: "encryptionKey", Kind: "KMSCryptoKey"},
			{Path: "template.vpcAccess.connectorRef", Field: "connector", Kind: "VPCAccessConnector"},
			{Path: "template.vpcAccess.networkInterfaces[].networkRef", Field: "network", Kind: "ComputeNetwork"},
			{Path: "template.vpcAccess.networkInterfaces[].subnetworkRef", Field: "subnetwork", Kind: "ComputeSubnetwork"},
			{Path: "template.containers[].env[].valueSource.secretKeyRef.secretRef", Field: "secret", Kind: "SecretManagerSecret"},
			{Path: "template.containers[].env[].valueSource.secretKeyRef.versionRef", Field: "version", Kind: "SecretManagerSecretVersion"},
			{Path: "template.volumes[].secret.secretRef", Field: "secret", Kind: "SecretManagerSecret"},
			{Path: "template.volumes[].secret.items[].versionRef", Field: "version", Kind: "SecretManagerSecretVersion"},
			{Path: "template.volumes[].cloudSqlInstance.instances[]", Field: "instances", Kind: "SQLInstance"},
		},
		Output: "Uri", OutputField: "uri",
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
