package gcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/captf/captf/internal/preview/rest"
)

// apiError is an error answer: Google's {"error":{"code","message",
// "status"}}, or a gRPC gateway's {"code","message"}.
type apiError struct {
	HTTP    int
	Status  string
	Message string
}

func (e *apiError) Error() string {
	status := e.Status
	if status == "" {
		status = http.StatusText(e.HTTP)
	}
	if e.Message == "" {
		return fmt.Sprintf("HTTP %d %s", e.HTTP, status)
	}
	return fmt.Sprintf("HTTP %d %s: %s", e.HTTP, status, e.Message)
}

// client calls one endpoint, or each kind's Google host.
type client struct {
	http     *http.Client
	endpoint string
	token    string
	poll     time.Duration
}

// url is the URL of path for kind m.
func (c *client) url(m *mapping, path string) string {
	base := c.endpoint
	if base == "" {
		base = "https://" + m.Service
	}
	return base + "/" + path
}

// do sends one request and decodes the answer's JSON, numbers as written.
// An answer of 400 or more is an *apiError.
func (c *client) do(ctx context.Context, method string, m *mapping, path string, body any) (int, map[string]any, error) {
	status, answer, raw, err := rest.Do(ctx, c.http, method, c.url(m, path), c.token, body)
	if err != nil {
		return status, nil, err
	}
	if status >= 400 {
		return status, answer, c.apiError(status, answer, raw)
	}
	return status, answer, nil
}

func (c *client) apiError(status int, answer map[string]any, raw []byte) *apiError {
	ae := &apiError{HTTP: status}
	e, ok := answer["error"].(map[string]any)
	if !ok {
		e = answer
	}
	ae.Status, _ = e["status"].(string)
	ae.Message, _ = e["message"].(string)
	if answer == nil && len(raw) > 0 {
		ae.Message = rest.FirstLine(string(raw), 200)
	}
	if c.token != "" {
		ae.Message = strings.ReplaceAll(ae.Message, c.token, "(redacted)")
	}
	return ae
}

// get reads a resource: its body, or nil when the answer is 404. Any
// other answer but 200 is an error: it cannot say whether the resource is
// there.
func (c *client) get(ctx context.Context, m *mapping, path string) (map[string]any, error) {
	status, body, err := c.do(ctx, http.MethodGet, m, path, nil)
	if status == http.StatusNotFound {
		return nil, nil
	}
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("HTTP %d, neither 200 nor 404", status)
	}
	return body, err
}

// list reads every resource of a collection, page by page.
func (c *client) list(ctx context.Context, m *mapping, collection string) ([]map[string]any, error) {
	var out []map[string]any
	token := ""
	for page := 0; ; page++ {
		if page == 1000 {
			return nil, fmt.Errorf("more than 1000 pages")
		}
		path := collection
		if token != "" {
			sep := "?"
			if strings.Contains(path, "?") {
				sep = "&"
			}
			path += sep + "pageToken=" + token
		}
		_, answer, err := c.do(ctx, http.MethodGet, m, path, nil)
		if err != nil {
			return nil, err
		}
		items, _ := answer[m.ListKey].([]any)
		for _, it := range items {
			if r, ok := it.(map[string]any); ok {
				out = append(out, r)
			}
		}
		if token, _ = answer["nextPageToken"].(string); token == "" {
			return out, nil
		}
	}
}

// wait follows the long-running operation an answer of a write may be
// until it is done, and fails with its error. An answer that is the
// resource itself (Pub/Sub, Cloud Storage) is done.
func (c *client) wait(ctx context.Context, m *mapping, r *resource, answer map[string]any) error {
	for {
		if e, ok := answer["error"].(map[string]any); ok {
			return operationError(e)
		}
		name, _ := answer["name"].(string)
		switch {
		case answer["kind"] == "compute#operation":
			if answer["status"] == "DONE" {
				return nil
			}
			name = fill(m.Operation, r.Project, r.Location, name)
		case m.OperationVersion != "" && strings.Contains(name, "/operations/"):
			if answer["done"] == true {
				return nil
			}
			name = m.OperationVersion + "/" + name
		default:
			return nil
		}
		if err := c.sleep(ctx); err != nil {
			return err
		}
		_, next, err := c.do(ctx, http.MethodGet, m, name, nil)
		if err != nil {
			return fmt.Errorf("wait for the operation: %w", err)
		}
		answer = next
	}
}

// operationError is the error of a failed operation: google.rpc.Status,
// or Compute Engine's {"errors":[{code, message}]}.
func operationError(e map[string]any) error {
	if msg, ok := e["message"].(string); ok {
		return fmt.Errorf("the operation failed: %s", msg)
	}
	if list, ok := e["errors"].([]any); ok && len(list) > 0 {
		first, _ := list[0].(map[string]any)
		return fmt.Errorf("the operation failed: %v: %v", first["code"], first["message"])
	}
	return errors.New("the operation failed")
}

func (c *client) sleep(ctx context.Context) error {
	return rest.Sleep(ctx, c.poll)
}
