// Package testnode plays the kubelet (and the Job controller) for batch/v1
// Jobs in tests against a real API server that has neither: for each new
// Job it creates the Pod, runs the Pod's init containers and then its first
// container as local processes, and writes the outcome back through the API
// (the Pod's container statuses with their termination messages, and the
// Job's status). Start runs it for a test; Run and RunLogs for a program
// (the sandbox, internal/sandbox).
//
// Images: an image reference maps to local folders (Node.Images); its
// digest is Digest(reference), which the pod reports as the container's
// imageID, and a reference pinned to that digest ("ref@sha256:…") finds
// the same folders. Node.Retag moves a tag the way a push does: pulls of
// the tag get the new folders under a new digest, and the tag pinned to an
// earlier digest still gets that digest's folders. A reference the node
// does not know leaves the pod Pending with the kubelet's ErrImagePull
// waiting reason, and the Job running, as a real node would until the
// Job's deadline; once Retag makes it known, the pod runs, as after a
// kubelet's next pull.
//
// Environment: envFrom (a Secret or ConfigMap) and env, with valueFrom of
// a Secret or ConfigMap key, are resolved as the kubelet resolves them;
// Node.Given says what a container was given.
//
// What it does not emulate: image pulls from registries, resource limits,
// security contexts, probes, restarts, parallelism (one Pod per Job, no
// retries: backoffLimit is treated as 0), sidecars,
// projected and downward-API volumes, and any isolation: processes run as
// the test's user. Container paths are not mounted: a command word, an arg,
// an env value or the value of a --flag=value that starts with a volume's
// mountPath or an image's mapped path is rewritten to its local folder;
// paths elsewhere (inside files, in the middle of a word) are not.
package testnode

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Image is what an image reference stands for on this machine: its files
// are at Dir and appear in the container at Path.
type Image struct {
	Path string
	Dir  string
}

// Node runs the Jobs of one namespace.
type Node struct {
	Client    client.Client
	Namespace string
	// Images maps an image reference to its local files. A Job whose image
	// is not here fails. It is read, never written, once the node started:
	// Retag moves a tag.
	Images map[string][]Image
	// Env is added to every container's environment: what a real pod would
	// get from its node and service account, such as how to reach the API
	// server (KUBE_CONFIG_PATH for terraform's kubernetes backend).
	Env []string

	mu   sync.Mutex
	seen map[string]bool
	// given records the environment each container was given, by
	// "<pod>/<container>", for Given.
	given map[string][]string
	// tags holds, for each reference Retag moved, what it pointed to over
	// time, oldest first: the last is what the tag serves now.
	tags   map[string][]tagged
	wg     sync.WaitGroup
	logf   func(format string, args ...any)
	errorf func(format string, args ...any)
	// nodeName is the Node object ServeLogs registered; pods run there.
	nodeName string
	// logs are the containers' log files by "<namespace>/<pod>/<container>".
	logs map[string]string
	// root holds the pods' folders. Its owner removes it after the node
	// stopped and every process it ran ended, even with Jobs in flight.
	root string
	// before runs before each Job starts (BeforeRun).
	before func(ctx context.Context, job *batchv1.Job)
}

// BeforeRun has f called with each Job the node is about to start, before
// anything of it runs: for tests that act in the moment between a Job's
// creation and its run, where a race with the manager's decision lies.
// nil removes it.
func (n *Node) BeforeRun(f func(ctx context.Context, job *batchv1.Job)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.before = f
}

// Root is the folder of the pods' folders, each with its volumes as the
// containers saw them: what a runner pod could read, for tests that play
// one.
func (n *Node) Root() string { return n.root }

// Start runs the node until the test ends.
func (n *Node) Start(t testing.TB) {
	t.Helper()
	// The root is made before the node's cleanup is registered, so it is
	// removed after the node stopped.
	stop := n.Run(t.TempDir(), t.Logf, t.Errorf)
	t.Cleanup(stop)
}

// Run runs the node until stop is called, for a program rather than a
// test: the pods' folders go under root, which the caller removes after
// stop; what a test would log goes to logf, and what would fail it (a Job
// the node could not play) to errorf. stop waits for every process the
// node ran.
func (n *Node) Run(root string, logf, errorf func(format string, args ...any)) (stop func()) {
	n.root = root
	ctx, cancel := context.WithCancel(context.Background())
	n.seen = map[string]bool{}
	n.logf, n.errorf = logf, errorf
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				n.poll(ctx)
			}
		}
	}()
	return func() {
		cancel()
		n.wg.Wait()
	}
}

func (n *Node) poll(ctx context.Context) {
	var jobs batchv1.JobList
	if err := n.Client.List(ctx, &jobs, client.InNamespace(n.Namespace)); err != nil {
		if ctx.Err() == nil {
			n.logf("testnode: list jobs: %v", err)
		}
		return
	}
	for i := range jobs.Items {
		job := &jobs.Items[i]
		n.mu.Lock()
		seen := n.seen[string(job.UID)]
		n.seen[string(job.UID)] = true
		n.mu.Unlock()
		if seen || job.Status.StartTime != nil {
			continue
		}
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			if err := n.run(ctx, job); err != nil && ctx.Err() == nil {
				n.errorf("testnode: job %s: %v", job.Name, err)
			}
		}()
	}
}

// run plays one Job from Pod creation to the Job's final status. A Job
// deleted while it runs has its containers stopped as a kubelet stops a
// deleted pod's: SIGTERM, then SIGKILL after the grace period; nothing
// more is written of it.
func (n *Node) run(ctx context.Context, job *batchv1.Job) error {
	live, stop := context.WithCancel(ctx)
	defer stop()
	go n.stopWhenDeleted(live, job, stop)
	if err := n.play(live, job); err != nil && ctx.Err() == nil && live.Err() == nil {
		return err
	}
	return nil
}

// stopWhenDeleted calls stop once job is gone or being deleted.
func (n *Node) stopWhenDeleted(ctx context.Context, job *batchv1.Job, stop func()) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var now batchv1.Job
		err := n.Client.Get(ctx, client.ObjectKeyFromObject(job), &now)
		if apierrors.IsNotFound(err) || (err == nil && (now.UID != job.UID || now.DeletionTimestamp != nil)) {
			stop()
			return
		}
	}
}

func (n *Node) play(ctx context.Context, job *batchv1.Job) error {
	n.mu.Lock()
	before := n.before
	n.mu.Unlock()
	if before != nil {
		before(ctx, job)
	}
	start := metav1.Now()
	job.Status.StartTime = &start
	if err := n.Client.Status().Update(ctx, job); err != nil {
		if apierrors.IsNotFound(err) {
			// Deleted between the list and the start: a kubelet never
			// runs such a Job, and neither does this node.
			n.logf("testnode: job %s deleted before it started", job.Name)
			return nil
		}
		return fmt.Errorf("start: %w", err)
	}
	pod := PodFor(job)
	n.mu.Lock()
	pod.Spec.NodeName = n.nodeName
	n.mu.Unlock()
	if err := n.Client.Create(ctx, pod); err != nil {
		return fmt.Errorf("create pod: %w", err)
	}

	containers := append(append([]corev1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers[0])
	for i, c := range containers {
		if _, _, known := n.image(c.Image); !known {
			if err := n.cannotPull(ctx, pod, c, i < len(pod.Spec.InitContainers)); err != nil {
				return err
			}
			// A kubelet keeps trying: the pod runs once the image can be
			// pulled (Retag), unless the Job goes first.
			if !n.waitImage(ctx, c.Image) {
				return nil
			}
			// Pulled: the pod no longer waits on its image.
			pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses = nil, nil
			if err := n.Client.Status().Update(ctx, pod); err != nil {
				return fmt.Errorf("pod status: %w", err)
			}
		}
	}
	root, err := os.MkdirTemp(n.root, "pod-")
	if err != nil {
		return err
	}
	var statuses []corev1.ContainerStatus
	ok := true
	for _, c := range containers {
		st, err := n.container(ctx, root, pod, c)
		if err != nil {
			return err
		}
		statuses = append(statuses, st)
		if st.State.Terminated.ExitCode != 0 {
			ok = false
			break
		}
	}
	inits := len(pod.Spec.InitContainers)
	pod.Status.Phase = corev1.PodSucceeded
	if !ok {
		pod.Status.Phase = corev1.PodFailed
	}
	pod.Status.InitContainerStatuses = statuses[:min(inits, len(statuses))]
	if len(statuses) > inits {
		pod.Status.ContainerStatuses = statuses[inits:]
	}
	if err := n.Client.Status().Update(ctx, pod); err != nil {
		return fmt.Errorf("pod status: %w", err)
	}

	now := metav1.Now()
	if ok {
		job.Status.Succeeded = 1
		job.Status.CompletionTime = &now
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
		}
	} else {
		job.Status.Failed = 1
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: now, LastProbeTime: now},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: now, LastProbeTime: now},
		}
	}
	if err := n.Client.Status().Update(ctx, job); err != nil {
		return fmt.Errorf("finish: %w", err)
	}
	return nil
}

// container runs one container as a local process.
func (n *Node) container(ctx context.Context, root string, pod *corev1.Pod, c corev1.Container) (corev1.ContainerStatus, error) {
	// Resolved once: a Retag while the pod runs does not change what this
	// container runs or the digest it reports.
	images, digest, _ := n.image(c.Image)
	paths := map[string]string{} // container path → local path
	for _, img := range images {
		paths[img.Path] = img.Dir
	}
	for _, m := range c.VolumeMounts {
		local := filepath.Join(root, "volumes", m.Name, m.SubPath)
		if err := n.volume(ctx, root, pod, m.Name); err != nil {
			return corev1.ContainerStatus{}, err
		}
		paths[m.MountPath] = local
	}
	msgPath := c.TerminationMessagePath
	if msgPath == "" {
		msgPath = corev1.TerminationMessagePathDefault
	}
	localMsg := filepath.Join(root, "termination", c.Name)
	if err := os.MkdirAll(filepath.Dir(localMsg), 0o755); err != nil {
		return corev1.ContainerStatus{}, err
	}
	paths[msgPath] = localMsg
	rewrite := rewriter(paths)

	argv := append(append([]string(nil), c.Command...), c.Args...)
	if len(argv) == 0 {
		return withDigest(Terminated(c, 128, "testnode: a container needs a command"), digest), nil
	}
	for i := range argv {
		argv[i] = rewrite(argv[i])
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	cmd.Dir = root
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + root}
	// As the kubelet: envFrom first, then env, each later one winning.
	given, err := n.environment(ctx, pod, c)
	if err != nil {
		return corev1.ContainerStatus{}, err
	}
	for _, kv := range given {
		k, v, _ := strings.Cut(kv, "=")
		cmd.Env = append(cmd.Env, k+"="+rewrite(v))
	}
	n.mu.Lock()
	if n.given == nil {
		n.given = map[string][]string{}
	}
	n.given[pod.Name+"/"+c.Name] = given
	n.mu.Unlock()
	cmd.Env = append(cmd.Env, n.Env...)
	log, err := os.Create(filepath.Join(root, c.Name+".log"))
	if err != nil {
		return corev1.ContainerStatus{}, err
	}
	defer log.Close()
	n.mu.Lock()
	if n.logs == nil {
		n.logs = map[string]string{}
	}
	n.logs[pod.Namespace+"/"+pod.Name+"/"+c.Name] = log.Name()
	n.mu.Unlock()
	cmd.Stdout, cmd.Stderr = log, log
	code := 0
	if err := cmd.Run(); err != nil {
		code = 1
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			code = ee.ExitCode()
		}
	}
	msg, _ := os.ReadFile(localMsg)
	if len(msg) > 4096 {
		msg = msg[:4096]
	}
	if code != 0 {
		out, _ := os.ReadFile(log.Name())
		n.logf("container %s of pod %s exited %d:\n%s", c.Name, pod.Name, code, tail(out, 2048))
	}
	return withDigest(Terminated(c, int32(code), string(msg)), digest), nil
}

// withDigest makes st's imageID name digest, the one the container ran.
func withDigest(st corev1.ContainerStatus, digest string) corev1.ContainerStatus {
	if repo, _, ok := strings.Cut(st.ImageID, "@"); ok && digest != "" {
		st.ImageID = repo + "@" + digest
	}
	return st
}

// Digest is the digest the node reports for an image reference.
func Digest(ref string) string {
	sum := sha256.Sum256([]byte("testnode/" + ref))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// tagged is what a tag pointed to at one time.
type tagged struct {
	digest string
	images []Image
}

// Retag points ref at images under a new digest, which it returns: a
// container that names ref from now on runs images and reports that
// digest, while ref pinned to a digest it had before ("ref@sha256:…")
// still runs what it ran then. A ref the node did not know is added under
// Digest(ref). Safe to call while the node runs.
func (n *Node) Retag(ref string, images []Image) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	history := n.history(ref)
	digest := Digest(ref)
	if len(history) > 0 {
		sum := sha256.Sum256([]byte(fmt.Sprintf("testnode/%s#%d", ref, len(history))))
		digest = "sha256:" + hex.EncodeToString(sum[:])
	}
	if n.tags == nil {
		n.tags = map[string][]tagged{}
	}
	n.tags[ref] = append(history, tagged{digest: digest, images: images})
	return digest
}

// history is what ref pointed to over time, oldest first; n.mu is held.
func (n *Node) history(ref string) []tagged {
	if h, moved := n.tags[ref]; moved {
		return h
	}
	if images, known := n.Images[ref]; known {
		return []tagged{{digest: Digest(ref), images: images}}
	}
	return nil
}

// image finds the folders of a reference, pinned or not, and the digest
// they are known by.
func (n *Node) image(ref string) (images []Image, digest string, known bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	base, want, pinned := strings.Cut(ref, "@")
	history := n.history(base)
	if !pinned {
		if len(history) == 0 {
			return nil, "", false
		}
		last := history[len(history)-1]
		return last.images, last.digest, true
	}
	for _, t := range history {
		if t.digest == want {
			return t.images, t.digest, true
		}
	}
	return nil, "", false
}

// waitImage waits until ref can be pulled, as a kubelet's pull backoff
// would find out; false when ctx ended first.
func (n *Node) waitImage(ctx context.Context, ref string) bool {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, _, known := n.image(ref); known {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

// cannotPull leaves the pod Pending with the container waiting on its
// image, as a kubelet reports it; the Job keeps running.
func (n *Node) cannotPull(ctx context.Context, pod *corev1.Pod, c corev1.Container, init bool) error {
	st := corev1.ContainerStatus{Name: c.Name, Image: c.Image, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
		Reason:  "ErrImagePull",
		Message: fmt.Sprintf("testnode: image %q is not mapped to a local folder", c.Image),
	}}}
	pod.Status.Phase = corev1.PodPending
	if init {
		pod.Status.InitContainerStatuses = []corev1.ContainerStatus{st}
	} else {
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{st}
	}
	if err := n.Client.Status().Update(ctx, pod); err != nil {
		return fmt.Errorf("pod status: %w", err)
	}
	return nil
}

// Given is the environment the node gave container c of pod, as the pod
// spec says (envFrom, then env with valueFrom resolved); nil when it did
// not run it.
func (n *Node) Given(pod, c string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.given[pod+"/"+c]
}

// environment resolves c's envFrom and env into NAME=value pairs in the
// kubelet's order. A key that is no valid variable name is skipped, as
// the kubelet skips it.
func (n *Node) environment(ctx context.Context, pod *corev1.Pod, c corev1.Container) ([]string, error) {
	var env []string
	for _, from := range c.EnvFrom {
		data, err := n.source(ctx, pod.Namespace, from.SecretRef, from.ConfigMapRef)
		if err != nil {
			return nil, fmt.Errorf("envFrom of %s: %w", c.Name, err)
		}
		for _, k := range slices.Sorted(maps.Keys(data)) {
			if len(validation.IsEnvVarName(from.Prefix+k)) == 0 {
				env = append(env, from.Prefix+k+"="+string(data[k]))
			}
		}
	}
	for _, e := range c.Env {
		v := e.Value
		if f := e.ValueFrom; f != nil && (f.SecretKeyRef != nil || f.ConfigMapKeyRef != nil) {
			var sref *corev1.SecretEnvSource
			var cref *corev1.ConfigMapEnvSource
			key := ""
			if f.SecretKeyRef != nil {
				sref, key = &corev1.SecretEnvSource{LocalObjectReference: f.SecretKeyRef.LocalObjectReference}, f.SecretKeyRef.Key
			} else {
				cref, key = &corev1.ConfigMapEnvSource{LocalObjectReference: f.ConfigMapKeyRef.LocalObjectReference}, f.ConfigMapKeyRef.Key
			}
			data, err := n.source(ctx, pod.Namespace, sref, cref)
			if err != nil {
				return nil, fmt.Errorf("env %s of %s: %w", e.Name, c.Name, err)
			}
			v = string(data[key])
		}
		env = append(env, e.Name+"="+v)
	}
	return env, nil
}

// source reads the data of a Secret or ConfigMap of namespace ns.
func (n *Node) source(ctx context.Context, ns string, s *corev1.SecretEnvSource, cm *corev1.ConfigMapEnvSource) (map[string][]byte, error) {
	if s != nil {
		var obj corev1.Secret
		if err := n.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: s.Name}, &obj); err != nil {
			return nil, err
		}
		return obj.Data, nil
	}
	if cm != nil {
		var obj corev1.ConfigMap
		if err := n.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: cm.Name}, &obj); err != nil {
			return nil, err
		}
		data := map[string][]byte{}
		for k, v := range obj.Data {
			data[k] = []byte(v)
		}
		return data, nil
	}
	return nil, nil
}

// volume materialises a pod volume once, under root/volumes/NAME.
func (n *Node) volume(ctx context.Context, root string, pod *corev1.Pod, name string) error {
	dir := filepath.Join(root, "volumes", name)
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, v := range pod.Spec.Volumes {
		if v.Name != name {
			continue
		}
		switch {
		case v.Secret != nil:
			s, err := n.secret(ctx, pod.Namespace, v.Secret.SecretName)
			if err != nil {
				return fmt.Errorf("volume %s: %w", name, err)
			}
			return writeItems(dir, s.Data, v.Secret.Items, v.Secret.DefaultMode)
		case v.Projected != nil:
			// Secrets only, as the restore Job projects them.
			for _, src := range v.Projected.Sources {
				if src.Secret == nil {
					return fmt.Errorf("volume %s: only secret projections are played", name)
				}
				s, err := n.secret(ctx, pod.Namespace, src.Secret.Name)
				if err != nil {
					return fmt.Errorf("volume %s: %w", name, err)
				}
				if err := writeItems(dir, s.Data, src.Secret.Items, v.Projected.DefaultMode); err != nil {
					return err
				}
			}
			return nil
		case v.ConfigMap != nil:
			var cm corev1.ConfigMap
			if err := n.Client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: v.ConfigMap.Name}, &cm); err != nil {
				return fmt.Errorf("volume %s: %w", name, err)
			}
			data := map[string][]byte{}
			for k, val := range cm.Data {
				data[k] = []byte(val)
			}
			return writeItems(dir, data, v.ConfigMap.Items, v.ConfigMap.DefaultMode)
		case v.EmptyDir != nil:
			return nil
		}
		return fmt.Errorf("volume %s: only secret, projected, configMap and emptyDir volumes are played", name)
	}
	return fmt.Errorf("volume %s is mounted but not declared", name)
}

// secret reads a mounted Secret; like the kubelet, it waits for one
// created after the Job.
func (n *Node) secret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	var s corev1.Secret
	for wait := 0; ; wait++ {
		err := n.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &s)
		if err == nil {
			return &s, nil
		}
		if !apierrors.IsNotFound(err) || wait == 100 {
			return nil, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func writeItems(dir string, data map[string][]byte, items []corev1.KeyToPath, mode *int32) error {
	perm := os.FileMode(0o644)
	if mode != nil {
		perm = os.FileMode(*mode)
	}
	if len(items) == 0 {
		for k := range data {
			items = append(items, corev1.KeyToPath{Key: k, Path: k})
		}
	}
	for _, it := range items {
		p := filepath.Join(dir, it.Path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		m := perm
		if it.Mode != nil {
			m = os.FileMode(*it.Mode)
		}
		// The test process must still read what it wrote read-only.
		if err := os.WriteFile(p, data[it.Key], m|0o400); err != nil {
			return err
		}
	}
	return nil
}

// rewriter maps container paths to local ones, longest prefix first.
func rewriter(paths map[string]string) func(string) string {
	prefixes := make([]string, 0, len(paths))
	for p := range paths {
		prefixes = append(prefixes, p)
	}
	sort.Slice(prefixes, func(i, j int) bool { return len(prefixes[i]) > len(prefixes[j]) })
	// A path is rewritten where a word starts: the whole string, or the
	// value of a --flag=value.
	return func(s string) string {
		start := 0
		if strings.HasPrefix(s, "-") {
			if i := strings.IndexByte(s, '='); i >= 0 {
				start = i + 1
			}
		}
		for _, p := range prefixes {
			rest := s[start:]
			if strings.HasPrefix(rest, p) && (len(rest) == len(p) || rest[len(p)] == '/') {
				return s[:start] + paths[p] + rest[len(p):]
			}
		}
		return s
	}
}

// Terminated is the status of container c after it exited with code and
// left msg as its termination message, with the reason and the imageID
// (repository@Digest(reference)) a kubelet reports. The node's own pods
// report the digest the container ran instead, which differs after Retag.
func Terminated(c corev1.Container, code int32, msg string) corev1.ContainerStatus {
	now := metav1.Now()
	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	base, _, _ := strings.Cut(c.Image, "@")
	repo := base
	if i := strings.LastIndexByte(repo, ':'); i > strings.LastIndexByte(repo, '/') {
		repo = repo[:i]
	}
	return corev1.ContainerStatus{
		Name:    c.Name,
		Image:   c.Image,
		ImageID: repo + "@" + Digest(base),
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: code, Reason: reason, Message: msg, StartedAt: now, FinishedAt: now,
		}},
	}
}

func ptr[T any](v T) *T { return &v }

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// PodFor is the pod the Job controller makes for job: named after it,
// with the template's labels and annotations and the Job controller's
// labels, owned by the Job.
func PodFor(job *batchv1.Job) *corev1.Pod {
	labels := map[string]string{"batch.kubernetes.io/job-name": job.Name, "job-name": job.Name}
	for k, v := range job.Spec.Template.Labels {
		labels[k] = v
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        job.Name + "-node",
			Namespace:   job.Namespace,
			Labels:      labels,
			Annotations: job.Spec.Template.Annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID,
				Controller: ptr(true), BlockOwnerDeletion: ptr(true),
			}},
		},
		Spec: job.Spec.Template.Spec,
	}
}
