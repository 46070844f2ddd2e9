package main

import (
	"bytes"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/captf/captf/internal/version"
)

// TestFlagsRefused: a bad flag value is refused with the flag's name and
// what is wrong, before the manager reaches for an API server.
func TestFlagsRefused(t *testing.T) {
	t.Setenv("KUBECONFIG", "/nonexistent/kubeconfig")
	tests := []struct {
		reason string
		args   []string
		want   string
	}{
		{"no runner image", nil, "--runner-image is required"},
		{"a re-check of zero", []string{"--recheck-interval=0s"}, "--recheck-interval must be positive, not 0s"},
		{"a negative re-check", []string{"--recheck-interval=-1m"}, "--recheck-interval must be positive, not -1m0s"},
		{"qps 0 would be client-go's 5", []string{"--kube-api-qps=0"}, "--kube-api-qps must not be 0: a positive value limits requests, a negative one turns the limit off"},
		{"a limit without a burst", []string{"--kube-api-qps=10", "--kube-api-burst=0"}, "--kube-api-burst must be at least 1 while --kube-api-qps limits requests, not 0"},
		{"no workers", []string{"--max-concurrent-reconciles=0"}, "--max-concurrent-reconciles must be at least 1, not 0"},
		{"not a namespace", []string{"--namespace=Team_A"}, `invalid value "Team_A" for flag -namespace: "Team_A" is not a namespace name: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
		{"not a label value", []string{"--watch-filter=team a"}, `--watch-filter "team a" is not a label value: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`},
		{"not a duration", []string{"--recheck-interval=often"}, `invalid value "often" for flag -recheck-interval: parse error`},
	}
	for _, tt := range tests {
		t.Run(tt.reason, func(t *testing.T) {
			args := tt.args
			if tt.want != "--runner-image is required" {
				args = append([]string{"--runner-image=example.test/runner:1"}, args...)
			}
			err := run(args, io.Discard)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("run(%q) error (-want +got):\n%s", args, diff)
			}
		})
	}
}

// TestOneRateLimit: every client made from the manager's config draws on
// the one bucket, so the flag limits the manager, not each resource.
func TestOneRateLimit(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	limit(cfg, 50, 100)
	if cfg.RateLimiter == nil || cfg.RateLimiter.QPS() != 50 {
		t.Fatalf("rate limiter %v, want one of 50 requests a second", cfg.RateLimiter)
	}
	jobs, err := rest.RESTClientFor(withGroup(cfg, "batch", "v1"))
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := rest.RESTClientFor(withGroup(cfg, "", "v1"))
	if err != nil {
		t.Fatal(err)
	}
	if jobs.GetRateLimiter() != cfg.RateLimiter || secrets.GetRateLimiter() != cfg.RateLimiter {
		t.Error("the clients of two resources have buckets of their own")
	}
	// The burst is spent by any client: the next token waits for the rate.
	for range 100 {
		if !secrets.GetRateLimiter().TryAccept() {
			t.Fatal("fewer than 100 requests in the burst")
		}
	}
	if jobs.GetRateLimiter().TryAccept() {
		t.Error("another resource's client still had a token after the burst was spent")
	}

	limit(cfg, -1, 100)
	if cfg.RateLimiter != nil || cfg.QPS != -1 {
		t.Errorf("negative qps: rate limiter %v, QPS %v; want none and -1", cfg.RateLimiter, cfg.QPS)
	}
}

func withGroup(cfg *rest.Config, group, version string) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &schema.GroupVersion{Group: group, Version: version}
	c.APIPath = "/apis"
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return c
}

// TestVersion: --version prints the stamped version and needs neither
// --runner-image nor an API server.
func TestVersion(t *testing.T) {
	defer func(s string) { version.Stamp = s }(version.Stamp)
	version.Stamp = "v0.7.1"
	t.Setenv("KUBECONFIG", "/nonexistent/kubeconfig")
	var out bytes.Buffer
	if err := run([]string{"--version"}, &out); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("manager version v0.7.1\n", out.String()); diff != "" {
		t.Errorf("--version (-want +got):\n%s", diff)
	}
}
