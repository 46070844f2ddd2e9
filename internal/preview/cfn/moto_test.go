package cfn

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation/types"

	"github.com/captf/captf/internal/motoserver"
	"github.com/captf/captf/internal/preview"
	"github.com/captf/captf/internal/preview/previewtest"
)

// motoURL is the endpoint of the moto_server TestMain started.
var motoURL string

// TestMain starts one real moto_server (see internal/motoserver) for the
// package's tests; every test uses stacks of its own. A missing
// moto_server fails the run.
func TestMain(m *testing.M) {
	for k, v := range motoserver.Env {
		if err := os.Setenv(k, v); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	for _, k := range motoserver.Unset {
		if err := os.Unsetenv(k); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	moto, err := motoserver.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	motoURL = moto.URL
	code := m.Run()
	moto.Stop()
	os.Exit(code)
}

// testDeploy polls fast: moto answers at once.
func testDeploy() *Deploy { return &Deploy{poll: 50 * time.Millisecond} }

// unique returns prefix with a random suffix: moto keeps every stack and
// change set of the run.
func unique(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// motoClient is the test's own view of moto, independent of the code
// under test.
func motoClient(t *testing.T) *cloudformation.Client {
	t.Helper()
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return cloudformation.NewFromConfig(cfg, func(o *cloudformation.Options) { o.BaseEndpoint = aws.String(motoURL) })
}

// request is a step of component "app" in environment "staging" whose
// template file (template.yaml in a fresh repository root) holds body.
func request(t *testing.T, stack, body string, params map[string]any) preview.Request {
	t.Helper()
	root := t.TempDir()
	writeTemplate(t, root, body)
	inputs := map[string]any{"template": "infra/template.yaml", "stack": stack, "endpoint": motoURL}
	if params != nil {
		inputs["parameters"] = params
	}
	return preview.Request{Component: "app", Environment: "staging", Inputs: inputs, Root: root, WorkDir: t.TempDir(), Key: previewtest.Key()}
}

func writeTemplate(t *testing.T, root, body string) {
	t.Helper()
	path := filepath.Join(root, "infra", "template.yaml")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// stackStatus is the stack's status, or "" when it does not exist.
func stackStatus(t *testing.T, c *cloudformation.Client, stack string) string {
	t.Helper()
	out, err := c.DescribeStacks(context.Background(), &cloudformation.DescribeStacksInput{StackName: aws.String(stack)})
	if notExist(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(out.Stacks[0].StackStatus)
}

// resources maps the stack's logical ids to their physical ids.
func resources(t *testing.T, c *cloudformation.Client, stack string) map[string]string {
	t.Helper()
	out, err := c.DescribeStackResources(context.Background(), &cloudformation.DescribeStackResourcesInput{StackName: aws.String(stack)})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, r := range out.StackResources {
		m[aws.ToString(r.LogicalResourceId)] = aws.ToString(r.PhysicalResourceId)
	}
	return m
}

// changeSets lists the stack's change sets that are not executed yet.
func changeSets(t *testing.T, c *cloudformation.Client, stack string) []string {
	t.Helper()
	out, err := c.ListChangeSets(context.Background(), &cloudformation.ListChangeSetsInput{StackName: aws.String(stack)})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range out.Summaries {
		if s.ExecutionStatus != types.ExecutionStatusExecuteComplete {
			names = append(names, aws.ToString(s.ChangeSetName))
		}
	}
	return names
}
