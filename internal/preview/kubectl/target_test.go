package kubectl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConnectErrors needs no server: connect only loads the kubeconfig.
func TestConnectErrors(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	root := t.TempDir()
	kc := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"https://127.0.0.1:1\"}\nusers:\n- name: u\n  user: {token: not-a-real-token}\ncontexts:\n- name: one\n  context: {cluster: c, user: u, namespace: team}\ncurrent-context: one\n"
	if err := os.WriteFile(filepath.Join(root, "kc"), []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	none := func(s string) string { return s }
	cases := []struct {
		reason string
		cfg    config
		want   string
	}{
		{"no kubeconfig anywhere, not in a cluster", config{}, "kubeconfig: invalid configuration: no configuration has been provided"},
		{"a kubeconfig input that is not there", config{Kubeconfig: "missing"}, "kubeconfig: stat " + filepath.Join(root, "missing")},
		{"a context that is not there", config{Kubeconfig: "kc", Context: "two"}, `kubeconfig: no context "two"`},
	}
	for _, tc := range cases {
		_, err := connect(root, tc.cfg, none)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error starting with %q", tc.reason, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "not-a-real-token") {
			t.Errorf("%s: the error holds the token: %v", tc.reason, err)
		}
	}
	tg, err := connect(root, config{Kubeconfig: "kc"}, none)
	if err != nil {
		t.Fatal(err)
	}
	if tg.Server != "https://127.0.0.1:1" || tg.Context != "one" || tg.Namespace != "team" {
		t.Errorf("target: server %s, context %s, namespace %s", tg.Server, tg.Context, tg.Namespace)
	}
}
