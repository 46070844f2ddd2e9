// Package cfn is the cfn-deploy capability of plan previews (spec 003): it
// plans a CloudFormation stack with a change set that it deletes without
// executing, and applies an approved plan by executing a fresh change set
// only when that change set proposes the changes the plan read.
package cfn

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"

	"github.com/captf/captf/internal/preview"
	"github.com/captf/captf/pkg/changeset"
)

// Kind is the step kind cfn-deploy.
const Kind = "cfn-deploy"

// Prefixes of the change sets captf creates.
const (
	planChangeSet  = "captf-preview-"
	applyChangeSet = "captf-apply-"
)

// Deploy is the cfn-deploy capability.
type Deploy struct {
	// poll is the first wait between two reads of a change set or a
	// stack.
	poll time.Duration
}

var _ preview.Capability = (*Deploy)(nil)

// New returns the cfn-deploy capability. It reaches CloudFormation with the
// SDK's usual configuration (credentials, AWS_REGION, AWS_ENDPOINT_URL),
// overridden by the step's region and endpoint inputs.
func New() *Deploy {
	return &Deploy{poll: time.Second}
}

// Kind returns "cfn-deploy".
func (d *Deploy) Kind() string { return Kind }

// planState is what Plan hands Apply through Plan.Private.
type planState struct {
	// Changes is the digest of the changes the plan's change set proposed
	// (empty for a member with holes, which read none).
	Changes string
	// Frame is the digest of what the member deploys leaving out its
	// parameters: Apply holds a member with holes to it.
	Frame string
}

// member is one step's stack, prepared for a change set.
type member struct {
	in       inputs
	region   string
	session  *session
	body     []byte
	tmpl     *template
	document changeset.Member
	// frame is the digest Apply holds a member with holes to.
	frame string
}

// Plan creates a change set, reads it and deletes it. A member whose
// parameters wait on outputs without a value gets holes and no change set.
func (d *Deploy) Plan(ctx context.Context, req preview.Request) (*preview.Plan, error) {
	m, err := d.prepareDigest(ctx, req)
	if err != nil {
		return nil, err
	}
	state := &planState{Frame: m.frame}
	// The template declares its outputs, holes or not.
	plan := &preview.Plan{Member: m.document, Private: state, DeclaredOutputs: slices.Sorted(maps.Keys(m.tmpl.Outputs))}
	if len(m.document.Holes) > 0 {
		return plan, nil
	}
	if err := m.checkParameters(); err != nil {
		return nil, err
	}
	p, err := m.session.propose(ctx, planChangeSet, m.in, string(m.body), m.in.Parameters)
	if err != nil {
		return nil, err
	}
	defer m.session.discard(ctx, p)
	if addrs := replaced(p.Changes); len(addrs) > 0 && m.in.OnReplace == onReplaceBlock {
		return nil, blockedError(m.in.Stack, addrs)
	}
	plan.Entries, err = entries(m.in.Stack, p.Changes)
	if err != nil {
		return nil, err
	}
	state.Changes, err = changesDigest(p.Changes)
	if err != nil {
		return nil, err
	}
	plan.PlannedOutputs, err = m.plannedOutputs(ctx, p)
	if err != nil {
		return nil, err
	}
	return plan, nil
}

// Apply creates a fresh change set and executes it only when it proposes
// the changes approved read (for a member with holes: when the template and
// where it deploys are unchanged), then waits for the stack and returns its
// outputs.
func (d *Deploy) Apply(ctx context.Context, req preview.Request, approved *preview.Plan) (preview.Outputs, error) {
	m, err := d.prepareDigest(ctx, req)
	if err != nil {
		return nil, err
	}
	stack := m.in.Stack
	if approved == nil {
		return nil, fmt.Errorf("stack %s: apply needs the approved plan", stack)
	}
	state, ok := approved.Private.(*planState)
	if !ok {
		return nil, fmt.Errorf("stack %s: the approved plan was not made by cfn-deploy's Plan in this command", stack)
	}
	withHoles := len(approved.Member.Holes) > 0
	if withHoles {
		if len(req.Missing) > 0 {
			return nil, fmt.Errorf("stack %s: inputs from %s still have no value; nothing applied", stack, strings.Join(req.Missing, ", "))
		}
		if m.frame != state.Frame {
			return nil, moved(stack, "template or target", m.frame, state.Frame)
		}
	} else {
		// The plan digest binds the NoEcho values under the preview key.
		if m.document.PlanDigest != approved.Member.PlanDigest {
			return nil, moved(stack, "plan digest", m.document.PlanDigest, approved.Member.PlanDigest)
		}
	}
	if err := m.checkParameters(); err != nil {
		return nil, err
	}
	p, err := m.session.propose(ctx, applyChangeSet, m.in, string(m.body), m.in.Parameters)
	if err != nil {
		return nil, err
	}
	if withHoles {
		if addrs := replaced(p.Changes); len(addrs) > 0 && m.in.OnReplace == onReplaceBlock {
			m.session.discard(ctx, p)
			return nil, blockedError(stack, addrs)
		}
	} else {
		got, err := changesDigest(p.Changes)
		if err != nil {
			m.session.discard(ctx, p)
			return nil, err
		}
		if got != state.Changes {
			m.session.discard(ctx, p)
			return nil, moved(stack, "change set", got, state.Changes)
		}
	}
	if p.Empty {
		m.session.discard(ctx, p)
	} else if err := m.session.execute(ctx, p); err != nil {
		return nil, err
	}
	out, err := m.session.outputs(ctx)
	if err != nil {
		return nil, err
	}
	return m.withoutSensitive(out), nil
}

// Outputs reads the stack's outputs with DescribeStacks; none for a stack
// that does not exist. An output that shows a NoEcho parameter is left out.
func (d *Deploy) Outputs(ctx context.Context, req preview.Request) (preview.Outputs, error) {
	m, err := d.prepare(ctx, req)
	if err != nil {
		return nil, err
	}
	out, err := m.session.outputs(ctx)
	if err != nil {
		return nil, err
	}
	return m.withoutSensitive(out), nil
}

func moved(stack, what, got, approved string) error {
	return fmt.Errorf("stack %s: refusing to apply: the %s is %s, the approved plan's %s: %w", stack, what, got, approved, preview.ErrMoved)
}

// connect makes the CloudFormation client of the step: the SDK's default
// configuration with the step's region and endpoint on top.
func (d *Deploy) connect(ctx context.Context, in inputs) (*session, string, error) {
	var opts []func(*config.LoadOptions) error
	if in.Region != "" {
		opts = append(opts, config.WithRegion(in.Region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, "", fmt.Errorf("stack %s: aws configuration: %w", in.Stack, err)
	}
	if cfg.Region == "" {
		return nil, "", fmt.Errorf("stack %s: input region: not set, and no AWS region is configured (AWS_REGION)", in.Stack)
	}
	client := cloudformation.NewFromConfig(cfg, func(o *cloudformation.Options) {
		if in.Endpoint != "" {
			o.BaseEndpoint = aws.String(in.Endpoint)
		}
	})
	s := &session{api: client, stack: in.Stack, redact: newRedactor(in.Parameters), poll: d.poll}
	return s, cfg.Region, nil
}

// prepareDigest prepares the member and computes its digests, which bind
// the NoEcho values under req.Key: what Plan and Apply start with. A key
// shorter than preview.MinKeySize is refused before CloudFormation is
// called.
func (d *Deploy) prepareDigest(ctx context.Context, req preview.Request) (*member, error) {
	m, err := d.prepare(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := preview.CheckKey(req.Key); err != nil {
		return nil, fmt.Errorf("stack %s: %w", m.in.Stack, err)
	}
	missing := append([]string(nil), req.Missing...)
	sort.Strings(missing)
	var digest string
	digest, m.frame, err = digests(req.Environment, m.in, m.region, m.body, missing, m.tmpl.noEcho(), req.Key)
	if err != nil {
		return nil, err
	}
	m.document = changeset.Member{
		Name:       m.in.Stack,
		Component:  req.Component,
		Capability: Kind,
		Status:     changeset.StatusPlanned,
		PlanDigest: digest,
		Holes:      holes(missing),
	}
	return m, nil
}

// prepare checks the inputs, reads the template and makes the client; it
// calls no API.
func (d *Deploy) prepare(ctx context.Context, req preview.Request) (*member, error) {
	in, err := parseInputs(req.Component, req.Inputs)
	if err != nil {
		return nil, err
	}
	m := &member{in: in}
	m.body, err = os.ReadFile(filepath.Join(req.Root, filepath.FromSlash(in.Template)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("input template: %s does not exist in the repository", in.Template)
	}
	if err != nil {
		return nil, fmt.Errorf("input template: %w", err)
	}
	if len(m.body) > maxTemplateBody {
		return nil, fmt.Errorf("template %s: %d bytes, more than the %d CloudFormation takes inline (captf does not upload templates to S3)", in.Template, len(m.body), maxTemplateBody)
	}
	m.tmpl, err = parseTemplate(m.body)
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", in.Template, err)
	}
	for _, name := range sortedKeys(keySet(in.Parameters)) {
		if _, ok := m.tmpl.Parameters[name]; !ok {
			return nil, fmt.Errorf("input parameters.%s: template %s declares no parameter %s", name, in.Template, name)
		}
	}
	m.session, m.region, err = d.connect(ctx, in)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// checkParameters refuses a change set that CloudFormation would refuse for
// a parameter with neither a value nor a Default.
func (m *member) checkParameters() error {
	for _, name := range sortedKeys(keySet(m.tmpl.Parameters)) {
		if _, given := m.in.Parameters[name]; given || m.tmpl.Parameters[name].Default != nil {
			continue
		}
		return fmt.Errorf("input parameters.%s: missing, and template %s gives parameter %s no Default", name, m.in.Template, name)
	}
	return nil
}

// holes says why a member has no change set: one hole per upstream
// component whose outputs have no value yet. (The project file cannot
// make a step read another step of its own component; see
// docs/preview.md.)
func holes(missing []string) []changeset.Hole {
	var out []changeset.Hole
	seen := map[string]bool{}
	for _, m := range missing {
		if seen[m] {
			continue
		}
		seen[m] = true
		out = append(out, changeset.Hole{Reason: fmt.Sprintf("inputs from %s; re-checked on apply", m)})
	}
	return out
}
