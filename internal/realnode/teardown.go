package realnode

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// stop tears the node down: the kubelet first (so that it restarts
// nothing), then every container process (found in the kubepods cgroups),
// the shims of this containerd, then the other processes last started
// first; then what is mounted under the node's folder, the kubepods
// cgroups, and the folder. Safe on a node that came up only in part.
func (n *Node) stop() error {
	var errs []error
	start := time.Now()
	if p := n.proc("kubelet"); p != nil {
		errs = append(errs, p.stop(15*time.Second))
	}
	errs = append(errs, killCgroupProcs(), n.killShims())
	for i := len(n.procs) - 1; i >= 0; i-- {
		errs = append(errs, n.procs[i].stop(15*time.Second))
	}
	if n.regSrv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = n.regSrv.Shutdown(ctx)
		cancel()
	}
	if n.Dir != "" {
		errs = append(errs, unmountUnder(n.Dir))
	}
	errs = append(errs, removeCgroups())
	if n.Dir != "" {
		if err := os.RemoveAll(n.Dir); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", n.Dir, err))
		}
	}
	if n.lock != nil {
		n.lock.Close()
	}
	n.logf("realnode: down in %s", time.Since(start).Round(100*time.Millisecond))
	return errors.Join(errs...)
}

func (n *Node) proc(name string) *proc {
	for _, p := range n.procs {
		if p.name == name {
			return p
		}
	}
	return nil
}

// stop ends the process by its PID: SIGTERM, then SIGKILL after grace.
func (p *proc) stop(grace time.Duration) error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return nil
	case <-time.After(grace):
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.exited:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) did not end after SIGKILL", p.name, p.cmd.Process.Pid)
	}
}

// cgroupRoots are the kubelet's cgroup trees: kubepods in each v1
// hierarchy, or in the v2 tree.
func cgroupRoots() []string {
	if exists("/sys/fs/cgroup/cgroup.controllers") {
		return []string{"/sys/fs/cgroup/kubepods"}
	}
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	var roots []string
	for _, e := range entries {
		if dir := filepath.Join("/sys/fs/cgroup", e.Name(), "kubepods"); exists(dir) {
			roots = append(roots, dir)
		}
	}
	return roots
}

// cgroupDirs are the folders of the kubelet's cgroup trees, deepest first.
func cgroupDirs() []string {
	var dirs []string
	for _, root := range cgroupRoots() {
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
	}
	sort.Slice(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/") })
	return dirs
}

// killCgroupProcs kills every process in the kubelet's cgroups (the
// containers and the pods' pause processes) until none is left.
func killCgroupProcs() error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		left := 0
		for _, dir := range cgroupDirs() {
			b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
					left++
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d container processes left in the kubepods cgroups", left)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// killShims kills the containerd shims of this node's containerd: those
// whose command line names its socket.
func (n *Node) killShims() error {
	if n.Dir == "" {
		return nil
	}
	socket := []byte(n.path(containerdSocket))
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte("containerd-shim")) || !bytes.Contains(cmdline, socket) {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return nil
}

// unmountUnder unmounts every mount point under dir, deepest first
// (lazily: a mount still busy goes when its last user does).
func unmountUnder(dir string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	var points []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		p := unescapeMount(fields[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeCgroups removes the kubelet's cgroup folders, deepest first.
func removeCgroups() error {
	var errs []error
	for attempt := 0; ; attempt++ {
		errs = errs[:0]
		for _, dir := range cgroupDirs() {
			if err := syscall.Rmdir(dir); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dir, err))
			}
		}
		if len(errs) == 0 || attempt == 20 {
			return errors.Join(errs...)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
