package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
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
		{"not a duration", []string{"--recheck-interval=often"}, `invalid value "often" for flag -recheck-interval: parse error`},
	}
	for _, tt := range tests {
		t.Run(tt.reason, func(t *testing.T) {
			args := tt.args
			if tt.want != "--runner-image is required" {
				args = append([]string{"--runner-image=example.test/runner:1"}, args...)
			}
			err := run(args)
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
