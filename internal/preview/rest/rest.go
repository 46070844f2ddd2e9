// Package rest sends the JSON requests of the capabilities that speak to
// a cloud's REST API themselves (arm-deploy, gcp-apply): one request, its
// answer decoded with numbers as written, the body bounded.
package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// MaxAnswer bounds an answer read.
const MaxAnswer = 32 << 20

// Do sends method to url with body as JSON (none when nil) and the token
// as a bearer token (none when empty). It returns the status, the
// answer's JSON object (nil when the answer is empty or, for a status of
// 400 or more, not an object) and the raw answer. An answer under 400 that
// is not a JSON object is an error. An error names the URL, never a
// header or a body.
func Do(ctx context.Context, hc *http.Client, method, url, token string, body any) (int, map[string]any, []byte, error) {
	var reader io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, nil, fmt.Errorf("encode the body: %w", err)
		}
		reader = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, reader)
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswer))
	if err != nil {
		return resp.StatusCode, nil, nil, fmt.Errorf("read the answer: %w", err)
	}
	var answer map[string]any
	if len(bytes.TrimSpace(raw)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&answer); err != nil && resp.StatusCode < 400 {
			return resp.StatusCode, nil, raw, fmt.Errorf("HTTP %d: the answer is not a JSON object", resp.StatusCode)
		}
	}
	return resp.StatusCode, answer, raw, nil
}

// FirstLine is the first line of s, cut to n bytes, for an error answer
// that is not JSON.
func FirstLine(s string, n int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

// Sleep waits d, or until ctx is done.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
