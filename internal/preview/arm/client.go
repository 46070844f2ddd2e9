package arm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/captf/captf/internal/preview/rest"
)

// API versions of the calls that are not a template resource's.
const (
	groupAPIVersion    = "2021-04-01"
	listAPIVersion     = "2021-04-01"
	providerAPIVersion = "2021-04-01"
)

// notFoundCodes are the codes of a 404 that says the resource (or its
// group) is not there. A 404 with another code (InvalidResourceType: the
// type or api-version is wrong) says nothing about the resource.
var notFoundCodes = []string{"ResourceNotFound", "ResourceGroupNotFound", "NotFound", ""}

// apiError is an error answer of ARM: {"error":{"code":…,"message":…}}.
// Its message is redacted when it is made.
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string {
	code := e.Code
	if code == "" {
		code = http.StatusText(e.Status)
	}
	if e.Message == "" {
		return fmt.Sprintf("HTTP %d %s", e.Status, code)
	}
	return fmt.Sprintf("HTTP %d %s: %s", e.Status, code, e.Message)
}

// notFound says err is a 404 about the resource itself.
func notFound(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound && slices.Contains(notFoundCodes, ae.Code)
}

// client calls one ARM endpoint.
type client struct {
	http     *http.Client
	endpoint *url.URL
	token    string
	redact   *redactor
	// poll is the wait between two reads of a resource being provisioned
	// or deleted.
	poll time.Duration
}

// url makes the URL of a resource id (each segment escaped) or takes a
// nextLink, which must be on the endpoint's host: the token goes nowhere
// else.
func (c *client) url(idOrLink, apiVersion string) (string, error) {
	if strings.HasPrefix(idOrLink, "http://") || strings.HasPrefix(idOrLink, "https://") {
		u, err := url.Parse(idOrLink)
		if err != nil || u.Host != c.endpoint.Host || u.Scheme != c.endpoint.Scheme {
			return "", fmt.Errorf("ARM answered a next page on another host than the endpoint; captf does not follow it")
		}
		return idOrLink, nil
	}
	segs := strings.Split(strings.TrimPrefix(idOrLink, "/"), "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return strings.TrimRight(c.endpoint.String(), "/") + "/" + strings.Join(segs, "/") + "?api-version=" + url.QueryEscape(apiVersion), nil
}

// do sends one request and decodes the answer's JSON, numbers as written.
// An answer of 400 or more is an *apiError.
func (c *client) do(ctx context.Context, method, idOrLink, apiVersion string, body any) (int, map[string]any, error) {
	u, err := c.url(idOrLink, apiVersion)
	if err != nil {
		return 0, nil, err
	}
	status, answer, raw, err := rest.Do(ctx, c.http, method, u, c.token, body)
	if err != nil {
		return status, nil, err
	}
	if status >= 400 {
		ae := &apiError{Status: status}
		if e, ok := answer["error"].(map[string]any); ok {
			ae.Code, _ = e["code"].(string)
			msg, _ := e["message"].(string)
			ae.Message = c.redact.text(msg)
		} else if answer == nil && len(raw) > 0 {
			ae.Message = c.redact.text(rest.FirstLine(string(raw), 200))
		}
		return status, answer, ae
	}
	return status, answer, nil
}

// get reads a resource (or a group); nil and no error when it is not
// there.
func (c *client) get(ctx context.Context, id, apiVersion string) (map[string]any, error) {
	_, body, err := c.do(ctx, http.MethodGet, id, apiVersion, nil)
	if notFound(err) {
		return nil, nil
	}
	return body, err
}

// provisioningState is the state a resource's answer gives; empty when it
// gives none.
func provisioningState(body map[string]any) string {
	if props, ok := body["properties"].(map[string]any); ok {
		if s, ok := props["provisioningState"].(string); ok {
			return s
		}
	}
	if s, ok := body["provisioningState"].(string); ok {
		return s
	}
	return ""
}

func terminal(state string) bool {
	return state == "" || strings.EqualFold(state, "Succeeded") || strings.EqualFold(state, "Failed") || strings.EqualFold(state, "Canceled")
}

// put PUTs a resource and waits until ARM says it is provisioned: an answer
// of 202, or one whose provisioningState is not terminal, is followed by
// GETs until it is.
func (c *client) put(ctx context.Context, id, apiVersion string, body map[string]any) error {
	status, answer, err := c.do(ctx, http.MethodPut, id, apiVersion, body)
	if err != nil {
		return err
	}
	state := provisioningState(answer)
	for status == http.StatusAccepted || !terminal(state) {
		if err := c.sleep(ctx); err != nil {
			return err
		}
		got, err := c.get(ctx, id, apiVersion)
		if err != nil {
			return fmt.Errorf("wait for provisioning: %w", err)
		}
		if got == nil {
			return fmt.Errorf("wait for provisioning: the resource is not there any more")
		}
		status, state = http.StatusOK, provisioningState(got)
		if state == "" {
			// A 202 whose resource gives no state: it is there.
			state = "Succeeded"
		}
	}
	if !strings.EqualFold(state, "Succeeded") && state != "" {
		return fmt.Errorf("provisioning ended %s", state)
	}
	return nil
}

// delete DELETEs a resource and, on 202, waits until a GET no longer
// finds it.
func (c *client) delete(ctx context.Context, id, apiVersion string) error {
	status, _, err := c.do(ctx, http.MethodDelete, id, apiVersion, nil)
	if notFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for status == http.StatusAccepted {
		if err := c.sleep(ctx); err != nil {
			return err
		}
		got, err := c.get(ctx, id, apiVersion)
		if err != nil {
			return fmt.Errorf("wait for the delete: %w", err)
		}
		if got == nil {
			return nil
		}
		if strings.EqualFold(provisioningState(got), "Failed") {
			return fmt.Errorf("the delete failed: the resource is Failed")
		}
	}
	return nil
}

func (c *client) sleep(ctx context.Context) error {
	return rest.Sleep(ctx, c.poll)
}

// listed is a resource the group's list returned.
type listed struct {
	ID   string
	Type string
	Tags map[string]any
}

// list reads every resource ARM lists in a group, page by page.
func (c *client) list(ctx context.Context, groupID string) ([]listed, error) {
	var out []listed
	next := groupID + "/resources"
	for page := 0; next != ""; page++ {
		if page == 1000 {
			return nil, fmt.Errorf("more than 1000 pages")
		}
		_, answer, err := c.do(ctx, http.MethodGet, next, listAPIVersion, nil)
		if err != nil {
			return nil, err
		}
		items, _ := answer["value"].([]any)
		for _, it := range items {
			m, ok := it.(map[string]any)
			if !ok {
				continue
			}
			id, _ := m["id"].(string)
			typ, _ := m["type"].(string)
			tags, _ := m["tags"].(map[string]any)
			if id != "" {
				out = append(out, listed{ID: id, Type: typ, Tags: tags})
			}
		}
		next, _ = answer["nextLink"].(string)
	}
	return out, nil
}

// apiVersionOf asks ARM which api-versions a type is served at
// (GET /subscriptions/{sub}/providers/{namespace}) and returns the latest
// that is not a preview, else the latest.
func (c *client) apiVersionOf(ctx context.Context, subscription, resourceType string) (string, error) {
	ns, rest, ok := strings.Cut(resourceType, "/")
	if !ok {
		return "", fmt.Errorf("%s is not Namespace/type", resourceType)
	}
	_, answer, err := c.do(ctx, http.MethodGet, "/subscriptions/"+subscription+"/providers/"+ns, providerAPIVersion, nil)
	if err != nil {
		return "", err
	}
	types, _ := answer["resourceTypes"].([]any)
	for _, t := range types {
		m, _ := t.(map[string]any)
		if name, _ := m["resourceType"].(string); !strings.EqualFold(name, rest) {
			continue
		}
		var versions []string
		list, _ := m["apiVersions"].([]any)
		for _, v := range list {
			if s, ok := v.(string); ok {
				versions = append(versions, s)
			}
		}
		sort.Sort(sort.Reverse(sort.StringSlice(versions)))
		for _, v := range versions {
			if !strings.Contains(v, "preview") {
				return v, nil
			}
		}
		if len(versions) > 0 {
			return versions[0], nil
		}
	}
	return "", fmt.Errorf("provider %s serves no type %s", ns, rest)
}

// redactor removes secure values from texts ARM sends back (an error may
// quote a property's value).
type redactor struct {
	values []string
}

// minRedacted is the shortest value removed from texts: shorter ones would
// garble every message and say little.
const minRedacted = 4

func (r *redactor) add(v any) {
	switch x := v.(type) {
	case string:
		if len(x) < minRedacted || slices.Contains(r.values, x) {
			return
		}
		r.values = append(r.values, x)
		// An error may quote the value as JSON.
		if q, err := json.Marshal(x); err == nil {
			if inner := string(q[1 : len(q)-1]); inner != x {
				r.values = append(r.values, inner)
			}
		}
		// Longest first, so a value inside another is not left half-removed.
		sort.Slice(r.values, func(i, j int) bool { return len(r.values[i]) > len(r.values[j]) })
	case json.Number:
		r.add(x.String())
	case secretValue:
		r.add(x.V)
	case map[string]any:
		for _, e := range x {
			r.add(e)
		}
	case []any:
		for _, e := range x {
			r.add(e)
		}
	}
}

func (r *redactor) text(s string) string {
	for _, v := range r.values {
		s = strings.ReplaceAll(s, v, "(redacted)")
	}
	return s
}
