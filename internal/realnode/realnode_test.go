package realnode

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A missing binary of the node fails with its name and how to install
// it, before anything starts.
func TestPreflightNamesWhatIsMissing(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the real node needs root: run the tests as root (CI does)")
	}
	dir := t.TempDir()
	t.Setenv(EnvAssets, dir)
	for _, b := range nodeBinaries[:3] {
		if err := os.WriteFile(filepath.Join(dir, b), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Preflight()
	if err == nil || !strings.Contains(err.Error(), "no executable containerd in $CAPTF_KUBENODE") || !strings.Contains(err.Error(), "hack/install-kubenode.sh") {
		t.Errorf("Preflight with no containerd: %v", err)
	}
	t.Setenv(EnvAssets, "")
	if _, err := Preflight(); err == nil || !strings.Contains(err.Error(), "$CAPTF_KUBENODE is not set") {
		t.Errorf("Preflight with no $CAPTF_KUBENODE: %v", err)
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/tmp/a`:             `/tmp/a`,
		`/tmp/with\040space`: `/tmp/with space`,
		`/tmp/tab\011x`:      "/tmp/tab\tx",
		`/tmp/trailing\04`:   `/tmp/trailing\04`,
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

// A node's teardown leaves nothing: no process of its own or of its
// containers, no kubepods cgroup, no mount under its folder, no folder.
func TestStopLeavesNothing(t *testing.T) {
	ctx := context.Background()
	n, stop, err := Run(Options{Root: "../..", Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = stop()
		}
	}()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "sleeper", Namespace: "default"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "sleeper", Image: n.PauseImage}},
			// Seconds for the kubelet to stop it: the teardown must not wait.
			TerminationGracePeriodSeconds: ptr.To(int64(600)),
		},
	}
	if err := n.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := n.waitFor(ctx, "the pod running", 2*time.Minute, func() bool {
		return n.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod) == nil && pod.Status.Phase == corev1.PodRunning
	}); err != nil {
		t.Fatal(err)
	}
	if len(cgroupDirs()) == 0 {
		t.Fatal("a pod runs and no kubepods cgroup exists: the checks below prove nothing")
	}
	var pids []int
	for _, p := range n.procs {
		pids = append(pids, p.cmd.Process.Pid)
	}
	dir := n.Dir
	stopped = true
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if dirs := cgroupDirs(); len(dirs) > 0 {
		t.Errorf("kubepods cgroups left: %v", dirs)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("process %d of the node still runs", pid)
		}
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && strings.Contains(string(cmdline), dir) {
			t.Errorf("process %s still names the node's folder: %q", e.Name(), strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mounts), dir) {
		t.Errorf("mounts left under %s", dir)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the node's folder %s is still there: %v", dir, err)
	}
}
