package chaos

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/tfstate"
)

// observer watches a run's namespace from before the flow starts: every
// Job (to see two of an object active at once, and the order of creations
// and completions), the state Secret of the flow's subject (to see every
// write to its state) and the subject itself (every version of it, to
// look for what must not reach it).
// Order is the API server's: resourceVersions of one etcd, compared as
// the revision numbers they are.
type observer struct {
	mu   sync.Mutex
	jobs map[string]*jobRecord
	// overlaps are the Jobs created while another was active.
	overlaps []overlap
	states   []stateWrite
	// versions are the subject as each watch event carried it, as JSON.
	versions [][]byte
}

type jobRecord struct {
	name, operation string
	// ownerKind and ownerName are the object the Job is of (its
	// captf.io/owner-kind and captf.io/owner-name labels).
	ownerKind, ownerName string
	// expect is --expect-plan of the runner, approved the Job's
	// captf.io/approved-plan annotation.
	expect, approved string
	// plan is the TerraformPlan an approved apply Job applies
	// (captf.io/plan).
	plan string
	// inputs is the hash of the inputs the Job runs (captf.io/inputs-hash).
	inputs string
	// guard: the runner plans first and applies nothing that deletes or
	// replaces (--guard), unless the inputs have the approval hash
	// allowDeletes (--allow-deletes-hash).
	guard        bool
	allowDeletes string
	// appliedInputs: a guarded apply of values an approval leaves out (a
	// pool's rotated bootstrap data), which shows in the Job that it is
	// only that (--applied-inputs).
	appliedInputs bool
	// replaces: the Job replaces a pool's members (--replace-member).
	replaces bool
	created  uint64
	// finished is when the Job was first seen succeeded or failed (or
	// deleted); 0 while active.
	finished  uint64
	succeeded bool
	// dropped: deleted before it succeeded or failed.
	dropped bool
}

// annotationInputsHash on a runner Job is the hash of the inputs it runs
// (the manager's, unexported there).
const annotationInputsHash = "captf.io/inputs-hash"

type overlap struct{ job, active string }

// stateWrite is one change of the state Secret: sum is a hash of its data
// (never printed), chunk the compressed state of its first Secret as the
// backend stored it (compared, never printed).
type stateWrite struct {
	rv    uint64
	sum   [32]byte
	name  string
	chunk []byte
}

// watchNamespace starts the observer of the run's subject s in ns; it
// stops when ctx ends.
func watchNamespace(ctx context.Context, t *testing.T, c client.WithWatch, ns string, s subject) *observer {
	t.Helper()
	o := &observer{jobs: map[string]*jobRecord{}}
	jobs, err := c.Watch(ctx, &batchv1.JobList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	// terraform's kubernetes backend labels its state Secrets tfstate=true
	// and with their secret_suffix, the object's.
	states, err := c.Watch(ctx, &corev1.SecretList{}, client.InNamespace(ns),
		client.MatchingLabels{tfstate.LabelState: "true", tfstate.LabelSuffix: engine.StateSuffix(s.kind.Short(), s.name)})
	if err != nil {
		t.Fatal(err)
	}
	gvk, err := apiutil.GVKForObject(s.kind.New(), c.Scheme())
	if err != nil {
		t.Fatal(err)
	}
	list, err := c.Scheme().New(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err != nil {
		t.Fatal(err)
	}
	objects, err := c.Watch(ctx, list.(client.ObjectList), client.InNamespace(ns), client.MatchingFields{"metadata.name": s.name})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for ev := range objects.ResultChan() {
			if b, err := json.Marshal(ev.Object); err == nil {
				o.mu.Lock()
				o.versions = append(o.versions, b)
				o.mu.Unlock()
			}
		}
	}()
	go func() {
		for ev := range jobs.ResultChan() {
			if j, ok := ev.Object.(*batchv1.Job); ok {
				o.job(ev.Type, j)
			}
		}
	}()
	go func() {
		for ev := range states.ResultChan() {
			if s, ok := ev.Object.(*corev1.Secret); ok {
				o.state(ev.Type, s)
			}
		}
	}()
	go func() {
		<-ctx.Done()
		jobs.Stop()
		states.Stop()
		objects.Stop()
	}()
	return o
}

func rv(m metav1.Object) uint64 {
	n, _ := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
	return n
}

func (o *observer) job(typ watch.EventType, j *batchv1.Job) {
	o.mu.Lock()
	defer o.mu.Unlock()
	r := o.jobs[j.Name]
	if r == nil {
		r = &jobRecord{name: j.Name, operation: j.Labels["captf.io/operation"], approved: j.Annotations[infrav1.AnnotationApprovedPlan],
			ownerKind: j.Labels[infrav1.LabelOwnerKind], ownerName: j.Labels[infrav1.LabelOwnerName],
			plan: j.Annotations[infrav1.AnnotationPlan], inputs: j.Annotations[annotationInputsHash], created: rv(j)}
		if len(j.Spec.Template.Spec.Containers) > 0 {
			c := j.Spec.Template.Spec.Containers[0]
			for _, a := range append(append([]string(nil), c.Command...), c.Args...) {
				if v, ok := strings.CutPrefix(a, "--expect-plan="); ok {
					r.expect = v
				}
				r.guard = r.guard || a == "--guard"
				if v, ok := strings.CutPrefix(a, "--allow-deletes-hash="); ok {
					r.allowDeletes = v
				}
				r.appliedInputs = r.appliedInputs || strings.HasPrefix(a, "--applied-inputs=")
				r.replaces = r.replaces || strings.HasPrefix(a, "--replace-member=")
			}
		}
		// Jobs of two objects may run at once (a gate between them is an
		// invariant of their own).
		for _, other := range o.sortedJobs() {
			if other.finished == 0 && other.ownerKind == r.ownerKind && other.ownerName == r.ownerName {
				o.overlaps = append(o.overlaps, overlap{job: r.name + " (" + r.operation + ")", active: other.name + " (" + other.operation + ")"})
			}
		}
		o.jobs[j.Name] = r
	}
	if r.finished != 0 {
		return
	}
	switch {
	case typ == watch.Deleted:
		r.finished, r.dropped = rv(j), true
	case j.Status.Succeeded > 0:
		r.finished, r.succeeded = rv(j), true
	case j.Status.Failed > 0:
		r.finished = rv(j)
	}
}

func (o *observer) state(typ watch.EventType, s *corev1.Secret) {
	h := sha256.New()
	if typ != watch.Deleted {
		keys := make([]string, 0, len(s.Data))
		for k := range s.Data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			h.Write([]byte(k))
			h.Write([]byte{0})
			h.Write(s.Data[k])
			h.Write([]byte{0})
		}
	}
	w := stateWrite{rv: rv(s), name: s.Name}
	if typ != watch.Deleted {
		w.chunk = s.Data[tfstate.DataKey]
	}
	copy(w.sum[:], h.Sum(nil))
	o.mu.Lock()
	defer o.mu.Unlock()
	if n := len(o.states); n > 0 && o.states[n-1].sum == w.sum {
		return // metadata only
	}
	o.states = append(o.states, w)
}

// sortedJobs are the Jobs in the order they were created. Called with
// o.mu held.
func (o *observer) sortedJobs() []*jobRecord {
	out := make([]*jobRecord, 0, len(o.jobs))
	for _, r := range o.jobs {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].created < out[j].created })
	return out
}

// snapshot copies what was observed.
func (o *observer) snapshot() (jobs []jobRecord, overlaps []overlap, states []stateWrite) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range o.sortedJobs() {
		jobs = append(jobs, *r)
	}
	return jobs, append([]overlap(nil), o.overlaps...), append([]stateWrite(nil), o.states...)
}

// seen is every version of the subject the watch carried, as JSON.
func (o *observer) seen() [][]byte {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([][]byte(nil), o.versions...)
}
