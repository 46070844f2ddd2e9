package arm

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode"

	"github.com/captf/captf/internal/preview"
)

// Environment variables the step falls back to.
const (
	EndpointEnv     = "AZURE_ENDPOINT_URL"
	SubscriptionEnv = "AZURE_SUBSCRIPTION_ID"
	// TokenEnv holds the bearer token sent to ARM; never in a digest, an
	// error or a log.
	TokenEnv = "AZURE_ACCESS_TOKEN"
)

// DefaultEndpoint is Azure's public Resource Manager endpoint.
const DefaultEndpoint = "https://management.azure.com"

// inputs are a step's inputs, checked.
type inputs struct {
	// Template is the template's path relative to the repository root,
	// cleaned, with forward slashes.
	Template      string
	ResourceGroup string
	// Location is normalised as ARM writes it ("westeurope"); empty when
	// the step gives none.
	Location     string
	Parameters   map[string]any
	Prune        bool
	Endpoint     string
	Subscription string
	// Owner is the value of the ownership tag: the component.
	Owner string
}

var knownInputs = []string{"template", "resourceGroup", "location", "parameters", "prune", "endpoint", "subscriptionId"}

// isGroupName says whether s is what ARM accepts as a resource group name:
// 1 to 90 letters, digits, '_', '-', '.', '(' or ')', not ending with '.'.
// A function, not a regexp: compiling `[\p{L}\p{N}_\-.()]{1,90}` took
// 20 ms of every captf command's start, preview or not.
func isGroupName(s string) bool {
	n := 0
	for _, r := range s {
		if !unicode.IsLetter(r) && !unicode.IsNumber(r) && !strings.ContainsRune("_-.()", r) {
			return false
		}
		n++
	}
	return n >= 1 && n <= 90 && !strings.HasSuffix(s, ".")
}

// subscriptionID is a GUID, as ARM's subscription ids are.
var subscriptionID = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// parseInputs checks the step's inputs, falling back to the environment
// for the endpoint and the subscription. Errors name the input and what is
// wrong with it, never a parameter's value.
func parseInputs(component string, raw map[string]any) (inputs, error) {
	in := inputs{ResourceGroup: component, Owner: component, Parameters: map[string]any{}}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := raw[k]
		var err error
		switch k {
		case "template":
			in.Template, err = text(v)
		case "resourceGroup":
			in.ResourceGroup, err = text(v)
		case "location":
			in.Location, err = text(v)
			in.Location = normaliseLocation(in.Location)
		case "endpoint":
			in.Endpoint, err = text(v)
		case "subscriptionId":
			in.Subscription, err = text(v)
		case "prune":
			b, ok := v.(bool)
			if !ok {
				err = fmt.Errorf("must be true or false, not %s", kindOf(v))
			}
			in.Prune = b
		case "parameters":
			m, ok := v.(map[string]any)
			if !ok {
				err = fmt.Errorf("must be a map of parameter names to values, not %s", kindOf(v))
			}
			for name, pv := range m {
				in.Parameters[name] = plain(pv)
			}
		default:
			err = fmt.Errorf("unknown input (known: %s)", strings.Join(knownInputs, ", "))
		}
		if err != nil {
			return inputs{}, fmt.Errorf("input %s: %w", k, err)
		}
	}
	if in.Template == "" {
		return inputs{}, fmt.Errorf("input template: missing (an ARM JSON template, relative to the repository root)")
	}
	clean := filepath.ToSlash(filepath.Clean(filepath.FromSlash(in.Template)))
	if filepath.IsAbs(in.Template) || strings.HasPrefix(in.Template, "/") || clean == ".." || strings.HasPrefix(clean, "../") {
		return inputs{}, fmt.Errorf("input template: %q is not a path inside the repository", in.Template)
	}
	in.Template = clean
	if !isGroupName(in.ResourceGroup) {
		what := "input resourceGroup"
		if _, given := raw["resourceGroup"]; !given {
			what = "input resourceGroup: not set, and the component's name"
		}
		return inputs{}, fmt.Errorf("%s %q is not a resource group name (1 to 90 letters, digits, '_', '-', '.', '(' or ')', not ending with '.')", what, in.ResourceGroup)
	}
	if in.Endpoint == "" {
		in.Endpoint = os.Getenv(EndpointEnv)
	}
	if in.Endpoint == "" {
		in.Endpoint = DefaultEndpoint
	}
	u, err := url.Parse(in.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return inputs{}, fmt.Errorf("input endpoint (or %s): %q is not an http or https URL", EndpointEnv, in.Endpoint)
	}
	in.Endpoint = strings.TrimRight(in.Endpoint, "/")
	if in.Subscription == "" {
		in.Subscription = os.Getenv(SubscriptionEnv)
	}
	if in.Subscription == "" {
		return inputs{}, fmt.Errorf("input subscriptionId: not set, and %s is empty", SubscriptionEnv)
	}
	if !subscriptionID.MatchString(in.Subscription) {
		return inputs{}, fmt.Errorf("input subscriptionId (or %s): %q is not a subscription id (a GUID)", SubscriptionEnv, in.Subscription)
	}
	in.Subscription = strings.ToLower(in.Subscription)
	return in, nil
}

// plain turns an input value into the JSON values the template evaluator
// works on: an upstream output (raw JSON) decoded, numbers kept as written.
func plain(v any) any {
	switch x := v.(type) {
	case json.RawMessage:
		var out any
		dec := json.NewDecoder(strings.NewReader(string(x)))
		dec.UseNumber()
		if err := dec.Decode(&out); err != nil {
			return x
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = plain(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plain(e)
		}
		return out
	case int:
		return json.Number(fmt.Sprint(x))
	case int64:
		return json.Number(fmt.Sprint(x))
	case uint64:
		return json.Number(fmt.Sprint(x))
	default:
		return v
	}
}

func text(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("must be a string, not %s", kindOf(v))
	}
	return s, nil
}

// kindOf names the kind of a value of a template without its content.
func kindOf(v any) string {
	switch v.(type) {
	case unknownValue:
		return "a value known only after apply"
	case secretValue:
		return "a secure value"
	}
	return preview.KindOf(v)
}

// normaliseLocation writes a location as ARM returns it: "West Europe" is
// "westeurope".
func normaliseLocation(s string) string {
	return strings.ToLower(strings.ReplaceAll(s, " ", ""))
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
