package sandbox

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/captf/captf/internal/image"
	"github.com/captf/captf/internal/realnode"
	"github.com/captf/captf/internal/testenv"
)

// What Sandbox.Node says.
const (
	NodeReal    = "a real node (kubelet, containerd, runc) that runs the runner Jobs as pods"
	NodeStandIn = "a local node that runs the runner Jobs as processes (the stand-in, internal/testnode)"
)

// startReal starts the sandbox on a real node: the runner image and the
// example's module image are built by the release's image code and pushed
// to the node's registry, and the example's TerraformCluster names the
// module image there.
func (s *Sandbox) startReal(ctx context.Context, cfg Config, logf func(string, ...any)) error {
	manager := filepath.Join(s.Dir, "manager", "manager")
	plugin := filepath.Join(s.Bin, "kubectl-captf")
	if err := build(ctx, cfg.Root, map[string]string{manager: "./cmd/manager", plugin: "./cmd/kubectl-captf"}); err != nil {
		return err
	}
	node, stopNode, err := realnode.Run(realnode.Options{Root: cfg.Root, CRDs: []string{cfg.ClusterAPICRDs}, Logf: logf})
	if err != nil {
		return err
	}
	s.stops = append(s.stops, stopNode)
	webhook := &envtest.WebhookInstallOptions{Paths: []string{filepath.Join(cfg.Root, "config", "webhook")}}
	if err := webhook.Install(node.Config); err != nil {
		return fmt.Errorf("install the webhook configurations: %w", err)
	}
	s.stops = append(s.stops, webhook.Cleanup)
	if err := node.WriteKubeconfig(s.Kubeconfig, Admin, "system:masters"); err != nil {
		return err
	}
	managerKubeconfig := filepath.Join(s.Dir, "manager.kubeconfig")
	if err := node.WriteKubeconfig(managerKubeconfig, ManagerUsername, "system:masters"); err != nil {
		return err
	}
	if err := node.GrantState(ctx, Namespace); err != nil {
		return err
	}

	runner, err := image.Runner.Index(ctx, image.Options{
		Module: cfg.Root, Version: "sandbox", Platforms: []v1.Platform{realnode.HostPlatform},
		Created: time.Unix(0, 0).UTC(), Work: filepath.Join(s.Dir, "runner"),
	})
	if err != nil {
		return err
	}
	runnerRef, _, err := node.Push(ctx, "captf/captf-runner:sandbox", runner)
	if err != nil {
		return err
	}
	module, err := filepath.Abs(filepath.Join(cfg.Root, Example, "module"))
	if err != nil {
		return err
	}
	terraform, err := filepath.Abs(cfg.Terraform)
	if err != nil {
		return err
	}
	idx, err := realnode.ModuleImage(module, terraform)
	if err != nil {
		return err
	}
	moduleRef, _, err := node.Push(ctx, "captf-sandbox/module:v1", idx)
	if err != nil {
		return err
	}

	stopManager, err := s.startManager(ctx, manager, managerKubeconfig, runnerRef, webhook)
	if stopManager != nil {
		s.stops = append(s.stops, stopManager)
	}
	if err != nil {
		return err
	}
	objs, err := testenv.ReadObjects(filepath.Join(cfg.Root, Example, "cluster.yaml"))
	if err != nil {
		return err
	}
	for _, u := range objs {
		if u.GetKind() == "TerraformCluster" {
			if err := unstructured.SetNestedField(u.Object, moduleRef, "spec", "image"); err != nil {
				return err
			}
		}
		if err := node.Client.Create(ctx, u); err != nil {
			return fmt.Errorf("%s: create %s %s: %w", Example, u.GetKind(), u.GetName(), err)
		}
	}
	s.Objects = objs
	return nil
}
