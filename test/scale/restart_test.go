package scale

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/managertest"
)

// membershipInterval is a pool's shortest time between two membership
// refreshes at the defaults (spec.membership unset), as pools.md says.
const membershipInterval = 60 * time.Second

// restartPhase stops the manager as a rollout does (SIGTERM; SIGKILL with
// CAPTF_SCALE_RESTART_SIGNAL=KILL) while every object is idle, starts a new
// process of the same binary with the same flags against the same API
// server, and measures, from the stop: the time until the new process
// re-checked every object, the requests it sent until then, and the Jobs
// created from the stop to the end of an idle window after it (from the
// node's watch of Jobs, not from the manager).
//
// An object is re-checked when the new process logged the end of a
// reconcile of it without an error: controller-runtime's "Reconcile done"
// or "Reconcile successful" at verbosity 5, which the new process runs
// with (--zap-log-level=5), naming the controller and the object.
func restartPhase(t *testing.T, c client.Client, s settings, mgr *manager, nd *node) []string {
	t.Helper()
	want := objectKeys(t, c)
	jobsBefore := len(nd.jobsSeen())
	r0 := mgr.mark()

	stopped := time.Now()
	signal, signalName := syscall.SIGTERM, "SIGTERM"
	if s.restartKill {
		signal, signalName = syscall.SIGKILL, "SIGKILL"
	}
	if err := mgr.Cmd.Process.Signal(signal); err != nil {
		t.Fatal(err)
	}
	for mgr.Running() {
		if time.Since(stopped) > time.Minute {
			t.Fatalf("the manager did not exit within a minute of %s; log: %s", signalName, mgr.LogPath)
		}
		time.Sleep(10 * time.Millisecond)
	}
	exited := time.Since(stopped)
	started := time.Now()
	mgr.Manager = managertest.Start(t, mgr.bin, mgr.kubeconfig, append(slices.Clone(mgr.args), "--zap-log-level=5", "--zap-time-encoding=rfc3339nano")...)
	readyAfter := time.Since(started)
	t.Logf("restart: the old manager exited %s after %s; the new one ready %s later; its log: %s", exited.Round(time.Millisecond), signalName, readyAfter.Round(time.Millisecond), mgr.LogPath)

	// Follow the new process's log until every object was re-checked.
	log, err := os.Open(mgr.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	seen := map[string]time.Time{}
	var partial []byte
	var all metrics
	var lastAt time.Time
	lastLog := time.Now()
	for {
		chunk, err := io.ReadAll(log)
		if err != nil {
			t.Fatal(err)
		}
		partial = append(partial, chunk...)
		end := bytes.LastIndexByte(partial, '\n') + 1
		for _, r := range parseRechecks(bytes.NewReader(partial[:end])) {
			if _, ok := seen[r.key]; !ok {
				seen[r.key] = r.at
			}
		}
		partial = slices.Clone(partial[end:])
		missing := missingKeys(want, seen)
		if len(missing) == 0 {
			all = scrape(t, mgr.metricsURL)
			for _, k := range want {
				lastAt = later(lastAt, seen[k])
			}
			break
		}
		if time.Since(lastLog) > 30*time.Second {
			t.Logf("restart: %d of %d objects re-checked after %s", len(want)-len(missing), len(want), time.Since(stopped).Round(time.Second))
			lastLog = time.Now()
		}
		if time.Since(stopped) > s.timeout {
			t.Errorf("restart: %d of %d objects not re-checked within %s of the stop, such as %s; log: %s",
				len(missing), len(want), s.timeout, missing[0], mgr.LogPath)
			return nil
		}
		time.Sleep(time.Second)
	}
	r1 := mgr.mark()
	recheckedAfter := lastAt.Sub(stopped)
	n := float64(len(want))

	// The idle window after: Jobs that the restart started would show in
	// it, as would the requests of what it left undone.
	time.Sleep(s.idle)
	after := scrape(t, mgr.metricsURL)
	jobs := nd.jobsSeen()
	counts := classifyJobs(jobs[:jobsBefore], jobs[jobsBefore:], engine.DefaultDriftInterval)
	window := time.Since(stopped)

	lines := []string{
		fmt.Sprintf("scale: N=%d restart (%s) with %d idle objects (%s): every object re-checked %s after the stop (the old process exited in %s, the new one was ready %s after its start); %.0f requests until then, %.2f per object (%s), %.2f reconciles per object; then idle %s: %.0f requests, %.2f per object per re-check at --recheck-interval=%s",
			s.n, signalName, len(want), formatKinds(want), recheckedAfter.Round(time.Millisecond), exited.Round(time.Millisecond), readyAfter.Round(time.Millisecond),
			all.sum("rest_client_requests_total"), all.sum("rest_client_requests_total")/n, formatCounts(byMethod(nil, all)),
			all.sum("controller_runtime_reconcile_total")/n, s.idle, requests(all, after), requests(all, after)/n/(s.idle.Minutes()/s.recheck.Minutes()), s.recheck),
		fmt.Sprintf("scale: N=%d restart: Jobs created from the stop to %s after it: %d (%s); started by the restart (not due by the schedule the object showed before it): %d",
			s.n, window.Round(time.Second), counts.total(), counts, counts.early()),
	}
	if s.breakdown {
		lines = append(lines, fmt.Sprintf("scale: N=%d breakdown restart until every object re-checked, requests per object: %s", s.n, mgr.breakdown(r0, r1, len(want))))
	}
	return lines
}

// objectKeys are the keys (controller/namespace/name) of every object of
// captf's kinds in the benchmark's namespace.
func objectKeys(t *testing.T, c client.Client) []string {
	t.Helper()
	ctx := context.Background()
	var keys []string
	var clusters infrav1.TerraformClusterList
	var machines infrav1.TerraformMachineList
	var pools infrav1.TerraformMachinePoolList
	for _, l := range []struct {
		controller string
		list       client.ObjectList
	}{{"terraformcluster", &clusters}, {"terraformmachine", &machines}, {"terraformmachinepool", &pools}} {
		if err := c.List(ctx, l.list, client.InNamespace(namespace)); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range clusters.Items {
		keys = append(keys, recheckKey("terraformcluster", o.Namespace, o.Name))
	}
	for _, o := range machines.Items {
		keys = append(keys, recheckKey("terraformmachine", o.Namespace, o.Name))
	}
	for _, o := range pools.Items {
		keys = append(keys, recheckKey("terraformmachinepool", o.Namespace, o.Name))
	}
	return keys
}

func recheckKey(controller, namespace, name string) string {
	return controller + "/" + namespace + "/" + name
}

// formatKinds counts keys by their controller.
func formatKinds(keys []string) string {
	counts := map[string]int{}
	for _, k := range keys {
		controller, _, _ := strings.Cut(k, "/")
		counts[controller]++
	}
	var parts []string
	for _, c := range []string{"terraformcluster", "terraformmachine", "terraformmachinepool"} {
		if counts[c] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[c], c))
		}
	}
	return strings.Join(parts, ", ")
}

func missingKeys(want []string, seen map[string]time.Time) []string {
	var missing []string
	for _, k := range want {
		if _, ok := seen[k]; !ok {
			missing = append(missing, k)
		}
	}
	return missing
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// recheck is the end of one reconcile without an error, as the manager
// logged it.
type recheck struct {
	key string
	at  time.Time
}

// parseRechecks reads the reconciles that ended without an error from the
// manager's JSON log at verbosity 5 (controller-runtime's "Reconcile done,
// requeueing after …", "Reconcile done, requeueing" and "Reconcile
// successful", with the controller, namespace and name of the object, and
// the time in RFC 3339). Other lines, and lines that are not JSON, are
// skipped.
func parseRechecks(r io.Reader) []recheck {
	var out []recheck
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.Contains(line, []byte(`"Reconcile `)) {
			continue
		}
		var l struct {
			Msg        string `json:"msg"`
			TS         string `json:"ts"`
			Controller string `json:"controller"`
			Namespace  string `json:"namespace"`
			Name       string `json:"name"`
		}
		if json.Unmarshal(line, &l) != nil || l.Controller == "" || l.Name == "" {
			continue
		}
		if !strings.HasPrefix(l.Msg, "Reconcile done") && l.Msg != "Reconcile successful" {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, l.TS)
		if err != nil {
			continue
		}
		out = append(out, recheck{key: recheckKey(l.Controller, l.Namespace, l.Name), at: at})
	}
	return out
}

// jobCounts are the Jobs created after a restart by operation, and of
// those that run on a schedule (refresh, drift), how many came before
// they were due.
type jobCounts struct {
	byOp    map[string]int
	earlyOp map[string]int
}

func (c jobCounts) total() int {
	var n int
	for _, v := range c.byOp {
		n += v
	}
	return n
}

// early is how many Jobs the restart started: every Job of an operation
// that no schedule starts (plan, apply, destroy), and refresh and drift
// Jobs that came before they were due.
func (c jobCounts) early() int {
	var n int
	for op, v := range c.byOp {
		switch op {
		case string(infrav1.OperationRefresh), string(infrav1.OperationDrift):
			n += c.earlyOp[op]
		default:
			n += v
		}
	}
	return n
}

func (c jobCounts) String() string {
	if c.total() == 0 {
		return "none"
	}
	ops := make([]string, 0, len(c.byOp))
	for op := range c.byOp {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	var parts []string
	for _, op := range ops {
		part := fmt.Sprintf("%s %d", op, c.byOp[op])
		if op == string(infrav1.OperationRefresh) || op == string(infrav1.OperationDrift) {
			part += fmt.Sprintf(", %d of them early", c.earlyOp[op])
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}

// jobTolerance is how much earlier than due a scheduled Job may be seen
// without counting as early: the times it is due by are in whole seconds
// (status times), and the node sees a Job a moment after its creation.
const jobTolerance = 2 * time.Second

// classifyJobs counts the Jobs seen after a restart (after), given those
// seen before it (before), by operation, and finds the scheduled ones
// that came early. A pool's membership refreshes follow each other at
// gaps that never shrink while no apply comes between (one interval after
// an apply, then one, two, four, … up to the maximum): a refresh is early
// when it follows its pool's last one sooner than that one followed the
// one before it, or sooner than the interval. A drift check is early when
// its object's last drift check or apply was less than driftInterval
// before.
func classifyJobs(before, after []jobSeen, driftInterval time.Duration) jobCounts {
	c := jobCounts{byOp: map[string]int{}, earlyOp: map[string]int{}}
	type owner struct{ kind, name string }
	refreshes := map[owner][]time.Time{}
	lastRun := map[owner]time.Time{}
	note := func(j jobSeen) {
		o := owner{j.ownerKind, j.owner}
		switch j.op {
		case string(infrav1.OperationApply):
			refreshes[o] = nil
			lastRun[o] = j.at
		case string(infrav1.OperationDrift):
			lastRun[o] = j.at
		case string(infrav1.OperationRefresh):
			refreshes[o] = append(refreshes[o], j.at)
		}
	}
	for _, j := range before {
		note(j)
	}
	for _, j := range after {
		o := owner{j.ownerKind, j.owner}
		c.byOp[j.op]++
		switch j.op {
		case string(infrav1.OperationRefresh):
			if prev := refreshes[o]; len(prev) > 0 {
				gap := membershipInterval
				if len(prev) > 1 {
					gap = max(gap, prev[len(prev)-1].Sub(prev[len(prev)-2]))
				}
				if j.at.Sub(prev[len(prev)-1]) < gap-jobTolerance {
					c.earlyOp[j.op]++
				}
			}
		case string(infrav1.OperationDrift):
			if last, ok := lastRun[o]; ok && j.at.Sub(last) < driftInterval-jobTolerance {
				c.earlyOp[j.op]++
			}
		}
		note(j)
	}
	return c
}
