package realnode

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/captf/captf/internal/testenv"
)

// assets are the folders of the node's binaries.
type assets struct {
	// envtest holds etcd and kube-apiserver (hack/install-envtest.sh).
	envtest string
	// node holds the kubelet, kube-controller-manager, kube-scheduler,
	// containerd, its shim, runc and the CNI loopback plugin
	// (hack/install-kubenode.sh).
	node string
}

// EnvAssets names the folder hack/install-kubenode.sh prints.
const EnvAssets = "CAPTF_KUBENODE"

// Binaries of $CAPTF_KUBENODE the node runs.
var nodeBinaries = []string{"kubelet", "kube-controller-manager", "kube-scheduler", "containerd", "containerd-shim-runc-v2", "ctr", "runc", "loopback"}

// hostTools are what the node runs of the host: the CNI plugin of this
// package is a shell script.
var hostTools = []string{"sh"}

// Preflight checks what a node needs of this machine and returns where its
// binaries are, or the first thing missing and how to get it.
func Preflight() (assets, error) {
	if runtime.GOOS != "linux" {
		return assets{}, fmt.Errorf("realnode: a node needs Linux, this is %s", runtime.GOOS)
	}
	if os.Geteuid() != 0 {
		return assets{}, fmt.Errorf("realnode: a node runs as root (containerd, the kubelet, mounts, cgroups); this is uid %d", os.Geteuid())
	}
	if !exists("/sys/fs/cgroup/memory") && !exists("/sys/fs/cgroup/cgroup.controllers") {
		return assets{}, errors.New("realnode: no cgroup filesystem under /sys/fs/cgroup (neither v1's memory controller nor v2)")
	}
	envtestDir, err := testenv.FindAssets()
	if err != nil {
		return assets{}, fmt.Errorf("realnode: %w", err)
	}
	dir := os.Getenv(EnvAssets)
	if dir == "" {
		return assets{}, fmt.Errorf("realnode: $%s is not set: run hack/install-kubenode.sh (make test does) and set it to the folder it prints", EnvAssets)
	}
	for _, b := range nodeBinaries {
		if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.Mode()&0o111 == 0 {
			return assets{}, fmt.Errorf("realnode: no executable %s in $%s (%s): run hack/install-kubenode.sh", b, EnvAssets, dir)
		}
	}
	for _, tool := range hostTools {
		if _, err := exec.LookPath(tool); err != nil {
			return assets{}, fmt.Errorf("realnode: the host has no %s: %w", tool, err)
		}
	}
	return assets{envtest: envtestDir, node: dir}, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// lockFile is the machine-wide lock of the node's host-global parts (the
// kubepods cgroups): a fixed path, whatever a process's TMPDIR.
const lockFile = "/tmp/captf-realnode.lock"

// lockHost takes the machine's node lock, waiting up to 20 minutes for a
// node of another process to go.
func lockHost(logf func(string, ...any)) (*os.File, error) {
	f, err := os.OpenFile(lockFile, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("realnode: lock: %w", err)
	}
	deadline := time.Now().Add(20 * time.Minute)
	for waited := false; ; waited = true {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !waited {
			logf("realnode: another node runs on this machine (%s): waiting for it to go", lockFile)
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("realnode: another node holds %s: %w", lockFile, err)
		}
		time.Sleep(time.Second)
	}
}
