// Package images runs captf's images the way a cluster would, as far as a
// machine with no container engine can: the manager image, the runner
// image and a module image (one module and terraform, as the runner Job
// expects), built by internal/image, pushed to a registry served in the
// test, pulled back by reference for this platform and unpacked. The
// manager binary from its image reconciles a TerraformCluster on a real
// API server; the test node runs its Jobs from the unpacked runner and
// module images: the init container's captf-runner install, then the
// runner running the image's terraform on the image's module.
//
// What is not tested here: a real kubelet and container runtime pulling
// and starting the images (user, read-only root filesystem, mounts).
package images

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/image"
	"github.com/captf/captf/internal/managertest"
	"github.com/captf/captf/internal/testenv"
	"github.com/captf/captf/internal/testnode"
	"github.com/captf/captf/internal/tftest"
)

var host = v1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}

// moduleImage assembles a module image as examples/kubernetes/Dockerfile
// does: the base files (CA certificates, the non-root user), the module at
// /captf/module and terraform at /captf/runtime/terraform, run as the
// non-root user.
func moduleImage(t *testing.T, module, terraform string, created time.Time) v1.ImageIndex {
	t.Helper()
	base, err := image.Layer(image.Base(), created)
	if err != nil {
		t.Fatal(err)
	}
	files, err := image.Tree(module, infrav1.PathModule)
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, image.File{Path: infrav1.PathRuntime + "/terraform", Mode: 0o755, Source: terraform})
	layer, err := image.Layer(files, created)
	if err != nil {
		t.Fatal(err)
	}
	img, err := image.Build(image.Spec{Platform: host, Created: created, Layers: []v1.Layer{base, layer}, User: image.User, WorkingDir: "/"})
	if err != nil {
		t.Fatal(err)
	}
	idx, err := image.Index(img)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// pull pulls ref for this platform, as a kubelet would, and unpacks it.
func pull(t *testing.T, ref string) string {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(r, remote.WithPlatform(host))
	if err != nil {
		t.Fatalf("pull %s: %v", ref, err)
	}
	dir := t.TempDir()
	if err := image.Unpack(img, dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestImagesRunACluster(t *testing.T) {
	ctx := context.Background()
	created := time.Unix(0, 0).UTC()
	const ver = "v0.0.0-images-test"
	opts := image.Options{Module: "../..", Version: ver, Platforms: []v1.Platform{host}, Created: created}

	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	reg := strings.TrimPrefix(srv.URL, "http://")
	refs := map[string]string{
		"manager": reg + "/captf/captf-manager:" + ver,
		"runner":  reg + "/captf/captf-runner:" + ver,
		"module":  reg + "/modules/demo:1.0.0",
	}
	for what, p := range map[string]image.Program{"manager": image.Manager, "runner": image.Runner} {
		opts.Work = t.TempDir()
		idx, err := p.Index(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := image.Push(ctx, refs[what], idx); err != nil {
			t.Fatal(err)
		}
	}
	module, err := filepath.Abs("../../examples/kubernetes/module")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := image.Push(ctx, refs["module"], moduleImage(t, module, tftest.Terraform(t).Path, created)); err != nil {
		t.Fatal(err)
	}

	managerDir, runnerDir, moduleDir := pull(t, refs["manager"]), pull(t, refs["runner"]), pull(t, refs["module"])
	env := testenv.Start(t, "../..")
	node := &testnode.Node{Client: env.Client, Namespace: "default",
		Images: map[string][]testnode.Image{
			refs["module"]: {
				{Path: infrav1.PathModule, Dir: filepath.Join(moduleDir, infrav1.PathModule)},
				{Path: infrav1.PathRuntime, Dir: filepath.Join(moduleDir, infrav1.PathRuntime)},
			},
			refs["runner"]: {{Path: filepath.Dir(engine.RunnerImagePath), Dir: filepath.Join(runnerDir, filepath.Dir(engine.RunnerImagePath))}},
		},
		// The manager's Jobs ask for the in-cluster config, which a local
		// process has not.
		Env: append([]string{"KUBE_CONFIG_PATH=" + env.Kubeconfig(t), "KUBE_IN_CLUSTER_CONFIG=false"}, tftest.Env(t)...),
	}
	node.Start(t)
	m := managertest.Start(t, filepath.Join(managerDir, image.Manager.Path), env.Kubeconfig(t),
		"--runner-image="+refs["runner"], "--metrics-bind-address=0", "--health-probe-bind-address=0", "--retry-base=1s")

	tc := &infrav1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "default"},
		Spec: infrav1.TerraformClusterSpec{RunnerSpec: infrav1.RunnerSpec{
			Image: refs["module"], ApplyPolicy: infrav1.ApplyAutomatic,
			Variables: []infrav1.Variable{
				{Name: "environment", Value: &apiextensionsv1.JSON{Raw: []byte(`"e2e"`)}},
				{Name: "replicas", Value: &apiextensionsv1.JSON{Raw: []byte(`2`)}},
				{Name: "api_token", Value: &apiextensionsv1.JSON{Raw: []byte(`"not-a-real-token"`)}},
			},
		}},
	}
	if err := env.Client.Create(ctx, tc); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for !tc.Status.Ready {
		if time.Now().After(deadline) {
			b, _ := json.MarshalIndent(tc.Status, "", "  ")
			t.Fatalf("not ready within 3 minutes; status:\n%s\nmanager log: %s", b, m.LogPath)
		}
		time.Sleep(500 * time.Millisecond)
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(tc), tc); err != nil {
			t.Fatal(err)
		}
	}
	if tc.Status.LastRun == nil || !tc.Status.LastRun.Succeeded {
		t.Errorf("last run %+v", tc.Status.LastRun)
	}
	// The endpoint comes from the module's outputs: terraform of the module
	// image ran the module of the module image with the object's variable.
	if want := (infrav1.APIEndpoint{Host: "api.e2e.example.com", Port: 6443}); tc.Spec.ControlPlaneEndpoint != want {
		t.Errorf("controlPlaneEndpoint %+v, want %+v", tc.Spec.ControlPlaneEndpoint, want)
	}
}
