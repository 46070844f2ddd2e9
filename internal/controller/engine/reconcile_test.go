package engine

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/testenv"
	"github.com/captf/captf/internal/tfstate"
)

// Tests of the engine's steps against the real API server, without a
// manager: each calls the engine's own functions.

const (
	moduleImage = "example.test/module:1"
	runnerImage = "example.test/captf-runner:dev"
)

// laggingCache is the manager's cache before it has seen a Job that was
// just created: it lists no Job.
type laggingCache struct{ client.Client }

func (c laggingCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, jobs := list.(*batchv1.JobList); jobs {
		return nil
	}
	return c.Client.List(ctx, list, opts...)
}

// TestDeleteWaitsForUnrecordedJob: a first apply's Job was created and its
// start never recorded (the status write failed), and the object is
// deleted before the cache shows the Job. The delete asks the API server:
// the object is not released (which would let garbage collection kill the
// apply halfway) and the Job is taken up once the cache shows it. (Before,
// the missing state Secret read as "nothing was ever applied" and the
// finalizer went at once.)
func TestDeleteWaitsForUnrecordedJob(t *testing.T) {
	env := testenv.Start(t, "../../..")
	ctx := context.Background()
	tc := &infrav1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "unrecorded", Namespace: "default", Finalizers: []string{Finalizer}},
		Spec:       infrav1.TerraformClusterSpec{RunnerSpec: infrav1.RunnerSpec{Image: moduleImage}},
	}
	if err := env.Client.Create(ctx, tc); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Kind: theTestKind, Client: laggingCache{env.Client}, Reader: env.Client, RunnerImage: runnerImage, RetryBase: time.Second}
	job := r.buildJob(tc, moduleImage, nil, infrav1.OperationApply, "", false)
	if got := job.Labels[infrav1.LabelCluster]; got != tc.Name {
		t.Errorf("the Job's %s label is %q, want its cluster %q", infrav1.LabelCluster, got, tc.Name)
	}
	if err := env.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, tc); err != nil {
		t.Fatal(err)
	}
	res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tc)})
	if err != nil || res.RequeueAfter <= 0 {
		t.Errorf("reconcile: %+v, %v; want a requeue to take the Job up", res, err)
	}
	if res.Priority != nil {
		t.Errorf("the requeue that takes the Job up has priority %d, want the event's", *res.Priority)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(tc), tc); err != nil {
		t.Fatalf("the object was released while Job %s was unprocessed: %v", job.Name, err)
	}
	if !slices.Contains(tc.Finalizers, Finalizer) {
		t.Fatalf("finalizers %v", tc.Finalizers)
	}
}

// TestPruneNewestWithinASecond calls pruneJobs directly against the real
// API server. Creation timestamps have a resolution of one second, and a
// runner Job can take less: of two finished Jobs created within the same
// second, the one created later is the newer, whatever their random name
// suffixes, and it is the one a limit of 1 keeps. Ordering such Jobs by
// name deletes the newest Job half the time.
func TestPruneNewestWithinASecond(t *testing.T) {
	env := testenv.Start(t, "../../..")
	ctx := context.Background()
	c := env.Client
	r := &Reconciler{Kind: theTestKind, Client: c, Reader: c, RunnerImage: runnerImage}
	one := int32(1)
	tc := &infrav1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "quick", Namespace: "default"},
		Spec: infrav1.TerraformClusterSpec{RunnerSpec: infrav1.RunnerSpec{Image: moduleImage,
			Jobs: infrav1.JobSettings{SuccessfulJobsHistoryLimit: &one}}},
	}
	if err := c.Create(ctx, tc); err != nil {
		t.Fatal(err)
	}
	// The newer Job gets the name that sorts first. Both must fall in one
	// second of the API server's clock; try again where they straddle two.
	var older, newer *batchv1.Job
	for attempt := 0; ; attempt++ {
		older = r.buildJob(tc, moduleImage, nil, infrav1.OperationApply, "", false)
		older.Name = fmt.Sprintf("quick-apply-%d-z", attempt)
		newer = r.buildJob(tc, moduleImage, nil, infrav1.OperationApply, "", false)
		newer.Name = fmt.Sprintf("quick-apply-%d-a", attempt)
		for _, job := range []*batchv1.Job{older, newer} {
			if err := c.Create(ctx, job); err != nil {
				t.Fatal(err)
			}
		}
		if older.CreationTimestamp.Equal(&newer.CreationTimestamp) {
			break
		}
		if attempt == 4 {
			t.Fatal("no two Jobs created within one second in 5 attempts")
		}
		for _, job := range []*batchv1.Job{older, newer} {
			// Gone at once: a Job's default propagation orphans its pods
			// through a finalizer, which no garbage collector removes
			// here, and the Job would stay among the object's.
			if err := c.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, job := range []*batchv1.Job{older, newer} {
		succeeded(job)
		if err := c.Status().Update(ctx, job); err != nil {
			t.Fatal(err)
		}
		if err := r.annotateJob(ctx, job, infrav1.AnnotationProcessed, "true"); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.pruneJobs(ctx, tc); err != nil {
		t.Fatal(err)
	}
	jobs, err := r.jobsOf(ctx, c, tc)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for i := range jobs {
		left = append(left, jobs[i].Name)
	}
	if !slices.Equal(left, []string{newer.Name}) {
		t.Errorf("Jobs left %v, want the newer %s", left, newer.Name)
	}
}

// TestPruneHoldsWhilePausedOrDeleting calls syncPlans directly against the
// real API server (its field selector on spec.targetRef.name stands in for
// the cache's index): with 12 finished plans it prunes nothing while the
// target is paused or being deleted, and keeps the 10 newest otherwise.
func TestPruneHoldsWhilePausedOrDeleting(t *testing.T) {
	env := testenv.Start(t, "../../..")
	ctx := context.Background()
	c := env.Client
	r := &Reconciler{Kind: theTestKind, Client: c, Reader: c}
	tc := &infrav1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "held", Namespace: "default", Finalizers: []string{Finalizer},
			Annotations: map[string]string{AnnotationPaused: "true"}},
		Spec: infrav1.TerraformClusterSpec{RunnerSpec: infrav1.RunnerSpec{Image: moduleImage}},
	}
	if err := c.Create(ctx, tc); err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		plan := &infrav1.TerraformPlan{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("held-%02d", i), Namespace: "default",
				Labels: map[string]string{infrav1.LabelPlanPhase: string(infrav1.PlanSuperseded)}},
			Spec: infrav1.TerraformPlanSpec{
				TargetRef: infrav1.PlanTargetReference{Kind: "TerraformCluster", Name: tc.Name},
				PlanHash:  "p2:" + strings.Repeat("a", 64), InputsHash: "h2:" + strings.Repeat("b", 64),
				Reason: infrav1.ReasonManual, Summary: infrav1.PlanSummary{Update: 1},
			},
		}
		if err := c.Create(ctx, plan); err != nil {
			t.Fatal(err)
		}
	}
	count := func() int {
		var list infrav1.TerraformPlanList
		if err := c.List(ctx, &list, client.InNamespace("default")); err != nil {
			t.Fatal(err)
		}
		return len(list.Items)
	}
	if err := r.syncPlans(ctx, tc); err != nil || count() != 12 {
		t.Fatalf("paused: %v, %d plans left, want 12", err, count())
	}
	delete(tc.Annotations, AnnotationPaused)
	if err := c.Update(ctx, tc); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, tc); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(tc), tc); err != nil || tc.DeletionTimestamp.IsZero() {
		t.Fatalf("not deleting: %v", err)
	}
	if err := r.syncPlans(ctx, tc); err != nil || count() != 12 {
		t.Fatalf("deleting: %v, %d plans left, want 12", err, count())
	}
	tc.DeletionTimestamp = nil
	if err := r.syncPlans(ctx, tc); err != nil || count() != KeepFinished {
		t.Fatalf("neither: %v, %d plans left, want %d", err, count(), KeepFinished)
	}
}

// TestRemoveAnnotationKeepsOthers: removing the last annotation the
// manager read leaves one written since (an approval) in place; a patch
// made by diffing would clear the whole field.
func TestRemoveAnnotationKeepsOthers(t *testing.T) {
	env := testenv.Start(t, "../../..")
	ctx := context.Background()
	tc := &infrav1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "annotated", Namespace: "default", Annotations: map[string]string{AnnotationBlockMove: "a runner Job runs"}},
		Spec:       infrav1.TerraformClusterSpec{RunnerSpec: infrav1.RunnerSpec{Image: moduleImage}},
	}
	if err := env.Client.Create(ctx, tc); err != nil {
		t.Fatal(err)
	}
	read := tc.DeepCopy()
	before := tc.DeepCopy()
	tc.Annotations[infrav1.AnnotationApprovePlan] = "p2:approved"
	if err := env.Client.Patch(ctx, tc, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Kind: theTestKind, Client: env.Client}
	if err := r.removeAnnotation(ctx, read, AnnotationBlockMove); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(tc), tc); err != nil {
		t.Fatal(err)
	}
	if _, ok := tc.Annotations[AnnotationBlockMove]; ok || tc.Annotations[infrav1.AnnotationApprovePlan] != "p2:approved" {
		t.Fatalf("annotations after the removal: %v", tc.Annotations)
	}
}

// TestBackupPruneAndReplace: the newest serials are kept, as many as the
// manager's setting says, newest first in status; a serial whose content
// changed (after a restore) is backed up again under its name, and the
// parts a shorter state no longer needs go.
func TestBackupPruneAndReplace(t *testing.T) {
	env := testenv.Start(t, "../../..")
	ctx := context.Background()
	tc := &infrav1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "pruned", Namespace: "default"},
		Spec:       infrav1.TerraformClusterSpec{RunnerSpec: infrav1.RunnerSpec{Image: moduleImage}},
	}
	if err := env.Client.Create(ctx, tc); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Kind: theTestKind, Client: env.Client, Reader: env.Client, StateBackups: 3}
	// write stores a state of serial in parts Secrets, as terraform would
	// (a full tfstate.ChunkSize in each but the last; a state of two parts
	// carries an output of random text that gzip cannot shrink below
	// one), and backs it up as a reconcile does.
	write := func(serial int64, lineage string, parts int) {
		t.Helper()
		pad := make([]byte, (parts-1)*tfstate.ChunkSize)
		if _, err := rand.Read(pad); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		fmt.Fprintf(zw, `{"version":4,"serial":%d,"lineage":%q,"outputs":{"pad":{"value":%q,"type":"string"}},"resources":[]}`,
			serial, lineage, base64.StdEncoding.EncodeToString(pad))
		zw.Close()
		z := buf.Bytes()
		if got := (len(z) + tfstate.ChunkSize - 1) / tfstate.ChunkSize; got != parts {
			t.Fatalf("the state of serial %d takes %d chunks, want %d", serial, got, parts)
		}
		if err := env.Client.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace("default"), client.MatchingLabels(tfstate.Selector(StateSuffix("tfc", tc.Name)))); err != nil {
			t.Fatal(err)
		}
		for n := range parts {
			name := StateSecretName("tfc", tc.Name)
			if n > 0 {
				name = tfstate.PartName(StateSuffix("tfc", tc.Name), n)
			}
			chunk := z[n*tfstate.ChunkSize : min((n+1)*tfstate.ChunkSize, len(z))]
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: tfstate.Selector(StateSuffix("tfc", tc.Name))},
				Data: map[string][]byte{tfstate.DataKey: chunk}}
			if err := env.Client.Create(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		st, err := r.readState(ctx, env.Client, tc)
		if err != nil || st == nil || st.Serial != serial {
			t.Fatalf("read state %d: %+v, %v", serial, st, err)
		}
		if err := r.syncBackups(ctx, tc, st); err != nil {
			t.Fatal(err)
		}
	}
	kept := func() []string {
		t.Helper()
		return secretNames(t, env.Client, client.HasLabels{infrav1.LabelStateBackup})
	}
	for serial := int64(1); serial <= 5; serial++ {
		write(serial, "one", 2)
	}
	name := func(serial int64) string { return BackupName("tfc", tc.Name, serial) }
	part := func(serial int64, n int) string { return BackupPartName("tfc", tc.Name, serial, n) }
	want := []string{name(3), part(3, 1), name(4), part(4, 1), name(5), part(5, 1)}
	if got := kept(); !slices.Equal(got, want) {
		t.Fatalf("backups kept %v, want %v", got, want)
	}
	if got := tc.Status.StateBackups; len(got) != 3 || got[0].Serial != 5 || got[2].Serial != 3 {
		t.Fatalf("status.stateBackups %+v", got)
	}
	// A restore of serial 3 pushed it back as 4: the same number, other
	// content, in one Secret.
	tc.Status.StateSerial = nil
	write(4, "two", 1)
	want = []string{name(3), part(3, 1), name(4), name(5), part(5, 1)}
	if got := kept(); !slices.Equal(got, want) {
		t.Fatalf("backups after serial 4 changed %v, want %v", got, want)
	}
	var first corev1.Secret
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: name(4)}, &first); err != nil {
		t.Fatal(err)
	}
	if first.Annotations[AnnotationStateChunks] != "1" || len(first.Data[ChunkKey(0)]) == 0 {
		t.Fatalf("serial 4 backed up again as %v", first.Annotations)
	}
	// Status lost (a move): the serial is checked against its backup once,
	// and the same content is not written again.
	rv := first.ResourceVersion
	tc.Status.StateSerial, tc.Status.StateBackups = nil, nil
	write(4, "two", 1)
	if got := tc.Status.StateBackups; len(got) != 3 || got[0].Serial != 5 {
		t.Fatalf("status.stateBackups rebuilt as %+v", got)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: name(4)}, &first); err != nil || first.ResourceVersion != rv {
		t.Fatalf("an unchanged serial was written again: %v", err)
	}
}

// succeeded gives job the status the Job controller gives a Job whose pod
// succeeded.
func succeeded(job *batchv1.Job) {
	now := metav1.Now()
	job.Status.StartTime, job.Status.CompletionTime, job.Status.Succeeded = &now, &now, 1
	job.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
	}
}

// TestRecheckYields: the periodic re-check a reconcile asks for is queued
// below what events bring, so that at thousands of objects the re-checks
// due at a moment never hold up an approval; a sooner requeue keeps the
// event's priority (TestDeleteWaitsForUnrecordedJob).
func TestRecheckYields(t *testing.T) {
	env := testenv.Start(t, "../../..")
	ctx := context.Background()
	tc := &infrav1.TerraformCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "yields", Namespace: "default"},
		// Inputs that cannot run: nothing is due until they change or
		// the re-check comes.
		Spec: infrav1.TerraformClusterSpec{RunnerSpec: infrav1.RunnerSpec{Image: "Not A Reference"}},
	}
	if err := env.Client.Create(ctx, tc); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Kind: theTestKind, Client: env.Client, Reader: env.Client, RunnerImage: runnerImage}
	res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(tc)})
	if err != nil || res.RequeueAfter != r.recheck() {
		t.Fatalf("reconcile: %+v, %v; want the re-check after %s", res, err, r.recheck())
	}
	if res.Priority == nil || *res.Priority != handler.LowPriority {
		t.Errorf("the re-check's priority is %v, want %d", res.Priority, handler.LowPriority)
	}
}
