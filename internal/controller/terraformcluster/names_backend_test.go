package terraformcluster

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/render"
	"github.com/captf/captf/internal/testenv"
	"github.com/captf/captf/internal/tfexec"
	"github.com/captf/captf/internal/tftest"
)

// TestStateSuffixBackendAccepts runs the real terraform and tofu, with the
// kubernetes backend on a real API server, on the root module the manager
// renders for names that could not apply before: the backend takes each
// suffix, and the state is in the Secret the manager reads. The suffix such
// a name used to get is refused by terraform, which is why it had to
// change.
func TestStateSuffixBackendAccepts(t *testing.T) {
	bins := tftest.Binaries(t)
	env := testenv.Start(t, filepath.Join("..", "..", ".."))
	kubeconfig := env.Kubeconfig(t)
	module := t.TempDir()
	if err := os.WriteFile(filepath.Join(module, "main.tf"), []byte(`resource "terraform_data" "x" {}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	key := bytes.Repeat([]byte{3}, 32)

	// apply renders the root for suffix, then runs init and apply.
	// Each binary keeps its states in a namespace of its own.
	for _, tf := range bins {
		if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tf.Name}}); err != nil {
			t.Fatal(err)
		}
	}
	apply := func(t *testing.T, tf tftest.Binary, suffix string) (*render.Root, string, error) {
		root, err := render.Render(key, render.Request{StateSuffix: suffix, Namespace: tf.Name, Image: "example.test/m:1"})
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "main.tf.json"), root.MainTF, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "terraform.tfvars.json"), root.Vars, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(module, filepath.Join(dir, "module")); err != nil {
			t.Fatal(err)
		}
		// Two buffers: terraform's stdout and stderr are copied at once.
		var out, diags bytes.Buffer
		run := &tfexec.Terraform{Bin: tf.Path, Dir: dir, Stdout: &out, Stderr: &diags,
			Env: append(tftest.Env(t), "KUBE_CONFIG_PATH="+kubeconfig)}
		ctx := context.Background()
		if err = run.Init(ctx); err == nil {
			err = run.ApplyAuto(ctx)
		}
		return root, out.String() + diags.String(), err
	}

	t.Run("the suffix a name ending in -<digits> used to get", func(t *testing.T) {
		t.Parallel()
		_, log, err := apply(t, tftest.Terraform(t), "captf-tfc-prod-1")
		if err == nil || !strings.Contains(log, "secret_suffix must not end with '-<number>'") {
			t.Fatalf("terraform took captf-tfc-prod-1: %v\n%s", err, log)
		}
	})
	for _, name := range []string{"prod-1", strings.Repeat("a", 249) + "-253", "prod.eu-west-1.example.com"} {
		for _, tf := range bins {
			t.Run(tf.Name+"/"+name[:min(len(name), 30)], func(t *testing.T) {
				t.Parallel()
				suffix := engine.StateSuffix("tfc", name)
				root, log, err := apply(t, tf, suffix)
				if err != nil {
					t.Fatalf("suffix %q: %v\n%s", suffix, err, log)
				}
				ctx := context.Background()
				var state corev1.Secret
				if err := env.Client.Get(ctx, client.ObjectKey{Namespace: tf.Name, Name: engine.StateSecretName("tfc", name)}, &state); err != nil {
					t.Fatalf("state Secret %s: %v", engine.StateSecretName("tfc", name), err)
				}
				if got, err := render.StateInputsHash(state.Data["tfstate"]); err != nil || got != root.InputsHash {
					t.Errorf("state of %q records %q (%v), want %q", suffix, got, err, root.InputsHash)
				}
				if got := state.Labels["tfstateSecretSuffix"]; got != suffix {
					t.Errorf("state Secret labelled tfstateSecretSuffix=%q, want %q", got, suffix)
				}
				var lease coordinationv1.Lease
				if err := env.Client.Get(ctx, client.ObjectKey{Namespace: tf.Name, Name: "lock-" + engine.StateSecretName("tfc", name)}, &lease); err != nil {
					t.Errorf("lock Lease: %v", err)
				}
			})
		}
	}
}
