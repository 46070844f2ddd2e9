package gcp

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/captf/captf/internal/preview"
	"github.com/captf/captf/pkg/changeset"
)

// load reads manifest as a step of project p would, calling nothing.
func load(t *testing.T, manifest string) ([]*resource, error) {
	t.Helper()
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "main.yaml"), []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	_, resources, err := (&Capability{}).load(preview.Request{Component: "web", Root: root, Inputs: map[string]any{"manifest": "main.yaml", "project": "p"}})
	return resources, err
}

// groups are the Config Connector API groups of the kinds the tests use.
var groups = map[string]string{
	"PubSubTopic": "pubsub", "PubSubSubscription": "pubsub", "StorageBucket": "storage", "SpannerInstance": "spanner",
	"ComputeAddress": "compute", "ComputeForwardingRule": "compute", "ComputeTargetHTTPProxy": "compute",
	"ComputeSubnetwork": "compute", "ComputeTargetGRPCProxy": "compute", "ComputeTargetVPNGateway": "compute",
	"RunService": "run", "SQLInstance": "sql",
}

// doc is one document of kind, name and spec (indented YAML).
func doc(kind, name, spec string) string {
	return "apiVersion: " + groups[kind] + ".cnrm.cloud.google.com/v1beta1\nkind: " + kind + "\nmetadata:\n  name: " + name + "\nspec:\n" + spec + "\n---\n"
}

func canonical(t *testing.T, v any) string {
	t.Helper()
	b, err := changeset.Canonical(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestNestedReferences: every reference of every mapped kind, at any
// depth, becomes the field the API takes, by the rules of the kind it
// names; one to an object of the manifest takes that object's name,
// project and location, and orders the apply.
func TestNestedReferences(t *testing.T) {
	for _, c := range []struct {
		name     string
		manifest string
		address  string
		want     string // the body without labels, as JSON
		deps     []string
	}{{
		name: "PubSubTopic: a KMS key by external, a schema below the top level",
		manifest: doc("PubSubTopic", "t", `  kmsKeyRef:
    external: projects/p/locations/l/keyRings/r/cryptoKeys/k
  schemaSettings:
    encoding: JSON
    schemaRef:
      name: orders-schema`),
		address: "PubSubTopic/p/t",
		want:    `{"kmsKeyName":"projects/p/locations/l/keyRings/r/cryptoKeys/k","schemaSettings":{"encoding":"JSON","schema":"projects/p/schemas/orders-schema"}}`,
	}, {
		name: "PubSubSubscription: topic and dead-letter topic of the manifest (one with a resourceID), a BigQuery table, a bucket",
		manifest: doc("PubSubSubscription", "s", `  topicRef:
    name: orders
  deadLetterPolicy:
    maxDeliveryAttempts: 7
    deadLetterTopicRef:
      name: dead
  bigqueryConfig:
    tableRef:
      external: p.dataset.table
  cloudStorageConfig:
    bucketRef:
      name: archive`) + doc("PubSubTopic", "orders", "  messageRetentionDuration: 600s") + doc("PubSubTopic", "dead", "  resourceID: dead-letters"),
		address: "PubSubSubscription/p/s",
		want:    `{"bigqueryConfig":{"table":"p.dataset.table"},"cloudStorageConfig":{"bucket":"archive"},"deadLetterPolicy":{"deadLetterTopic":"projects/p/topics/dead-letters","maxDeliveryAttempts":7},"topic":"projects/p/topics/orders"}`,
		deps:    []string{"PubSubTopic/p/orders", "PubSubTopic/p/dead-letters"},
	}, {
		name: "StorageBucket: its KMS key under encryption, the networks of its IP filter",
		manifest: doc("StorageBucket", "b", `  encryption:
    kmsKeyRef:
      external: projects/p/locations/eu/keyRings/r/cryptoKeys/k
  ipFilter:
    mode: Enabled
    vpcNetworkSources:
      - networkRef:
          name: vpc
        allowedIpCidrRanges: [10.0.0.0/8]
      - networkRef:
          external: projects/other/global/networks/shared
        allowedIpCidrRanges: [192.168.0.0/16]`),
		address: "StorageBucket/p/b",
		want:    `{"encryption":{"defaultKmsKeyName":"projects/p/locations/eu/keyRings/r/cryptoKeys/k"},"ipFilter":{"mode":"Enabled","vpcNetworkSources":[{"allowedIpCidrRanges":["10.0.0.0/8"],"network":"projects/p/global/networks/vpc"},{"allowedIpCidrRanges":["192.168.0.0/16"],"network":"projects/other/global/networks/shared"}]}}`,
	}, {
		name:     "SpannerInstance: config, a name",
		manifest: doc("SpannerInstance", "i", "  config: regional-us-central1\n  numNodes: 1"),
		address:  "SpannerInstance/p/i",
		want:     `{"config":"projects/p/instanceConfigs/regional-us-central1","nodeCount":1}`,
	}, {
		name: "ComputeAddress: network and subnetwork in its region",
		manifest: doc("ComputeAddress", "a", `  location: us-central1
  networkRef:
    name: vpc
  subnetworkRef:
    name: sub`),
		address: "ComputeAddress/p/us-central1/a",
		want:    `{"network":"projects/p/global/networks/vpc","subnetwork":"projects/p/regions/us-central1/subnetworks/sub"}`,
	}, {
		name: "ComputeAddress: a subnetwork of the manifest, placed by its spec.region",
		manifest: doc("ComputeAddress", "a", `  location: us-central1
  subnetworkRef:
    name: sub`) + doc("ComputeSubnetwork", "sub", "  region: europe-west1\n  resourceID: sub-eu\n  ipCidrRange: 10.2.0.0/16"),
		address: "ComputeAddress/p/us-central1/a",
		want:    `{"subnetwork":"projects/p/regions/europe-west1/subnetworks/sub-eu"}`,
	}, {
		name: "ComputeForwardingRule: an address of the manifest under ipAddress, a global proxy under target",
		manifest: doc("ComputeForwardingRule", "r", `  location: us-central1
  ipProtocol: TCP
  ipAddress:
    addressRef:
      name: a
  target:
    targetHTTPProxyRef:
      name: proxy
  backendServiceRef:
    name: be`) + doc("ComputeAddress", "a", "  location: europe-west1") + doc("ComputeTargetHTTPProxy", "proxy", "  location: global"),
		address: "ComputeForwardingRule/p/us-central1/r",
		want:    `{"IPAddress":"projects/p/regions/europe-west1/addresses/a","IPProtocol":"TCP","backendService":"projects/p/regions/us-central1/backendServices/be","target":"projects/p/global/targetHttpProxies/proxy"}`,
		deps:    []string{"ComputeAddress/p/europe-west1/a"},
	}, {
		name: "ComputeForwardingRule: an IP as written under ipAddress, a Google APIs bundle under target",
		manifest: doc("ComputeForwardingRule", "r", `  location: us-central1
  ipAddress:
    ip: 10.0.0.5
  target:
    googleAPIsBundle: all-apis`),
		address: "ComputeForwardingRule/p/us-central1/r",
		want:    `{"IPAddress":"10.0.0.5","target":"all-apis"}`,
	}, {
		name: "ComputeForwardingRule: a ComputeTargetGRPCProxy of the manifest under target",
		manifest: doc("ComputeForwardingRule", "r", `  location: global
  target:
    targetGRPCProxyRef:
      name: grpc`) + doc("ComputeTargetGRPCProxy", "grpc", "  resourceID: grpc-proxy"),
		address: "ComputeForwardingRule/p/global/r",
		want:    `{"target":"projects/p/global/targetGrpcProxies/grpc-proxy"}`,
	}, {
		name: "ComputeForwardingRule: a ComputeTargetVPNGateway of the manifest, placed by its spec.region",
		manifest: doc("ComputeForwardingRule", "r", `  location: us-central1
  ipProtocol: ESP
  target:
    targetVPNGatewayRef:
      name: gw`) + doc("ComputeTargetVPNGateway", "gw", "  region: europe-west1\n  networkRef:\n    name: vpc"),
		address: "ComputeForwardingRule/p/us-central1/r",
		want:    `{"IPProtocol":"ESP","target":"projects/p/regions/europe-west1/targetVpnGateways/gw"}`,
	}, {
		name: "RunService: service account, connector, secrets in lists, Cloud SQL instances of the manifest",
		manifest: doc("RunService", "api", `  location: us-central1
  template:
    serviceAccountRef:
      name: runner
    vpcAccess:
      connectorRef:
        name: conn
    containers:
      - image: hello
        env:
          - name: PLAIN
            value: x
          - name: TOKEN
            valueSource:
              secretKeyRef:
                secretRef:
                  name: token
                versionRef:
                  external: latest
    volumes:
      - name: sql
        cloudSqlInstance:
          instances:
            - name: db
            - external: other:us-east1:db2`) + doc("SQLInstance", "db", "  region: europe-west1"),
		address: "RunService/p/us-central1/api",
		want:    `{"template":{"containers":[{"env":[{"name":"PLAIN","value":"x"},{"name":"TOKEN","valueSource":{"secretKeyRef":{"secret":"projects/p/secrets/token","version":"latest"}}}],"image":"hello"}],"serviceAccount":"runner@p.iam.gserviceaccount.com","volumes":[{"cloudSqlInstance":{"instances":["p:europe-west1:db","other:us-east1:db2"]},"name":"sql"}],"vpcAccess":{"connector":"projects/p/locations/us-central1/connectors/conn"}}}`,
	}} {
		t.Run(c.name, func(t *testing.T) {
			resources, err := load(t, c.manifest)
			if err != nil {
				t.Fatal(err)
			}
			var r *resource
			for _, x := range resources {
				if x.Address == c.address {
					r = x
				}
			}
			if r == nil {
				t.Fatalf("no resource %s", c.address)
			}
			body := copyMap(r.Want)
			delete(body, "labels")
			if diff := cmp.Diff(c.want, canonical(t, body)); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
			var deps []string
			for _, d := range r.deps {
				deps = append(deps, d.Address)
			}
			if diff := cmp.Diff(c.deps, deps); diff != "" {
				t.Errorf("deps (-want +got):\n%s", diff)
			}
		})
	}
}

// TestUnresolvableReferences: a reference the plan cannot resolve is an
// error that names the resource and the reference.
func TestUnresolvableReferences(t *testing.T) {
	for _, c := range []struct{ manifest, want string }{
		{doc("PubSubTopic", "t", "  kmsKeyRef:\n    name: key"),
			"main.yaml: document 1: PubSubTopic t: spec.kmsKeyRef: a KMSCryptoKey cannot be named by its name \"key\" alone: set external to its full name"},
		{doc("PubSubSubscription", "s", "  deadLetterPolicy:\n    deadLetterTopicRef: {}"),
			"main.yaml: document 1: PubSubSubscription s: spec.deadLetterPolicy.deadLetterTopicRef: names no PubSubTopic: set name or external"},
		{doc("PubSubSubscription", "s", "  topicRef:\n    name: a\n    external: projects/p/topics/b"),
			"main.yaml: document 1: PubSubSubscription s: spec.topicRef: sets both name and external; set one"},
		{doc("PubSubSubscription", "s", "  pushConfig:\n    endpointRef:\n      name: web"),
			"main.yaml: document 1: PubSubSubscription s: spec.pushConfig.endpointRef: PubSubSubscription has no reference there that captf knows, so it cannot say what it names; write the field the API takes instead"},
		{doc("RunService", "api", "  location: us-central1\n  template:\n    containers:\n      - image: x\n        env:\n          - valueSource:\n              secretKeyRef:\n                secretRef: token"),
			"main.yaml: document 1: RunService api: spec.template.containers.0.env.0.valueSource.secretKeyRef.secretRef: must be a reference {name: …} or {external: …} to a SecretManagerSecret"},
		{doc("ComputeForwardingRule", "r", "  location: us-central1\n  ipAddress:\n    addressRef:\n      name: a\n    ip: 10.0.0.1"),
			"main.yaml: document 1: ComputeForwardingRule r: spec.ipAddress.addressRef: addressRef stands for the whole ipAddress: set nothing beside it"},
		{doc("ComputeForwardingRule", "r", "  location: us-central1\n  ipAddress:\n    ip:\n      name: a"),
			"main.yaml: document 1: ComputeForwardingRule r: spec.ipAddress.ip: must be a string"},
		// Config Connector's ComputeForwardingRule has no targetPoolRef.
		{doc("ComputeForwardingRule", "r", "  location: us-central1\n  target:\n    targetPoolRef:\n      name: pool"),
			"main.yaml: document 1: ComputeForwardingRule r: spec.target.targetPoolRef: ComputeForwardingRule has no reference there that captf knows, so it cannot say what it names; write the field the API takes instead"},
		{doc("ComputeForwardingRule", "r", "  location: us-central1\n  target:\n    memorystoreInstanceServiceAttachmentRef:\n      serviceAttachmentExternal: projects/p/regions/us-central1/serviceAttachments/sa"),
			"main.yaml: document 1: ComputeForwardingRule r: spec.target.memorystoreInstanceServiceAttachmentRef: names the service attachment through a MemorystoreInstance's status, which captf cannot read; set target.serviceAttachmentRef.external to the attachment instead"},
		{doc("RunService", "api", "  location: us-central1\n  template:\n    volumes:\n      - name: sql\n        cloudSqlInstance:\n          instances: {name: db}"),
			"main.yaml: document 1: RunService api: spec.template.volumes.0.cloudSqlInstance.instances: must be a list of references"},
	} {
		_, err := load(t, c.manifest)
		if err == nil || err.Error() != c.want {
			t.Errorf("got  %v\nwant %s", err, c.want)
		}
	}
}

// TestApplyOrder: what a resource references comes first, else the
// manifest's order; a cycle is an error that names it.
func TestApplyOrder(t *testing.T) {
	resources, err := load(t, doc("PubSubSubscription", "s1", "  topicRef:\n    name: t1")+
		doc("PubSubTopic", "t0", "")+
		doc("PubSubSubscription", "s2", "  topicRef:\n    name: t2\n  deadLetterPolicy:\n    deadLetterTopicRef:\n      name: t1")+
		doc("PubSubTopic", "t1", "")+
		doc("PubSubTopic", "t2", ""))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range resources {
		got = append(got, r.Address)
	}
	if diff := cmp.Diff([]string{"PubSubTopic/p/t0", "PubSubTopic/p/t1", "PubSubSubscription/p/s1", "PubSubTopic/p/t2", "PubSubSubscription/p/s2"}, got); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}

	// No mapped kind can reference itself round: a cycle is made here.
	a := &resource{Address: "A/p/a"}
	b := &resource{Address: "B/p/b"}
	c := &resource{Address: "C/p/c"}
	d := &resource{Address: "D/p/d"}
	a.Doc.Where, b.Doc.Where, c.Doc.Where = "x.yaml: document 1", "x.yaml: document 2", "x.yaml: document 3"
	b.deps, c.deps, d.deps = []*resource{c}, []*resource{d, b}, []*resource{a}
	_, err = applyOrder([]*resource{a, b, c, d})
	want := "x.yaml: document 2: a reference cycle: B/p/b → C/p/c → B/p/b; no order creates each after what it references"
	if err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}
}
