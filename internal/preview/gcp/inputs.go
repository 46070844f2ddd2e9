package gcp

import (
	"fmt"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/captf/captf/internal/preview"
)

// Environment variables the step falls back to.
const (
	// EndpointEnv points every read and write at one REST endpoint (an
	// emulator, floci-gcp); unset, each kind goes to its Google host.
	EndpointEnv = "GCP_ENDPOINT_URL"
	// ProjectEnv and CloudProjectEnv are the last two places a resource's
	// project is taken from.
	ProjectEnv      = "GCP_PROJECT_ID"
	CloudProjectEnv = "GOOGLE_CLOUD_PROJECT"
	// TokenEnv holds the OAuth access token sent as a bearer token; never
	// in a digest, an error or a log.
	TokenEnv = "GOOGLE_OAUTH_ACCESS_TOKEN"
)

// Labels captf stamps on every resource it creates: prune deletes only a
// resource that carries both, the second with the step's stack.
const (
	ManagedByLabel = "managed-by"
	ManagedByValue = "captf"
	StackLabel     = "captf-stack"
)

// LegacyManagedByValue is the managed-by value captf stamped before it
// named itself there; prune still takes a resource that carries it as
// captf's.
const LegacyManagedByValue = "chant"

// ProjectAnnotation names a resource's project in Config Connector.
const ProjectAnnotation = "cnrm.cloud.google.com/project-id"

// inputs are a step's inputs, checked.
type inputs struct {
	// Manifest is the manifest's path relative to the repository root.
	Manifest string
	// Stack is the member's name and the value of StackLabel.
	Stack string
	// Endpoint is the REST endpoint without a trailing slash; empty for
	// Google's hosts.
	Endpoint string
	// Project is the step's project, which overrides every resource's.
	Project string
	Prune   bool
}

var knownInputs = []string{"manifest", "stack", "endpoint", "project", "prune"}

// labelValue is what Google takes as a label value.
var labelValue = regexp.MustCompile(`^[a-z0-9_-]{1,63}$`)

// parseInputs checks the step's inputs, falling back to the environment
// for the endpoint. Errors name the input and what is wrong with it.
func parseInputs(component string, raw map[string]any) (inputs, error) {
	in := inputs{Stack: component}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := raw[k]
		var err error
		switch k {
		case "manifest":
			in.Manifest, err = text(v)
		case "stack":
			in.Stack, err = text(v)
		case "endpoint":
			in.Endpoint, err = text(v)
		case "project":
			in.Project, err = text(v)
		case "prune":
			b, ok := v.(bool)
			if !ok {
				err = fmt.Errorf("must be true or false, not %s", preview.KindOf(v))
			}
			in.Prune = b
		default:
			err = fmt.Errorf("unknown input (known: %s)", strings.Join(knownInputs, ", "))
		}
		if err != nil {
			return inputs{}, fmt.Errorf("input %s: %w", k, err)
		}
	}
	if in.Manifest == "" {
		return inputs{}, fmt.Errorf("input manifest: missing (a Config Connector manifest file or directory, relative to the repository root)")
	}
	if !labelValue.MatchString(in.Stack) {
		what := "input stack"
		if _, given := raw["stack"]; !given {
			what = "input stack: not set, and the component's name"
		}
		return inputs{}, fmt.Errorf("%s %q is not a label value Google takes (1 to 63 lowercase letters, digits, '_' or '-')", what, in.Stack)
	}
	if in.Endpoint == "" {
		in.Endpoint = os.Getenv(EndpointEnv)
	}
	if in.Endpoint != "" {
		u, err := url.Parse(in.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return inputs{}, fmt.Errorf("input endpoint (or %s): %q is not an http or https URL", EndpointEnv, in.Endpoint)
		}
		in.Endpoint = strings.TrimRight(in.Endpoint, "/")
	}
	in.Project = strings.TrimPrefix(in.Project, "projects/")
	return in, nil
}

func text(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("must be a string, not %s", preview.KindOf(v))
	}
	return s, nil
}

// resolveProject is the project of one resource: the step's, else
// spec.projectRef.external, the project-id annotation, GCP_PROJECT_ID,
// then GOOGLE_CLOUD_PROJECT; "" when none says.
func resolveProject(step string, obj map[string]any) string {
	if step != "" {
		return step
	}
	spec, _ := obj["spec"].(map[string]any)
	if r, ok := spec["projectRef"].(map[string]any); ok {
		if ext, ok := r["external"].(string); ok && ext != "" {
			return strings.TrimPrefix(ext, "projects/")
		}
	}
	md, _ := obj["metadata"].(map[string]any)
	if a, ok := md["annotations"].(map[string]any); ok {
		if p, ok := a[ProjectAnnotation].(string); ok && p != "" {
			return p
		}
	}
	if p := os.Getenv(ProjectEnv); p != "" {
		return p
	}
	return os.Getenv(CloudProjectEnv)
}
