// Command captf-sandbox runs captf's Kubernetes flow on this machine, with
// no cluster (see internal/sandbox): a real kube-apiserver and etcd, captf's
// CRDs and webhook, the manager binary and a node for the runner Jobs, with
// examples/kubernetes applied. The node is a real one (kubelet, containerd,
// runc) where the machine allows it (root, Linux, $CAPTF_KUBENODE), else
// the local stand-in; it says which, and why. It prints the KUBECONFIG to use and the next
// commands, and runs until Ctrl-C, which stops all of it and removes what it
// made. make sandbox installs what it needs first.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/captf/captf/internal/realnode"
	"github.com/captf/captf/internal/sandbox"
)

func main() {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "captf-sandbox: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("captf-sandbox", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", ".", "the repository root (config/, cmd/, examples/kubernetes)")
	terraform := fs.String("terraform", defaultTerraform(), "the terraform or tofu binary of the example's module image: $CAPTF_TERRAFORM, else terraform or tofu on PATH")
	capi := fs.String("capi-crds", os.Getenv("CAPTF_CAPI_CRDS"), "the folder of Cluster API's CRDs, as hack/install-capi-crds.sh prints it: $CAPTF_CAPI_CRDS")
	nodeFlag := fs.String("node", "auto", "what runs the Jobs: real (kubelet, containerd, runc: root, Linux, $CAPTF_KUBENODE from hack/install-kubenode.sh), stand-in (local processes), or auto (real where the machine allows it)")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return nil
	} else if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	// envtest and the clients log through controller-runtime; what the
	// sandbox has to say it prints itself.
	ctrllog.SetLogger(logr.Discard())

	real := false
	switch *nodeFlag {
	case "real":
		real = true
	case "stand-in":
	case "auto":
		if _, err := realnode.Preflight(); err != nil {
			fmt.Fprintf(stderr, "captf-sandbox: no real node here (%v): the Jobs run on the local stand-in\n", err)
		} else {
			real = true
		}
	default:
		return fmt.Errorf("--node %q: want real, stand-in or auto", *nodeFlag)
	}
	which := "the local stand-in node"
	if real {
		which = "a real node (kubelet, containerd, runc)"
	}
	fmt.Fprintf(stderr, "captf-sandbox: starting on %s: go build of the manager and the runner, then the control plane…\n", which)
	s, err := sandbox.Start(ctx, sandbox.Config{Root: *root, Terraform: *terraform, ClusterAPICRDs: *capi, Log: stderr, RealNode: real})
	if errors.Is(err, context.Canceled) {
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "KUBECONFIG=%s\n\n%s", s.Kubeconfig, s.Guide())
	<-ctx.Done()
	fmt.Fprintln(stderr, "captf-sandbox: stopping")
	if err := s.Stop(); err != nil {
		return err
	}
	fmt.Fprintln(stderr, "captf-sandbox: stopped; removed", s.Dir)
	return nil
}

func defaultTerraform() string {
	if p := os.Getenv("CAPTF_TERRAFORM"); p != "" {
		return p
	}
	for _, name := range []string{"terraform", "tofu"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}
