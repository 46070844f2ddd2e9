package gcp

// The tests in this file run the capability against real servers:
// Google's Pub/Sub emulator and Spanner emulator (the machine image's
// Google Cloud CLI packages) and fake-gcs-server (built from the Go module
// proxy by hack/install-fake-gcs.sh), started once for the package by
// TestMain through internal/gcpemu. A missing emulator fails the run.
// What each emulator does not do as Google does is said where a test
// depends on it.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/captf/captf/internal/gcpemu"
	"github.com/captf/captf/internal/preview"
)

var pubsubURL, spannerURL, gcsURL string

func TestMain(m *testing.M) {
	var started []*gcpemu.Server
	stop := func() {
		for _, s := range started {
			s.Stop()
		}
	}
	for _, start := range []func() (*gcpemu.Server, error){gcpemu.StartPubSub, gcpemu.StartSpanner, gcpemu.StartGCS} {
		s, err := start()
		if err != nil {
			stop()
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		started = append(started, s)
	}
	pubsubURL, spannerURL, gcsURL = started[0].URL, started[1].URL, started[2].URL
	code := m.Run()
	stop()
	os.Exit(code)
}

// call sends a request to an emulator as the test's own client, apart
// from the code under test, and decodes the answer.
func call(t *testing.T, method, url string, body any) (int, map[string]any) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

const pubsubManifest = `apiVersion: pubsub.cnrm.cloud.google.com/v1beta1
kind: PubSubTopic
metadata:
  name: orders
  labels:
    team: shop
spec:
  messageRetentionDuration: 600s
---
apiVersion: pubsub.cnrm.cloud.google.com/v1beta1
kind: PubSubSubscription
metadata:
  name: orders-billing
spec:
  topicRef:
    name: orders
  ackDeadlineSeconds: 20
---
apiVersion: pubsub.cnrm.cloud.google.com/v1beta1
kind: PubSubSubscription
metadata:
  name: orders-audit
spec:
  topicRef:
    name: orders
`

// TestPubSubEmulator: create, no-op, update, delete with prune, and a
// refused apply, against the real Pub/Sub emulator. The emulator does not
// take labels in an update mask (Pub/Sub does), so no update here changes
// labels.
func TestPubSubEmulator(t *testing.T) {
	s := newStep(t, pubsubURL, pubsubManifest)
	s.inputs["project"] = "captf-pubsub"
	topics := pubsubURL + "/v1/projects/captf-pubsub/topics/"
	subs := pubsubURL + "/v1/projects/captf-pubsub/subscriptions/"

	p := s.plan()
	if diff := cmp.Diff([]string{
		"create PubSubTopic/captf-pubsub/orders",
		"create PubSubSubscription/captf-pubsub/orders-billing",
		"create PubSubSubscription/captf-pubsub/orders-audit",
	}, actions(p)); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{
		`ackDeadlineSeconds:  → 20`,
		`labels:  → {"captf-stack":"web","managed-by":"captf"}`,
		`topic:  → "projects/captf-pubsub/topics/orders"`,
	}, attributes(p, "PubSubSubscription/captf-pubsub/orders-billing")); diff != "" {
		t.Errorf("the subscription's create (-want +got):\n%s", diff)
	}
	if code, _ := call(t, http.MethodGet, topics+"orders", nil); code != http.StatusNotFound {
		t.Fatalf("the plan created the topic (GET %d)", code)
	}
	if _, err := s.apply(p); err != nil {
		t.Fatal(err)
	}
	_, sub := call(t, http.MethodGet, subs+"orders-billing", nil)
	if sub["topic"] != "projects/captf-pubsub/topics/orders" || fmt.Sprint(sub["ackDeadlineSeconds"]) != "20" || sub["labels"].(map[string]any)[ManagedByLabel] != ManagedByValue {
		t.Errorf("the emulator holds %v", sub)
	}

	// The emulator adds messageRetentionDuration, pushConfig and more to a
	// subscription: they are not the manifest's, and change nothing.
	if diff := cmp.Diff([]string{
		"no-op PubSubTopic/captf-pubsub/orders",
		"no-op PubSubSubscription/captf-pubsub/orders-billing",
		"no-op PubSubSubscription/captf-pubsub/orders-audit",
	}, actions(s.plan())); diff != "" {
		t.Errorf("after apply (-want +got):\n%s", diff)
	}

	// An update of the top-level fields that differ; a dropped
	// subscription is deleted under prune.
	s.edit("600s", "900s")
	s.edit("ackDeadlineSeconds: 20", "ackDeadlineSeconds: 30")
	s.write(readFile(t, s.root, "main.yaml")[:strings.LastIndex(readFile(t, s.root, "main.yaml"), "---")])
	s.inputs["prune"] = true
	p = s.plan()
	if diff := cmp.Diff([]string{
		"update PubSubTopic/captf-pubsub/orders",
		"update PubSubSubscription/captf-pubsub/orders-billing",
		"delete PubSubSubscription/captf-pubsub/orders-audit",
	}, actions(p)); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{`messageRetentionDuration: "600s" → "900s"`}, attributes(p, "PubSubTopic/captf-pubsub/orders")); diff != "" {
		t.Errorf("the topic's update (-want +got):\n%s", diff)
	}

	// The live side moves between plan and apply: refused, nothing written.
	call(t, http.MethodPatch, subs+"orders-billing", map[string]any{"subscription": map[string]any{"ackDeadlineSeconds": 25}, "updateMask": "ackDeadlineSeconds"})
	_, before := call(t, http.MethodGet, topics+"orders", nil)
	if _, err := s.apply(p); !errors.Is(err, preview.ErrMoved) || !strings.Contains(err.Error(), "refusing to apply") {
		t.Fatalf("apply after drift: %v", err)
	}
	_, after := call(t, http.MethodGet, topics+"orders", nil)
	if code, _ := call(t, http.MethodGet, subs+"orders-audit", nil); code != http.StatusOK || !cmp.Equal(before, after) {
		t.Fatal("a refused apply wrote something")
	}

	p = s.plan()
	if diff := cmp.Diff([]string{`ackDeadlineSeconds: 25 → 30`}, attributes(p, "PubSubSubscription/captf-pubsub/orders-billing")); diff != "" {
		t.Errorf("the drifted value is the one before (-want +got):\n%s", diff)
	}
	if _, err := s.apply(p); err != nil {
		t.Fatal(err)
	}
	if _, topic := call(t, http.MethodGet, topics+"orders", nil); topic["messageRetentionDuration"] != "900s" {
		t.Errorf("topic %v", topic)
	}
	if code, _ := call(t, http.MethodGet, subs+"orders-audit", nil); code != http.StatusNotFound {
		t.Errorf("the pruned subscription answers %d", code)
	}
	if got := actions(s.plan()); len(got) != 2 || !strings.HasPrefix(got[0], "no-op") || !strings.HasPrefix(got[1], "no-op") {
		t.Errorf("after the update: %v", got)
	}
}

// TestStorageEmulator: a bucket's create (POST with ?project=) and
// update (PATCH of the fields that differ) against fake-gcs-server. It
// drops labels and location, as Cloud Storage does not: a bucket planned
// again after its create shows labels as an update, and a bucket here
// sets no location.
func TestStorageEmulator(t *testing.T) {
	s := newStep(t, gcsURL, `apiVersion: storage.cnrm.cloud.google.com/v1beta1
kind: StorageBucket
metadata:
  name: captf-assets
spec:
  storageClass: STANDARD
  versioning:
    enabled: true
`)
	p := s.plan()
	if diff := cmp.Diff([]string{"create StorageBucket/proj-a/captf-assets"}, actions(p)); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	if _, err := s.apply(p); err != nil {
		t.Fatal(err)
	}
	if _, b := call(t, http.MethodGet, gcsURL+"/storage/v1/b/captf-assets", nil); b["versioning"].(map[string]any)["enabled"] != true {
		t.Fatalf("bucket %v", b)
	}
	p = s.plan()
	if diff := cmp.Diff([]string{"labels"}, names(p, "StorageBucket/proj-a/captf-assets")); diff != "" {
		t.Errorf("fake-gcs-server dropped the labels only (-want +got):\n%s", diff)
	}
	s.edit("enabled: true", "enabled: false")
	p = s.plan()
	if diff := cmp.Diff([]string{"labels", "versioning"}, names(p, "StorageBucket/proj-a/captf-assets")); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := s.apply(p); err != nil {
		t.Fatal(err)
	}
	if _, b := call(t, http.MethodGet, gcsURL+"/storage/v1/b/captf-assets", nil); b["versioning"].(map[string]any)["enabled"] != false {
		t.Fatalf("bucket %v", b)
	}
}

// TestSpannerEmulator: the Spanner emulator answers a read of an
// instance that is not there with HTTP 500, not 404: the read can't say
// whether the instance exists, and the plan has a hole (which Google's
// 404 would make a create). An instance that is there is a no-op when it
// holds what the manifest sets (numNodes is the API's nodeCount), and an update of the field that differs.
// The emulator does not update instances (501), so no apply runs here.
func TestSpannerEmulator(t *testing.T) {
	const manifest = `apiVersion: spanner.cnrm.cloud.google.com/v1beta1
kind: SpannerInstance
metadata:
  name: main
spec:
  config: emulator-config
  displayName: Main
  numNodes: 1
`
	s := newStep(t, spannerURL, manifest)
	s.inputs["project"] = "captf-spanner"
	p := s.plan()
	if diff := cmp.Diff([]string{"SpannerInstance/captf-spanner/main: read SpannerInstance/captf-spanner/main: HTTP 500 Internal Server Error: failed to marshal error message; it cannot say whether the resource is there, and the apply leaves it alone"}, holes(p)); diff != "" {
		t.Errorf("holes (-want +got):\n%s", diff)
	}
	code, _ := call(t, http.MethodPost, spannerURL+"/v1/projects/captf-spanner/instances", map[string]any{"instanceId": "main", "instance": map[string]any{
		"config": "projects/captf-spanner/instanceConfigs/emulator-config", "displayName": "Main", "nodeCount": 1,
		"labels": map[string]any{ManagedByLabel: ManagedByValue, StackLabel: "web"},
	}})
	if code != http.StatusOK {
		t.Fatalf("create the instance: %d", code)
	}
	if diff := cmp.Diff([]string{"no-op SpannerInstance/captf-spanner/main"}, actions(s.plan())); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	s.edit("displayName: Main", "displayName: Main DB")
	if diff := cmp.Diff([]string{`displayName: "Main" → "Main DB"`}, attributes(s.plan(), "SpannerInstance/captf-spanner/main")); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// The basic Pub/Sub subscription sample of Config Connector
// (config/samples/resources/pubsubsubscription/basic-pubsub-subscription
// in GoogleCloudPlatform/k8s-config-connector, Apache License 2.0), and
// the two topics it names, as two files of one manifest directory. The
// subscription's file comes first, and its dead-letter topic is a
// reference below the top level.
const (
	sampleSubscription = `apiVersion: pubsub.cnrm.cloud.google.com/v1beta1
kind: PubSubSubscription
metadata:
  labels:
    label-one: "value-one"
  name: pubsubsubscription-sample-basic
spec:
  ackDeadlineSeconds: 15
  messageRetentionDuration: 86400s
  retainAckedMessages: false
  topicRef:
    name: pubsubsubscription-dep1-basic
  deadLetterPolicy:
    deadLetterTopicRef:
      name: pubsubsubscription-dep2-basic
`
	sampleTopics = `apiVersion: pubsub.cnrm.cloud.google.com/v1beta1
kind: PubSubTopic
metadata:
  name: pubsubsubscription-dep1-basic
---
apiVersion: pubsub.cnrm.cloud.google.com/v1beta1
kind: PubSubTopic
metadata:
  name: pubsubsubscription-dep2-basic
`
)

// TestPubSubSample plans and applies Config Connector's own sample
// against the real Pub/Sub emulator: the topics are created before the
// subscription that references them, both references are resolved, a
// plan after the apply is all no-ops (the emulator's defaults and the
// false it leaves out are no change), and a moved change set creates
// nothing.
func TestPubSubSample(t *testing.T) {
	s := newStep(t, pubsubURL, "")
	dir := filepath.Join(s.root, "gcp")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"subscription.yaml": sampleSubscription, "topics.yaml": sampleTopics} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s.inputs["manifest"] = "gcp"
	s.inputs["project"] = "captf-sample"
	topics := pubsubURL + "/v1/projects/captf-sample/topics/"
	sub := pubsubURL + "/v1/projects/captf-sample/subscriptions/pubsubsubscription-sample-basic"
	nothingThere := func() {
		t.Helper()
		for _, u := range []string{topics + "pubsubsubscription-dep1-basic", topics + "pubsubsubscription-dep2-basic", sub} {
			if code, _ := call(t, http.MethodGet, u, nil); code != http.StatusNotFound {
				t.Fatalf("GET %s: %d, want 404: something was created", u, code)
			}
		}
	}

	p := s.plan()
	if diff := cmp.Diff([]string{
		"create PubSubTopic/captf-sample/pubsubsubscription-dep1-basic",
		"create PubSubTopic/captf-sample/pubsubsubscription-dep2-basic",
		"create PubSubSubscription/captf-sample/pubsubsubscription-sample-basic",
	}, actions(p)); diff != "" {
		t.Errorf("entries, in the order the apply takes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{
		`ackDeadlineSeconds:  → 15`,
		`deadLetterPolicy:  → {"deadLetterTopic":"projects/captf-sample/topics/pubsubsubscription-dep2-basic"}`,
		`labels:  → {"captf-stack":"web","label-one":"value-one","managed-by":"captf"}`,
		`messageRetentionDuration:  → "86400s"`,
		`retainAckedMessages:  → false`,
		`topic:  → "projects/captf-sample/topics/pubsubsubscription-dep1-basic"`,
	}, attributes(p, "PubSubSubscription/captf-sample/pubsubsubscription-sample-basic")); diff != "" {
		t.Errorf("the subscription's create (-want +got):\n%s", diff)
	}
	nothingThere()

	// The change set moves (the manifest changed since the review):
	// refused, nothing created.
	if err := os.WriteFile(filepath.Join(dir, "subscription.yaml"), []byte(strings.Replace(sampleSubscription, "ackDeadlineSeconds: 15", "ackDeadlineSeconds: 20", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.apply(p); !errors.Is(err, preview.ErrMoved) {
		t.Fatalf("apply of a moved change set: %v, want preview.ErrMoved (exit 3)", err)
	}
	nothingThere()
	if err := os.WriteFile(filepath.Join(dir, "subscription.yaml"), []byte(sampleSubscription), 0o600); err != nil {
		t.Fatal(err)
	}

	if _, err := s.apply(p); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"pubsubsubscription-dep1-basic", "pubsubsubscription-dep2-basic"} {
		if code, topic := call(t, http.MethodGet, topics+name, nil); code != http.StatusOK {
			t.Errorf("topic %s: %d %v", name, code, topic)
		}
	}
	code, live := call(t, http.MethodGet, sub, nil)
	dlp, _ := live["deadLetterPolicy"].(map[string]any)
	if code != http.StatusOK || live["topic"] != "projects/captf-sample/topics/pubsubsubscription-dep1-basic" ||
		dlp["deadLetterTopic"] != "projects/captf-sample/topics/pubsubsubscription-dep2-basic" {
		t.Fatalf("the subscription: %d %v", code, live)
	}

	if diff := cmp.Diff([]string{
		"no-op PubSubTopic/captf-sample/pubsubsubscription-dep1-basic",
		"no-op PubSubTopic/captf-sample/pubsubsubscription-dep2-basic",
		"no-op PubSubSubscription/captf-sample/pubsubsubscription-sample-basic",
	}, actions(s.plan())); diff != "" {
		t.Errorf("a plan after the apply (-want +got):\n%s", diff)
	}
}
