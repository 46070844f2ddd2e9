package cfn

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/captf/captf/internal/preview"
	"github.com/captf/captf/internal/preview/previewtest"
	"github.com/captf/captf/pkg/changeset"
)

// recordedAPI answers the SDK with the responses in
// testdata/recorded/<scenario> (see its README: written in the shape of
// CloudFormation's query API, not a live CloudFormation). It is a stand-in
// only for what moto_server cannot give: Replacement, Details and nested
// change sets. A response is picked by the request's Action, then its
// NextToken or the name inside its ChangeSetName ARN (or, first, the
// action's nth call as "<Action>#<n>"); GetTemplate answers
// with the scenario's template.
type recordedAPI struct {
	t        *testing.T
	dir      string
	template string

	mu    sync.Mutex
	calls []string
}

func serveRecorded(t *testing.T, scenario, template string) (*recordedAPI, string) {
	t.Helper()
	api := &recordedAPI{t: t, dir: filepath.Join("testdata", "recorded", scenario), template: template}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return api, srv.URL
}

func (a *recordedAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	action := r.PostForm.Get("Action")
	a.mu.Lock()
	a.calls = append(a.calls, action)
	n := 0
	for _, c := range a.calls {
		if c == action {
			n++
		}
	}
	a.mu.Unlock()
	w.Header().Set("Content-Type", "text/xml")
	if action == "GetTemplate" {
		var body strings.Builder
		_ = xml.EscapeText(&body, []byte(a.template))
		_, _ = w.Write([]byte(`<GetTemplateResponse xmlns="http://cloudformation.amazonaws.com/doc/2010-05-15/"><GetTemplateResult><TemplateBody>` +
			body.String() + `</TemplateBody></GetTemplateResult><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata></GetTemplateResponse>`))
		return
	}
	names := []string{fmt.Sprintf("%s#%d", action, n)}
	if tok := r.PostForm.Get("NextToken"); tok != "" {
		names = append(names, action+"-"+tok)
	}
	if arn := r.PostForm.Get("ChangeSetName"); strings.Contains(arn, ":changeSet/") {
		names = append(names, action+"-"+strings.Split(arn, "/")[1])
	}
	names = append(names, action)
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(a.dir, n+".xml"))
		if err == nil {
			if strings.HasPrefix(string(b), "<ErrorResponse") {
				w.WriteHeader(http.StatusBadRequest)
			}
			_, _ = w.Write(b)
			return
		}
	}
	a.t.Errorf("no recorded response for %s (tried %v)", action, names)
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write([]byte(`<ErrorResponse><Error><Type>Sender</Type><Code>ValidationError</Code><Message>not recorded</Message></Error></ErrorResponse>`))
}

func (a *recordedAPI) called() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.calls...)
}

// webTemplate is stack web's template in the replace scenario, with YAML
// short tags.
const webTemplate = `Parameters:
  DbPassword:
    Type: String
    NoEcho: true
  Stage:
    Type: String
Resources:
  Bucket:
    Type: AWS::S3::Bucket
    Properties:
      BucketName: !Sub "web-${Stage}-assets-v2"
  Db:
    Type: AWS::RDS::DBInstance
    Properties:
      MasterUserPassword: !Ref DbPassword
  Queue:
    Type: AWS::SQS::Queue
    Properties:
      QueueName: !Sub "web-${Stage}-jobs"
      VisibilityTimeout: 60
  Topic:
    Type: AWS::SNS::Topic
    Properties:
      Tags:
        - Key: team
          Value: web
  NewAlarm:
    Type: AWS::CloudWatch::Alarm
Outputs:
  BucketArn:
    Value: !GetAtt Bucket.Arn
  QueueUrl:
    Value: !Ref Queue
  TopicName:
    Value: !GetAtt [Topic, TopicName]
  Endpoint:
    Value: !GetAtt Db.Endpoint.Address
  Label:
    Value: !Sub "${Stage}-web"
  Imported:
    Value: !ImportValue shared-vpc
`

func recordedRequest(t *testing.T, endpoint, stack, template string, params map[string]any, onReplace string) preview.Request {
	t.Helper()
	root := t.TempDir()
	writeTemplate(t, root, template)
	inputs := map[string]any{"template": "infra/template.yaml", "stack": stack, "endpoint": endpoint, "region": "eu-west-1"}
	if params != nil {
		inputs["parameters"] = params
	}
	if onReplace != "" {
		inputs["onReplace"] = onReplace
	}
	return preview.Request{Component: stack, Environment: "prod", Inputs: inputs, Root: root, WorkDir: t.TempDir(), Key: previewtest.Key()}
}

func TestRecordedReplacementIsBlockedByDefault(t *testing.T) {
	api, url := serveRecorded(t, "replace", webTemplate)
	req := recordedRequest(t, url, "web", webTemplate, map[string]any{"DbPassword": canary, "Stage": "prod"}, "")
	_, err := testDeploy().Plan(context.Background(), req)
	want := `stack web: onReplace is "block" and the change set replaces Bucket (set onReplace: "allow" to allow it)`
	if err == nil || err.Error() != want {
		t.Fatalf("plan: %v\nwant: %s", err, want)
	}
	if !contains(api.called(), "DeleteChangeSet") || contains(api.called(), "ExecuteChangeSet") {
		t.Errorf("calls %v: the change set must be deleted and never executed", api.called())
	}
}

func TestRecordedReplacementAllowed(t *testing.T) {
	api, url := serveRecorded(t, "replace", webTemplate)
	req := recordedRequest(t, url, "web", webTemplate, map[string]any{"DbPassword": canary, "Stage": "prod"}, "allow")
	d := testDeploy()
	plan, err := d.Plan(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	noCanaryInPlan(t, plan)
	want := []changeset.Entry{
		{Member: "web", Address: "Bucket", Action: "replace", Attributes: []changeset.Attribute{{Name: "BucketName", ForcesReplacement: true}}},
		{Member: "web", Address: "Db", Action: "update", Attributes: []changeset.Attribute{{Name: "MasterUserPassword"}}},
		{Member: "web", Address: "NewAlarm", Action: "create"},
		{Member: "web", Address: "OldRole", Action: "delete"},
		{Member: "web", Address: "Queue", Action: "replace", Disruption: "unknown", Attributes: []changeset.Attribute{{Name: "QueueName"}, {Name: "VisibilityTimeout"}}},
		{Member: "web", Address: "Topic", Action: "update", Attributes: []changeset.Attribute{{Name: "Tags"}}},
	}
	if diff := cmp.Diff(want, plan.Entries); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	// Bucket is replaced and Queue may be; Imported reads another stack.
	// Topic and Db are modified in place, Label reads no resource.
	wantOut := preview.Outputs{
		"TopicName": json.RawMessage(`"web-Topic-1UZ7QX3Y0F2KD"`),
		"Endpoint":  json.RawMessage(`"web-db.c9akciq32.eu-west-1.rds.amazonaws.com"`),
		"Label":     json.RawMessage(`"prod-web"`),
	}
	if diff := cmp.Diff(wantOut, plan.PlannedOutputs); diff != "" {
		t.Errorf("planned outputs (-want +got):\n%s", diff)
	}
	wantCalls := []string{"DescribeStacks", "CreateChangeSet", "DescribeChangeSet", "DescribeChangeSet", "DescribeChangeSet", "GetTemplate", "DeleteChangeSet"}
	if diff := cmp.Diff(wantCalls, api.called()); diff != "" {
		t.Errorf("calls of the plan (-want +got):\n%s", diff)
	}

	// The same change set on apply: executed.
	if _, err := d.Apply(context.Background(), req, plan); err != nil {
		t.Fatal(err)
	}
	calls := api.called()[len(wantCalls):]
	wantCalls = []string{"DescribeStacks", "CreateChangeSet", "DescribeChangeSet", "DescribeChangeSet", "DescribeChangeSet", "ExecuteChangeSet", "DescribeStacks", "DescribeStacks"}
	if diff := cmp.Diff(wantCalls, calls); diff != "" {
		t.Errorf("calls of the apply (-want +got):\n%s", diff)
	}
}

func TestRecordedNestedStack(t *testing.T) {
	tmpl := `Resources:
  Network:
    Type: AWS::CloudFormation::Stack
    Properties:
      TemplateURL: https://s3.eu-west-1.amazonaws.com/templates/network-v2.yaml
Outputs:
  VpcId:
    Value: !GetAtt Network.Outputs.VpcId
`
	api, url := serveRecorded(t, "nested", tmpl)
	d := testDeploy()
	_, err := d.Plan(context.Background(), recordedRequest(t, url, "platform", tmpl, nil, ""))
	if err == nil || !strings.Contains(err.Error(), "replaces Network/Subnet ") {
		t.Errorf("plan of a nested replacement under onReplace block: %v", err)
	}
	plan, err := d.Plan(context.Background(), recordedRequest(t, url, "platform", tmpl, nil, "allow"))
	if err != nil {
		t.Fatal(err)
	}
	want := []changeset.Entry{
		{Member: "platform", Address: "Network", Action: "update", Attributes: []changeset.Attribute{{Name: "TemplateURL"}}},
		{Member: "platform", Address: "Network/RouteTable", Action: "create"},
		{Member: "platform", Address: "Network/Subnet", Action: "replace", Attributes: []changeset.Attribute{{Name: "CidrBlock", ForcesReplacement: true}}},
	}
	if diff := cmp.Diff(want, plan.Entries); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	// The nested stack's outputs may change with it.
	if len(plan.PlannedOutputs) != 0 {
		t.Errorf("planned outputs %v, want none", plan.PlannedOutputs)
	}
	if contains(api.called(), "ExecuteChangeSet") {
		t.Error("a plan executed a change set")
	}
}

func TestRecordedUnchangedStack(t *testing.T) {
	tmpl := `Resources:
  Jobs:
    Type: AWS::SQS::Queue
Outputs:
  QueueUrl:
    Value: !Ref Jobs
`
	api, url := serveRecorded(t, "unchanged", tmpl)
	plan, err := testDeploy().Plan(context.Background(), recordedRequest(t, url, "queue", tmpl, nil, ""))
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Entries) != 0 {
		t.Errorf("entries %v, want none", plan.Entries)
	}
	wantOut := preview.Outputs{"QueueUrl": json.RawMessage(`"https://sqs.eu-west-1.amazonaws.com/123456789012/queue-Jobs-5TQ3"`)}
	if diff := cmp.Diff(wantOut, plan.PlannedOutputs); diff != "" {
		t.Errorf("planned outputs (-want +got):\n%s", diff)
	}
	wantCalls := []string{"DescribeStacks", "CreateChangeSet", "DescribeChangeSet", "DeleteChangeSet"}
	if diff := cmp.Diff(wantCalls, api.called()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

func TestRecordedRollbackIsAnError(t *testing.T) {
	tmpl := `Resources:
  Jobs:
    Type: AWS::SQS::Queue
    Properties:
      VisibilityTimeout: 7200
`
	api, url := serveRecorded(t, "rollback", tmpl)
	d := testDeploy()
	req := recordedRequest(t, url, "queue", tmpl, nil, "")
	plan, err := d.Plan(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Apply(context.Background(), req, plan)
	want := "stack queue: UPDATE_ROLLBACK_COMPLETE: The following resource(s) failed to update: [Jobs]. "
	if err == nil || err.Error() != want {
		t.Fatalf("apply of a change set that rolled back: %v\nwant: %s", err, want)
	}
	if !contains(api.called(), "ExecuteChangeSet") {
		t.Errorf("calls %v: the change set was not executed", api.called())
	}
}

func TestRecordedFailedCreateLeavesNoStack(t *testing.T) {
	tmpl := `Resources:
  Subnet:
    Type: AWS::EC2::Subnet
    Properties:
      VpcId: !ImportValue shared-vpc
      CidrBlock: 10.0.1.0/24
`
	api, url := serveRecorded(t, "create-failed", tmpl)
	_, err := testDeploy().Plan(context.Background(), recordedRequest(t, url, "fresh", tmpl, nil, ""))
	want := "change set for stack fresh failed: No export named shared-vpc found"
	if err == nil || err.Error() != want {
		t.Fatalf("plan: %v\nwant: %s", err, want)
	}
	wantCalls := []string{"DescribeStacks", "CreateChangeSet", "DescribeChangeSet", "DeleteChangeSet", "DescribeStacks", "DeleteStack", "DescribeStacks"}
	if diff := cmp.Diff(wantCalls, api.called()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}
