package cfn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/google/go-cmp/cmp"

	"github.com/captf/captf/internal/preview"
	"github.com/captf/captf/internal/preview/previewtest"
	"github.com/captf/captf/pkg/changeset"
)

// canary is the value of a NoEcho parameter; no plan, error or output of
// captf may hold it.
const canary = "canary-5d1f0e7a-never-shown"

// templateV1 declares a NoEcho parameter, a parameter with a default, two
// resources and outputs of every kind PlannedOutputs tells apart. %s is the
// SSM parameter's name, unique per test (moto keeps SSM names global).
const templateV1 = `AWSTemplateFormatVersion: "2010-09-09"
Parameters:
  Secret:
    Type: String
    NoEcho: true
  Stage:
    Type: String
    Default: dev
Resources:
  Param:
    Type: AWS::SSM::Parameter
    Properties:
      Name: %s
      Type: String
      Value: !Ref Secret
  Topic:
    Type: AWS::SNS::Topic
Outputs:
  Fixed:
    Value: fixed
  Where:
    Value: !Sub "${AWS::StackName}-${Stage}"
  TopicArn:
    Value: !Ref Topic
  SecretOut:
    Value: !Ref Secret
`

// withQueue adds a resource to a template.
func withResource(body, id, typ string) string {
	return strings.Replace(body, "Outputs:", fmt.Sprintf("  %s:\n    Type: %s\nOutputs:", id, typ), 1)
}

func secretParams() map[string]any { return map[string]any{"Secret": canary} }

// noCanary fails when the canary is in anything the plan hands on.
func noCanary(t *testing.T, what string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), canary) || strings.Contains(fmt.Sprintf("%+v", v), canary) {
		t.Errorf("%s holds the NoEcho value", what)
	}
}

func noCanaryInPlan(t *testing.T, p *preview.Plan) {
	t.Helper()
	noCanary(t, "member", p.Member)
	noCanary(t, "entries", p.Entries)
	noCanary(t, "planned outputs", p.PlannedOutputs)
	noCanary(t, "private", p.Private)
}

func TestPlanApplyNewStackThenUpdate(t *testing.T) {
	ctx := context.Background()
	cf := motoClient(t)
	d := testDeploy()
	stack := unique("new-")
	body := fmt.Sprintf(templateV1, "/"+stack+"/secret")
	req := request(t, stack, body, secretParams())

	plan, err := d.Plan(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	noCanaryInPlan(t, plan)
	want := []changeset.Entry{
		{Member: stack, Address: "Param", Action: "create"},
		{Member: stack, Address: "Topic", Action: "create"},
	}
	if diff := cmp.Diff(want, plan.Entries); diff != "" {
		t.Errorf("entries of a new stack (-want +got):\n%s", diff)
	}
	if plan.Member.Name != stack || plan.Member.Component != "app" || plan.Member.Capability != "cfn-deploy" ||
		plan.Member.Status != "planned" || !strings.HasPrefix(plan.Member.PlanDigest, "cfn1:") || len(plan.Member.Holes) != 0 {
		t.Errorf("member = %+v", plan.Member)
	}
	wantOut := preview.Outputs{"Fixed": json.RawMessage(`"fixed"`), "Where": json.RawMessage(`"` + stack + `-dev"`)}
	if diff := cmp.Diff(wantOut, plan.PlannedOutputs); diff != "" {
		t.Errorf("planned outputs of a new stack (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Fixed", "SecretOut", "TopicArn", "Where"}, plan.DeclaredOutputs); diff != "" {
		t.Errorf("declared outputs of a new stack (-want +got):\n%s", diff)
	}
	// The CREATE change set left a REVIEW_IN_PROGRESS stack; the plan
	// deleted it.
	if s := stackStatus(t, cf, stack); s != "" {
		t.Fatalf("after the plan the stack is %s, want it gone", s)
	}

	if _, err := d.Apply(ctx, req, plan); err != nil {
		t.Fatal(err)
	}
	if s := stackStatus(t, cf, stack); s != "CREATE_COMPLETE" {
		t.Fatalf("after apply the stack is %q", s)
	}
	if got := resources(t, cf, stack); len(got) != 2 || got["Param"] == "" || got["Topic"] == "" {
		t.Errorf("resources after apply = %v", got)
	}

	// Nothing changed: no entries, the same digest, every current output
	// known.
	again, err := d.Plan(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Entries) != 0 {
		t.Errorf("plan of an applied stack has entries %v", again.Entries)
	}
	if again.Member.PlanDigest != plan.Member.PlanDigest {
		t.Errorf("digest moved with nothing changed: %s, then %s", plan.Member.PlanDigest, again.Member.PlanDigest)
	}
	current, err := d.Outputs(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(current, again.PlannedOutputs); diff != "" {
		t.Errorf("planned outputs of an unchanged stack differ from its outputs (-outputs +planned):\n%s", diff)
	}
	if changes := changeSets(t, cf, stack); len(changes) != 0 {
		t.Errorf("change sets left behind: %v", changes)
	}

	// A new resource. moto 5.2.1 (unlike CloudFormation) also lists Topic,
	// which declares no Properties, as Modify whenever the template
	// changes; it gives no Replacement or Details.
	writeTemplate(t, req.Root, withResource(body, "Queue", "AWS::SQS::Queue"))
	update, err := d.Plan(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	want = []changeset.Entry{
		{Member: stack, Address: "Queue", Action: "create"},
		{Member: stack, Address: "Topic", Action: "update"},
	}
	if diff := cmp.Diff(want, update.Entries); diff != "" {
		t.Errorf("entries of an update (-want +got):\n%s", diff)
	}
	if update.Member.PlanDigest == plan.Member.PlanDigest {
		t.Error("a changed template left the digest as it was")
	}
	noCanaryInPlan(t, update)
	if _, err := d.Apply(ctx, req, update); err != nil {
		t.Fatal(err)
	}
	if got := resources(t, cf, stack); got["Queue"] == "" {
		t.Errorf("the applied update has no Queue: %v", got)
	}
	// Nothing is left on disk.
	if left, _ := os.ReadDir(req.WorkDir); len(left) != 0 {
		t.Errorf("files left in the work dir: %v", left)
	}
}

func TestApplyRefusesWhenTemplateChangedAfterPlan(t *testing.T) {
	ctx := context.Background()
	cf := motoClient(t)
	d := testDeploy()
	stack := unique("moved-")
	body := fmt.Sprintf(templateV1, "/"+stack+"/secret")
	req := request(t, stack, body, secretParams())
	applyPlanned(t, d, req)
	before := resources(t, cf, stack)

	writeTemplate(t, req.Root, withResource(body, "Queue", "AWS::SQS::Queue"))
	plan, err := d.Plan(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	// Pushed after review.
	writeTemplate(t, req.Root, withResource(body, "Other", "AWS::SNS::Topic"))
	_, err = d.Apply(ctx, req, plan)
	if !errors.Is(err, preview.ErrMoved) || !strings.Contains(err.Error(), "refusing to apply") {
		t.Fatalf("apply of a moved template: %v, want refusing to apply wrapping ErrMoved", err)
	}
	if !strings.Contains(err.Error(), "the plan digest is cfn1:") || !strings.Contains(err.Error(), plan.Member.PlanDigest) {
		t.Errorf("error %q does not name both plan digests", err)
	}
	if diff := cmp.Diff(before, resources(t, cf, stack)); diff != "" {
		t.Errorf("resources changed by a refused apply (-before +after):\n%s", diff)
	}
	if s := stackStatus(t, cf, stack); s != "CREATE_COMPLETE" {
		t.Errorf("stack is %s after a refused apply", s)
	}
	if changes := changeSets(t, cf, stack); len(changes) != 0 {
		t.Errorf("change sets left behind: %v", changes)
	}
}

func TestApplyRefusesWhenStackMovedAfterPlan(t *testing.T) {
	ctx := context.Background()
	cf := motoClient(t)
	d := testDeploy()
	stack := unique("drift-")
	body := fmt.Sprintf(templateV1, "/"+stack+"/secret")
	req := request(t, stack, body, secretParams())
	applyPlanned(t, d, req)

	writeTemplate(t, req.Root, withResource(body, "Queue", "AWS::SQS::Queue"))
	plan, err := d.Plan(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	// Someone else updates the stack between plan and apply: the
	// template and parameters captf deploys are the same, the change set
	// they make is not.
	moved := withResource(body, "Elsewhere", "AWS::SNS::Topic")
	_, err = cf.UpdateStack(ctx, &cloudformation.UpdateStackInput{
		StackName:    aws.String(stack),
		TemplateBody: aws.String(moved),
		Parameters:   cfnParams(map[string]string{"Secret": canary}),
	})
	if err != nil {
		t.Fatal(err)
	}
	before := resources(t, cf, stack)

	_, err = d.Apply(ctx, req, plan)
	if !errors.Is(err, preview.ErrMoved) || !strings.Contains(err.Error(), "refusing to apply") {
		t.Fatalf("apply over a moved stack: %v, want refusing to apply wrapping ErrMoved", err)
	}
	if !strings.Contains(err.Error(), "the change set is cfnc1:") || !strings.Contains(err.Error(), plan.Private.(*planState).Changes) {
		t.Errorf("error %q does not name both changes digests", err)
	}
	if strings.Contains(err.Error(), canary) {
		t.Error("the error holds the NoEcho value")
	}
	after := resources(t, cf, stack)
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("resources changed by a refused apply (-before +after):\n%s", diff)
	}
	if _, ok := after["Queue"]; ok {
		t.Error("the refused change set was executed")
	}
	if changes := changeSets(t, cf, stack); len(changes) != 0 {
		t.Errorf("the refused change set was left: %v", changes)
	}
}

func TestHolesCreateNoChangeSet(t *testing.T) {
	ctx := context.Background()
	cf := motoClient(t)
	d := testDeploy()
	stack := unique("holes-")
	body := fmt.Sprintf(templateV1, "/"+stack+"/secret")
	// Secret reads outputs of network and dns, which have no value yet.
	req := request(t, stack, body, map[string]any{"Stage": "prod"})
	req.Missing = []string{"network", "dns", "network"}

	plan, err := d.Plan(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	wantHoles := []changeset.Hole{
		{Reason: "inputs from dns; re-checked on apply"},
		{Reason: "inputs from network; re-checked on apply"},
	}
	if diff := cmp.Diff(wantHoles, plan.Member.Holes); diff != "" {
		t.Errorf("holes (-want +got):\n%s", diff)
	}
	if len(plan.Entries) != 0 || len(plan.PlannedOutputs) != 0 {
		t.Errorf("a member with holes has entries %v or outputs %v", plan.Entries, plan.PlannedOutputs)
	}
	if len(plan.DeclaredOutputs) == 0 {
		t.Error("a member with holes does not say which outputs its template declares")
	}
	if s := stackStatus(t, cf, stack); s != "" {
		t.Errorf("a plan with holes made a stack (%s)", s)
	}

	// The digest names what was missing.
	other := req
	other.Missing = []string{"network"}
	otherPlan, err := d.Plan(ctx, other)
	if err != nil {
		t.Fatal(err)
	}
	if otherPlan.Member.PlanDigest == plan.Member.PlanDigest {
		t.Error("the digest does not cover the missing components")
	}

	// On apply the inputs still have no value: nothing is created.
	if _, err := d.Apply(ctx, req, plan); err == nil || !strings.Contains(err.Error(), "still have no value") {
		t.Errorf("apply with inputs still missing: %v", err)
	}
	if s := stackStatus(t, cf, stack); s != "" {
		t.Errorf("a refused apply made a stack (%s)", s)
	}

	// Once upstream applied, its value is resolved and the change set is
	// executed as created.
	resolved := req
	resolved.Missing = nil
	resolved.Inputs = map[string]any{}
	for k, v := range req.Inputs {
		resolved.Inputs[k] = v
	}
	resolved.Inputs["parameters"] = map[string]any{"Stage": "prod", "Secret": json.RawMessage(`"` + canary + `"`)}
	if _, err := d.Apply(ctx, resolved, plan); err != nil {
		t.Fatal(err)
	}
	if s := stackStatus(t, cf, stack); s != "CREATE_COMPLETE" {
		t.Errorf("after the apply of a member with holes the stack is %q", s)
	}

	// A template changed since the plan is refused even with holes.
	stack2 := unique("holes-")
	req2 := request(t, stack2, fmt.Sprintf(templateV1, "/"+stack2+"/secret"), nil)
	req2.Missing = []string{"network"}
	plan2, err := d.Plan(ctx, req2)
	if err != nil {
		t.Fatal(err)
	}
	writeTemplate(t, req2.Root, withResource(fmt.Sprintf(templateV1, "/"+stack2+"/secret"), "Queue", "AWS::SQS::Queue"))
	req2.Missing = nil
	req2.Inputs["parameters"] = secretParams()
	if _, err := d.Apply(ctx, req2, plan2); !errors.Is(err, preview.ErrMoved) {
		t.Errorf("apply of a member with holes whose template moved: %v, want ErrMoved", err)
	}
	if s := stackStatus(t, cf, stack2); s != "" {
		t.Errorf("a refused apply made a stack (%s)", s)
	}
}

func TestOutputsOfExistingAndMissingStack(t *testing.T) {
	ctx := context.Background()
	cf := motoClient(t)
	d := testDeploy()
	stack := unique("outputs-")
	body := fmt.Sprintf(templateV1, "/"+stack+"/secret")
	// moto 5.2.1 fills outputs on CreateStack but not when it executes a
	// change set, so this stack is made with CreateStack.
	_, err := cf.CreateStack(ctx, &cloudformation.CreateStackInput{
		StackName:    aws.String(stack),
		TemplateBody: aws.String(body),
		Parameters:   cfnParams(map[string]string{"Secret": "another-value"}),
	})
	if err != nil {
		t.Fatal(err)
	}
	req := request(t, stack, body, map[string]any{"Secret": "another-value"})
	got, err := d.Outputs(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	topic := resources(t, cf, stack)["Topic"]
	// SecretOut shows the NoEcho parameter (CloudFormation does not mask
	// outputs), so it is left out.
	want := preview.Outputs{
		"Fixed":    json.RawMessage(`"fixed"`),
		"Where":    json.RawMessage(`"` + stack + `-dev"`),
		"TopicArn": json.RawMessage(`"` + topic + `"`),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("outputs (-want +got):\n%s", diff)
	}

	// A change that modifies the topic in place (moto's Modify) keeps the
	// outputs that read it; the new queue reads nothing yet.
	writeTemplate(t, req.Root, withResource(body, "Queue", "AWS::SQS::Queue"))
	plan, err := d.Plan(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	wantPlanned := preview.Outputs{
		"Fixed":    json.RawMessage(`"fixed"`),
		"Where":    json.RawMessage(`"` + stack + `-dev"`),
		"TopicArn": json.RawMessage(`"` + topic + `"`),
	}
	if diff := cmp.Diff(wantPlanned, plan.PlannedOutputs); diff != "" {
		t.Errorf("planned outputs (-want +got):\n%s", diff)
	}

	none, err := d.Outputs(ctx, request(t, unique("absent-"), body, nil))
	if err != nil || len(none) != 0 {
		t.Errorf("outputs of a stack that does not exist: %v, %v", none, err)
	}
}

// applyPlanned plans and applies req, leaving a deployed stack.
func applyPlanned(t *testing.T, d *Deploy, req preview.Request) {
	t.Helper()
	plan, err := d.Plan(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Apply(context.Background(), req, plan); err != nil {
		t.Fatal(err)
	}
}

func cfnParams(m map[string]string) []types.Parameter {
	var out []types.Parameter
	for k, v := range m {
		out = append(out, types.Parameter{ParameterKey: aws.String(k), ParameterValue: aws.String(v)})
	}
	return out
}

// TestApplyOfAFailingChangeSetIsAnError: the SSM parameter's name is taken
// by another stack, so moto refuses to execute the change set.
func TestApplyOfAFailingChangeSetIsAnError(t *testing.T) {
	ctx := context.Background()
	d := testDeploy()
	first := unique("taken-")
	name := "/" + first + "/secret"
	applyPlanned(t, d, request(t, first, fmt.Sprintf(templateV1, name), secretParams()))

	second := unique("clash-")
	req := request(t, second, fmt.Sprintf(templateV1, name), secretParams())
	plan, err := d.Plan(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Apply(ctx, req, plan)
	if err == nil || !strings.Contains(err.Error(), "execute change set of stack "+second+": ") {
		t.Fatalf("apply of a change set CloudFormation cannot execute: %v", err)
	}
	if errors.Is(err, preview.ErrMoved) {
		t.Error("a failed apply reads as a moved plan")
	}
	if strings.Contains(err.Error(), canary) {
		t.Error("the error holds the NoEcho value")
	}
}

// TestNoEchoValueMovesDigest: separate Plan calls of fresh capabilities,
// as a review job and an apply job make them, digest a NoEcho value through
// the keyed digest: another value moves the digest (the entries show no
// difference), the same value does not, another key does; the key shows up
// nowhere. An apply with another value than the approved one is refused
// and makes no stack.
func TestNoEchoValueMovesDigest(t *testing.T) {
	ctx := context.Background()
	cf := motoClient(t)
	stack := unique("noecho-")
	req := request(t, stack, fmt.Sprintf(templateV1, "/"+stack+"/secret"), secretParams())
	planFresh := func(t *testing.T, req preview.Request) *preview.Plan {
		t.Helper()
		p, err := testDeploy().Plan(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		noCanaryInPlan(t, p)
		for _, k := range append(previewtest.KeyForms(previewtest.Key()), previewtest.KeyForms(previewtest.OtherKey())...) {
			b, _ := json.Marshal(p)
			if strings.Contains(string(b)+fmt.Sprintf("%+v", p.Private), k) {
				t.Errorf("the plan holds the key as %q", k)
			}
		}
		return p
	}
	reviewed, again := planFresh(t, req), planFresh(t, req)
	if again.Member.PlanDigest != reviewed.Member.PlanDigest {
		t.Errorf("one NoEcho value, two digests: %s and %s", reviewed.Member.PlanDigest, again.Member.PlanDigest)
	}
	otherKey := req
	otherKey.Key = previewtest.OtherKey()
	if d := planFresh(t, otherKey).Member.PlanDigest; d == reviewed.Member.PlanDigest {
		t.Errorf("two keys, one digest %s", d)
	}
	rotated := req
	rotated.Inputs = map[string]any{}
	for k, v := range req.Inputs {
		rotated.Inputs[k] = v
	}
	rotated.Inputs["parameters"] = map[string]any{"Secret": canary + "-rotated"}
	changed := planFresh(t, rotated)
	if changed.Member.PlanDigest == reviewed.Member.PlanDigest {
		t.Errorf("another NoEcho value, same digest %s", reviewed.Member.PlanDigest)
	}
	if diff := cmp.Diff(reviewed.Entries, changed.Entries); diff != "" {
		t.Errorf("the entries show the NoEcho change (-reviewed +changed):\n%s", diff)
	}
	_, err := testDeploy().Apply(ctx, rotated, reviewed)
	if !errors.Is(err, preview.ErrMoved) || !strings.Contains(err.Error(), "refusing to apply: the plan digest is "+changed.Member.PlanDigest) {
		t.Fatalf("apply with another NoEcho value: %v", err)
	}
	if strings.Contains(err.Error(), canary) {
		t.Error("the error holds the NoEcho value")
	}
	if s := stackStatus(t, cf, stack); s != "" {
		t.Errorf("a refused apply made a stack (%s)", s)
	}
}

// TestShortKey: Plan and Apply refuse a key missing or shorter than 32
// bytes before they call CloudFormation (the endpoint answers nothing);
// Outputs, which digests nothing, needs none.
func TestShortKey(t *testing.T) {
	ctx := context.Background()
	for _, key := range [][]byte{nil, previewtest.Key()[:31]} {
		req := request(t, unique("short-"), fmt.Sprintf(templateV1, "/short/secret"), secretParams())
		req.Inputs["endpoint"] = "http://127.0.0.1:1"
		req.Key = key
		_, err := testDeploy().Plan(ctx, req)
		if !errors.Is(err, preview.ErrShortKey) || !strings.Contains(err.Error(), fmt.Sprintf("holds %d bytes", len(key))) {
			t.Errorf("plan with a %d-byte key: %v, want ErrShortKey", len(key), err)
		}
		_, err = testDeploy().Apply(ctx, req, &preview.Plan{Private: &planState{}})
		if !errors.Is(err, preview.ErrShortKey) {
			t.Errorf("apply with a %d-byte key: %v, want ErrShortKey", len(key), err)
		}
		req.Inputs["endpoint"] = motoURL
		if out, err := testDeploy().Outputs(ctx, req); err != nil || len(out) != 0 {
			t.Errorf("outputs of a stack that does not exist, with a %d-byte key: %v, %v", len(key), out, err)
		}
	}
}

// TestParameterChangeMovesDigest: a parameter the change set may not show
// (moto misses parameter-only changes) still moves the member digest, and
// an apply with another value than the approved one is refused.
func TestParameterChangeMovesDigest(t *testing.T) {
	ctx := context.Background()
	cf := motoClient(t)
	d := testDeploy()
	stack := unique("param-")
	req := request(t, stack, fmt.Sprintf(templateV1, "/"+stack+"/secret"), secretParams())
	applyPlanned(t, d, req)
	before := resources(t, cf, stack)
	dev, err := d.Plan(ctx, req)
	if err != nil {
		t.Fatal(err)
	}

	req.Inputs["parameters"] = map[string]any{"Secret": canary, "Stage": "prod"}
	prod, err := d.Plan(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if prod.Member.PlanDigest == dev.Member.PlanDigest {
		t.Fatal("a changed parameter left the digest as it was")
	}
	req.Inputs["parameters"] = map[string]any{"Secret": canary, "Stage": "test"}
	_, err = d.Apply(ctx, req, prod)
	if !errors.Is(err, preview.ErrMoved) || !strings.Contains(err.Error(), "refusing to apply") {
		t.Fatalf("apply with another parameter value than approved: %v", err)
	}
	if diff := cmp.Diff(before, resources(t, cf, stack)); diff != "" {
		t.Errorf("resources changed by a refused apply (-before +after):\n%s", diff)
	}
}
