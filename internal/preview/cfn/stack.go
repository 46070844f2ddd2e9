package cfn

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/smithy-go"

	"github.com/captf/captf/internal/preview"
)

// api is the part of the CloudFormation client captf calls; the SDK's
// *cloudformation.Client is one.
type api interface {
	CreateChangeSet(context.Context, *cloudformation.CreateChangeSetInput, ...func(*cloudformation.Options)) (*cloudformation.CreateChangeSetOutput, error)
	DescribeChangeSet(context.Context, *cloudformation.DescribeChangeSetInput, ...func(*cloudformation.Options)) (*cloudformation.DescribeChangeSetOutput, error)
	DeleteChangeSet(context.Context, *cloudformation.DeleteChangeSetInput, ...func(*cloudformation.Options)) (*cloudformation.DeleteChangeSetOutput, error)
	ExecuteChangeSet(context.Context, *cloudformation.ExecuteChangeSetInput, ...func(*cloudformation.Options)) (*cloudformation.ExecuteChangeSetOutput, error)
	DescribeStacks(context.Context, *cloudformation.DescribeStacksInput, ...func(*cloudformation.Options)) (*cloudformation.DescribeStacksOutput, error)
	DeleteStack(context.Context, *cloudformation.DeleteStackInput, ...func(*cloudformation.Options)) (*cloudformation.DeleteStackOutput, error)
	GetTemplate(context.Context, *cloudformation.GetTemplateInput, ...func(*cloudformation.Options)) (*cloudformation.GetTemplateOutput, error)
}

var _ api = (*cloudformation.Client)(nil)

// maxNesting bounds how deep captf follows nested change sets.
const maxNesting = 10

// cleanupTimeout bounds deleting a change set (and the empty stack of a
// CREATE change set) after the caller's context ended.
const cleanupTimeout = 2 * time.Minute

// session is one stack in one account and region, and the values its
// errors must never show.
type session struct {
	api    api
	stack  string
	redact *redactor
	// poll is the first wait between two reads of a change set or stack;
	// it doubles up to 5 s.
	poll time.Duration
}

// proposal is a change set captf created and read.
type proposal struct {
	ID      string
	StackID string
	// CreatedStack is true when the stack did not exist before, so the
	// change set is of type CREATE and left a REVIEW_IN_PROGRESS stack.
	CreatedStack bool
	// Empty is true when CloudFormation found nothing to change; the
	// change set then cannot be executed.
	Empty   bool
	Changes []change
	// Current is the stack as it was before the change set, nil when it
	// did not exist or was REVIEW_IN_PROGRESS.
	Current *types.Stack
}

// describeStack returns the stack, or nil when it does not exist.
func (s *session) describeStack(ctx context.Context, nameOrID string) (*types.Stack, error) {
	out, err := s.api.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(nameOrID)})
	if err != nil {
		if notExist(err) {
			return nil, nil
		}
		return nil, s.redact.err(fmt.Sprintf("describe stack %s", s.stack), err)
	}
	if len(out.Stacks) == 0 || out.Stacks[0].StackStatus == types.StackStatusDeleteComplete {
		return nil, nil
	}
	return &out.Stacks[0], nil
}

func notExist(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "ValidationError" && strings.Contains(ae.ErrorMessage(), "does not exist")
}

func noChanges(reason string) bool {
	return strings.Contains(reason, "didn't contain changes") || strings.Contains(reason, "No updates are to be performed")
}

// propose creates a change set for body and params, waits until
// CloudFormation computed it and reads all its changes, nested stacks'
// included. The caller deletes or executes it.
func (s *session) propose(ctx context.Context, prefix string, in inputs, body string, params map[string]string) (*proposal, error) {
	current, err := s.describeStack(ctx, s.stack)
	if err != nil {
		return nil, err
	}
	p := &proposal{}
	if current != nil && current.StackStatus != types.StackStatusReviewInProgress {
		p.Current = current
	}
	csType := types.ChangeSetTypeUpdate
	if current == nil || current.StackStatus == types.StackStatusReviewInProgress {
		csType = types.ChangeSetTypeCreate
		p.CreatedStack = current == nil
	}
	name, err := changeSetName(prefix)
	if err != nil {
		return nil, err
	}
	input := &cloudformation.CreateChangeSetInput{
		StackName:           aws.String(s.stack),
		ChangeSetName:       aws.String(name),
		ChangeSetType:       csType,
		TemplateBody:        aws.String(body),
		IncludeNestedStacks: aws.Bool(true),
		Description:         aws.String("captf plan preview; deleted unless an approved apply executes it"),
	}
	for _, k := range sortedKeys(keySet(params)) {
		input.Parameters = append(input.Parameters, types.Parameter{ParameterKey: aws.String(k), ParameterValue: aws.String(params[k])})
	}
	for _, c := range in.Capabilities {
		input.Capabilities = append(input.Capabilities, types.Capability(c))
	}
	created, err := s.api.CreateChangeSet(ctx, input)
	if err != nil {
		var ae smithy.APIError
		if csType == types.ChangeSetTypeUpdate && errors.As(err, &ae) && noChanges(ae.ErrorMessage()) {
			// moto answers an unchanged stack here; CloudFormation creates
			// a FAILED change set instead (below).
			p.Empty = true
			return p, nil
		}
		return nil, s.redact.err(fmt.Sprintf("create change set for stack %s", s.stack), err)
	}
	p.ID = aws.ToString(created.Id)
	p.StackID = aws.ToString(created.StackId)
	status, reason, err := s.waitChangeSet(ctx, p.ID)
	if err != nil {
		s.discard(ctx, p)
		return nil, err
	}
	if status == types.ChangeSetStatusFailed {
		if noChanges(reason) {
			p.Empty = true
			return p, nil
		}
		s.discard(ctx, p)
		return nil, fmt.Errorf("change set for stack %s failed: %s", s.stack, s.redact.text(reason))
	}
	p.Changes, err = s.readChanges(ctx, p.ID, "", 0)
	if err != nil {
		s.discard(ctx, p)
		return nil, err
	}
	sortChanges(p.Changes)
	return p, nil
}

// waitChangeSet polls the change set until CloudFormation finished
// computing it, and returns its status and reason.
func (s *session) waitChangeSet(ctx context.Context, id string) (types.ChangeSetStatus, string, error) {
	wait := s.poll
	for {
		out, err := s.api.DescribeChangeSet(ctx, &cloudformation.DescribeChangeSetInput{ChangeSetName: aws.String(id)})
		if err != nil {
			return "", "", s.redact.err(fmt.Sprintf("describe change set of stack %s", s.stack), err)
		}
		switch out.Status {
		case types.ChangeSetStatusCreateComplete, types.ChangeSetStatusFailed:
			return out.Status, aws.ToString(out.StatusReason), nil
		case types.ChangeSetStatusCreatePending, types.ChangeSetStatusCreateInProgress:
		default:
			return "", "", fmt.Errorf("change set of stack %s is %s", s.stack, out.Status)
		}
		if err := sleep(ctx, &wait); err != nil {
			return "", "", fmt.Errorf("wait for the change set of stack %s: %w", s.stack, err)
		}
	}
}

// readChanges reads every page of a change set, and the change sets of its
// nested stacks under "<logical id>/".
func (s *session) readChanges(ctx context.Context, id, prefix string, depth int) ([]change, error) {
	var out []change
	var token *string
	for {
		page, err := s.api.DescribeChangeSet(ctx, &cloudformation.DescribeChangeSetInput{ChangeSetName: aws.String(id), NextToken: token})
		if err != nil {
			return nil, s.redact.err(fmt.Sprintf("read change set of stack %s", s.stack), err)
		}
		for _, c := range page.Changes {
			ch, ok := readChange(prefix, c)
			if !ok {
				continue
			}
			out = append(out, ch)
			rc := c.ResourceChange
			if aws.ToString(rc.ResourceType) != "AWS::CloudFormation::Stack" || aws.ToString(rc.ChangeSetId) == "" {
				continue
			}
			if depth >= maxNesting {
				return nil, fmt.Errorf("stack %s: nested stacks deeper than %d", s.stack, maxNesting)
			}
			nested, err := s.readChanges(ctx, aws.ToString(rc.ChangeSetId), ch.Address+"/", depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, nested...)
		}
		token = page.NextToken
		if aws.ToString(token) == "" {
			return out, nil
		}
	}
}

// discard deletes the change set and, when it made the stack, the empty
// REVIEW_IN_PROGRESS stack. It runs even when ctx is done. It reports
// nothing: a change set left behind is never executed by captf, and the
// next plan makes its own.
func (s *session) discard(ctx context.Context, p *proposal) {
	if p == nil || p.ID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	_, _ = s.api.DeleteChangeSet(ctx, &cloudformation.DeleteChangeSetInput{ChangeSetName: aws.String(p.ID)})
	if !p.CreatedStack {
		return
	}
	_ = s.deleteReviewStack(ctx, p.StackID)
}

// deleteReviewStack deletes the stack a CREATE change set left, only while
// it is still REVIEW_IN_PROGRESS (nothing was ever deployed in it), and
// waits until it is gone.
func (s *session) deleteReviewStack(ctx context.Context, stackID string) error {
	st, err := s.describeStack(ctx, stackID)
	if err != nil || st == nil {
		return err
	}
	if st.StackStatus != types.StackStatusReviewInProgress {
		return nil
	}
	if _, err := s.api.DeleteStack(ctx, &cloudformation.DeleteStackInput{StackName: aws.String(stackID)}); err != nil {
		return s.redact.err(fmt.Sprintf("delete the empty stack %s", s.stack), err)
	}
	wait := s.poll
	for {
		st, err := s.describeStack(ctx, stackID)
		if err != nil || st == nil {
			return err
		}
		if st.StackStatus == types.StackStatusDeleteFailed {
			return fmt.Errorf("delete the empty stack %s: %s", s.stack, st.StackStatus)
		}
		if err := sleep(ctx, &wait); err != nil {
			return err
		}
	}
}

// execute runs the change set and waits until the stack settled. A stack
// that failed or rolled back is an error.
func (s *session) execute(ctx context.Context, p *proposal) error {
	if _, err := s.api.ExecuteChangeSet(ctx, &cloudformation.ExecuteChangeSetInput{ChangeSetName: aws.String(p.ID)}); err != nil {
		return s.redact.err(fmt.Sprintf("execute change set of stack %s", s.stack), err)
	}
	wait := s.poll
	for {
		st, err := s.describeStack(ctx, p.StackID)
		if err != nil {
			return err
		}
		if st == nil {
			return fmt.Errorf("stack %s: gone while its change set executed", s.stack)
		}
		status := st.StackStatus
		switch {
		case status == types.StackStatusCreateComplete || status == types.StackStatusUpdateComplete || status == types.StackStatusImportComplete:
			return nil
		case status == types.StackStatusReviewInProgress || strings.HasSuffix(string(status), "_IN_PROGRESS"):
		default:
			reason := s.redact.text(aws.ToString(st.StackStatusReason))
			if reason != "" {
				return fmt.Errorf("stack %s: %s: %s", s.stack, status, reason)
			}
			return fmt.Errorf("stack %s: %s", s.stack, status)
		}
		if err := sleep(ctx, &wait); err != nil {
			return fmt.Errorf("wait for stack %s: %w", s.stack, err)
		}
	}
}

// outputs reads the stack's outputs; none for a stack that does not exist
// or holds only a change set under review.
func (s *session) outputs(ctx context.Context) (preview.Outputs, error) {
	st, err := s.describeStack(ctx, s.stack)
	if err != nil || st == nil || st.StackStatus == types.StackStatusReviewInProgress {
		return preview.Outputs{}, err
	}
	return stackOutputs(st)
}

// stackOutputs are the outputs DescribeStacks gave, as JSON strings.
func stackOutputs(st *types.Stack) (preview.Outputs, error) {
	out := preview.Outputs{}
	for _, o := range st.Outputs {
		v, err := json.Marshal(aws.ToString(o.OutputValue))
		if err != nil {
			return nil, fmt.Errorf("stack %s: output %s: %w", aws.ToString(st.StackName), aws.ToString(o.OutputKey), err)
		}
		out[aws.ToString(o.OutputKey)] = v
	}
	return out, nil
}

func sleep(ctx context.Context, wait *time.Duration) error {
	t := time.NewTimer(*wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	*wait = min(*wait*2, 5*time.Second)
	return nil
}

// changeSetName is a fresh name: CloudFormation (and moto, which looks
// change sets up by name across stacks) must never confuse two of them.
func changeSetName(prefix string) (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("change set name: %w", err)
	}
	return prefix + hex.EncodeToString(b), nil
}

func keySet[V any](m map[string]V) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

// redactor removes values from texts that come back from CloudFormation
// (error messages, status reasons), which may quote a parameter.
type redactor struct {
	values []string
}

// minRedacted is the shortest value removed from texts: shorter ones would
// garble every message ("1", "us") and say little.
const minRedacted = 4

func newRedactor(values map[string]string) *redactor {
	r := &redactor{}
	for _, v := range values {
		if len(v) >= minRedacted {
			r.values = append(r.values, v)
		}
	}
	// Longest first, so a value inside another is not left half-removed.
	sort.Slice(r.values, func(i, j int) bool { return len(r.values[i]) > len(r.values[j]) })
	return r
}

func (r *redactor) text(s string) string {
	for _, v := range r.values {
		s = strings.ReplaceAll(s, v, "(redacted)")
	}
	return s
}

// err wraps an API error. The text is redacted and the API error itself is
// not kept (its message may hold a value); a cancelled context still reads
// as one.
func (r *redactor) err(what string, err error) error {
	msg := r.text(err.Error())
	for _, ctxErr := range []error{context.Canceled, context.DeadlineExceeded} {
		if errors.Is(err, ctxErr) {
			return fmt.Errorf("%s: %s: %w", what, msg, ctxErr)
		}
	}
	return fmt.Errorf("%s: %s", what, msg)
}
