package scale

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/modulecontract"
	"github.com/captf/captf/internal/render"
	"github.com/captf/captf/internal/runner"
	"github.com/captf/captf/internal/testnode"
	"github.com/captf/captf/pkg/fingerprint"
)

// node is a test double for the kubelet, the Job controller and terraform
// together: it completes every runner Job at once with the report a real
// runner would leave, and for an apply writes the state terraform's
// kubernetes backend would (the captf_inputs_hash output, set to the
// Job's captf.io/inputs-hash; for a pool, its members in provider_ids too).
// Running hundreds of real terraform applies
// on two shared cores is out of reach; what the benchmark measures is the
// manager and the API server, which are real. internal/testnode is the
// node that runs the real runner and terraform.
//
// It watches Jobs with an informer and records when it first saw each
// approved apply Job (annotation captf.io/approved-plan), by the name of
// the TerraformCluster that owns it.
type node struct {
	c         client.Client
	namespace string
	workers   int
	// stateBytes is about how large each state Secret's data is: the
	// state holds a resource whose attribute is random text, which gzip
	// cannot shrink much, as real states hold IDs, keys and certificates.
	stateBytes int

	mu       sync.Mutex
	approved map[string]time.Time // TerraformCluster name → first seen
	failures []string
	// drifts counts the drift Jobs completed, refreshes the refresh Jobs.
	drifts, refreshes int
	// serials is the serial of the last state written under each
	// secret_suffix: an apply that changes something writes the next, as
	// terraform does.
	serials map[string]int64
	// jobs is every Job the node saw created, in the order seen, and
	// seenJob the UIDs among them.
	jobs    []jobSeen
	seenJob map[types.UID]bool
}

// jobSeen is a Job as the node's watch first showed it: when, its
// operation, and the kind and name of the object it runs for.
type jobSeen struct {
	at                   time.Time
	op, ownerKind, owner string
}

// poolMembers is how many members every pool's state lists.
const poolMembers = 3

// start runs the node until ctx ends; wait returns once its goroutines
// stopped.
func (n *node) start(ctx context.Context, t *testing.T, cfg *rest.Config) (wait func()) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n.approved = map[string]time.Time{}
	n.serials = map[string]int64{}
	n.seenJob = map[types.UID]bool{}
	queue := make(chan *batchv1.Job, 100000)
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(n.namespace))
	inf := factory.Batch().V1().Jobs().Informer()
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			job := obj.(*batchv1.Job)
			n.recordJob(job)
			if _, ok := job.Annotations[infrav1.AnnotationApprovedPlan]; ok {
				n.mu.Lock()
				owner := job.Labels[infrav1.LabelOwnerName]
				if _, seen := n.approved[owner]; !seen {
					n.approved[owner] = time.Now()
				}
				n.mu.Unlock()
			}
			if job.Status.CompletionTime == nil && job.Status.StartTime == nil {
				queue <- job
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	factory.Start(ctx.Done())
	for range n.workers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case job := <-queue:
					if err := n.complete(ctx, job); err != nil && ctx.Err() == nil {
						n.mu.Lock()
						n.failures = append(n.failures, fmt.Sprintf("Job %s: %v", job.Name, err))
						n.mu.Unlock()
					}
				}
			}
		})
	}
	return func() {
		wg.Wait()
		factory.Shutdown()
	}
}

// seenApproved returns when the node first saw the approved apply Job of
// the TerraformCluster name.
func (n *node) seenApproved(name string) (time.Time, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	at, ok := n.approved[name]
	return at, ok
}

// driftJobs returns how many drift Jobs the node completed.
func (n *node) driftJobs() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.drifts
}

// recordJob notes job, once, as created now.
func (n *node) recordJob(job *batchv1.Job) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.seenJob[job.UID] {
		return
	}
	n.seenJob[job.UID] = true
	n.jobs = append(n.jobs, jobSeen{at: time.Now(), op: operation(job), ownerKind: job.Labels[infrav1.LabelOwnerKind], owner: job.Labels[infrav1.LabelOwnerName]})
}

// jobsSeen returns every Job the node saw created, in order.
func (n *node) jobsSeen() []jobSeen {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]jobSeen(nil), n.jobs...)
}

// operation is the --operation a runner Job runs.
func operation(job *batchv1.Job) string {
	for _, a := range mainContainer(job).Command {
		if v, ok := strings.CutPrefix(a, "--operation="); ok {
			return v
		}
	}
	return ""
}

// errors returns what went wrong while completing Jobs.
func (n *node) errors() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.failures...)
}

// complete plays one Job to its end: the state an apply leaves, the Pod
// with the runner's report as its termination message, the Job's status.
func (n *node) complete(ctx context.Context, job *batchv1.Job) error {
	msg, err := n.report(job)
	if err != nil {
		return err
	}
	if msg.Outcome == runner.OutcomeApplied {
		if err := n.writeState(ctx, job); err != nil {
			return err
		}
	}
	if err := n.pod(ctx, job, msg); err != nil {
		return err
	}
	now := metav1.Now()
	job.Status.StartTime = &now
	job.Status.CompletionTime = &now
	job.Status.Succeeded = 1
	job.Status.Conditions = []batchv1.JobCondition{
		{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
		{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now, LastProbeTime: now},
	}
	if err := n.c.Status().Update(ctx, job); err != nil {
		return fmt.Errorf("job status: %w", err)
	}
	return nil
}

// report is what a real runner would report for job: a plan Job a plan of
// one update, an apply Job that it applied (a gated one with the fresh
// plan, whose hash is the approved one; a machine's with its provider ID
// and an address).
func (n *node) report(job *batchv1.Job) (runner.Message, error) {
	op, expect := operation(job), ""
	for _, a := range mainContainer(job).Command {
		if v, ok := strings.CutPrefix(a, "--expect-plan="); ok {
			expect = v
		}
	}
	owner := job.Labels[infrav1.LabelOwnerName]
	switch op {
	case string(infrav1.OperationPlan):
		return runner.Message{Operation: op, Outcome: runner.OutcomePlanned, Plan: planReport(owner, job.Annotations["captf.io/inputs-hash"])}, nil
	case string(infrav1.OperationDrift):
		n.mu.Lock()
		n.drifts++
		n.mu.Unlock()
		return runner.Message{Operation: op, Outcome: runner.OutcomeChecked, Drift: &runner.Changes{}}, nil
	case string(infrav1.OperationRefresh):
		// A pool's membership refresh that finds the members unchanged:
		// the state stays as it is.
		n.mu.Lock()
		n.refreshes++
		n.mu.Unlock()
		return runner.Message{Operation: op, Outcome: runner.OutcomeRefreshed}, nil
	case string(infrav1.OperationApply):
		msg := runner.Message{Operation: op, Outcome: runner.OutcomeApplied}
		switch job.Labels[infrav1.LabelOwnerKind] {
		case "TerraformMachine":
			// A machine module's outputs: what the InfraMachine
			// contract publishes.
			msg.ProviderID = "scale:///" + owner
			msg.Addresses = []runner.Address{{Type: "InternalIP", Address: "10.0.0.1"}}
		case "TerraformMachinePool":
			// A pool's own ID; its members are in the state.
			msg.ProviderID = "scale:///" + owner
		}
		if expect != "" {
			msg.Plan = planReport(owner, job.Annotations["captf.io/inputs-hash"])
			msg.Plan.PlanHash = expect
		}
		return msg, nil
	}
	return runner.Message{}, fmt.Errorf("operation %q is not played by the scale node", op)
}

// stateSuffix reads the backend's secret_suffix from the root module the
// Job runs, as terraform would: from its inputs volume, the per-run Secret
// the manager creates right after the Job (so it may not be there yet).
func (n *node) stateSuffix(ctx context.Context, job *batchv1.Job) (string, error) {
	var name string
	for _, v := range job.Spec.Template.Spec.Volumes {
		if v.Name == "inputs" && v.Secret != nil {
			name = v.Secret.SecretName
		}
	}
	if name == "" {
		return "", errors.New("no inputs volume")
	}
	var s corev1.Secret
	for {
		err := n.c.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: name}, &s)
		if err == nil {
			break
		}
		if !apierrors.IsNotFound(err) {
			return "", fmt.Errorf("inputs: %w", err)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	var root struct {
		Terraform struct {
			Backend struct {
				Kubernetes struct {
					SecretSuffix string `json:"secret_suffix"`
				} `json:"kubernetes"`
			} `json:"backend"`
		} `json:"terraform"`
	}
	if err := json.Unmarshal(s.Data["main.tf.json"], &root); err != nil {
		return "", fmt.Errorf("inputs: %w", err)
	}
	if root.Terraform.Backend.Kubernetes.SecretSuffix == "" {
		return "", errors.New("inputs: no secret_suffix")
	}
	return root.Terraform.Backend.Kubernetes.SecretSuffix, nil
}

// planReport is a plausible fingerprint report: one update, and a p2: hash
// that differs per object and per inputs.
func planReport(owner, inputsHash string) *fingerprint.Report {
	sum := sha256.Sum256([]byte(owner + "\x00" + inputsHash))
	return &fingerprint.Report{
		Change: 1, Resources: []string{"terraform_data.cluster (update)"},
		PlanHash: "p2:" + hex.EncodeToString(sum[:]),
	}
}

// writeState writes the state Secret terraform's kubernetes backend keeps
// (tfstate-default-<secret_suffix of the rendered root>, gzip'ed JSON under
// tfstate), with the inputs hash the Job ran with as the captf_inputs_hash
// output, and the next serial: only applies that changed something write
// it, and terraform gives each such write a new serial.
func (n *node) writeState(ctx context.Context, job *batchv1.Job) error {
	owner := job.Labels[infrav1.LabelOwnerName]
	suffix, err := n.stateSuffix(ctx, job)
	if err != nil {
		return err
	}
	outputs := map[string]any{render.HashOutput: map[string]any{
		"value": job.Annotations["captf.io/inputs-hash"], "type": "string",
	}}
	switch job.Labels[infrav1.LabelOwnerKind] {
	case "TerraformMachine", "TerraformMachinePool":
		// The provider ID a machine or pool module declares, which the
		// manager publishes only when the state has it.
		outputs[modulecontract.OutputProviderID] = map[string]any{"value": "scale:///" + owner, "type": "string"}
	}
	if job.Labels[infrav1.LabelOwnerKind] == "TerraformMachinePool" {
		// A pool module's members, read by the manager from the state.
		var ids []string
		for i := range poolMembers {
			ids = append(ids, fmt.Sprintf("scale:///%s/%d", owner, i))
		}
		outputs[modulecontract.OutputProviderIDs] = map[string]any{"value": ids, "type": []any{"list", "string"}}
	}
	n.mu.Lock()
	n.serials[suffix]++
	serial := n.serials[suffix]
	n.mu.Unlock()
	// In terraform's order (its statefile version 4): the serial, the
	// lineage and the outputs come before the resources, which hold
	// nearly all of a state's bytes.
	state := struct {
		Version          int            `json:"version"`
		TerraformVersion string         `json:"terraform_version"`
		Serial           int64          `json:"serial"`
		Lineage          string         `json:"lineage"`
		Outputs          map[string]any `json:"outputs"`
		Resources        []any          `json:"resources"`
	}{4, "1.11.4", serial, "scale-" + owner, outputs, padding(n.stateBytes)}
	raw, err := json.Marshal(state)
	if err != nil {
		return err
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(raw); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Name: "tfstate-default-" + suffix, Namespace: job.Namespace,
		Labels: map[string]string{
			"app.kubernetes.io/managed-by": "terraform", "tfstate": "true",
			"tfstateSecretSuffix": suffix, "tfstateWorkspace": "default",
		},
	}}
	s.Data = map[string][]byte{"tfstate": gz.Bytes()}
	err = n.c.Create(ctx, s)
	if apierrors.IsAlreadyExists(err) {
		// As terraform's kubernetes backend does: the Secret read, its
		// data replaced, the rest (the manager's owner reference) kept.
		data := s.Data
		if err = n.c.Get(ctx, client.ObjectKeyFromObject(s), s); err == nil {
			s.Data = data
			err = n.c.Update(ctx, s)
		}
	}
	if err != nil {
		return fmt.Errorf("state: %w", err)
	}
	return nil
}

// padding is a state's resources whose gzip'ed size is about size bytes:
// one terraform_data resource whose output is the base64 text of size
// random bytes, which gzip shrinks back to about size (measured: 4,096
// bytes gzip to 4,155, 262,144 to 263,289).
func padding(size int) []any {
	if size <= 0 {
		return []any{}
	}
	random := make([]byte, size)
	if _, err := rand.Read(random); err != nil {
		// crypto/rand.Read never fails (Go 1.24 and later).
		panic(err)
	}
	return []any{map[string]any{
		"mode": "managed", "type": "terraform_data", "name": "padding",
		"provider": `provider["terraform.io/builtin/terraform"]`,
		"instances": []any{map[string]any{
			"schema_version": 0,
			"attributes":     map[string]any{"id": "padding", "output": map[string]any{"value": base64.StdEncoding.EncodeToString(random), "type": "string"}},
		}},
	}}
}

// pod creates the Job's pod as the Job controller and the kubelet would
// leave it: named <job>-node like internal/testnode's, the job-name labels
// and the template's, owned by the Job, and terminated with the report as
// the runner container's termination message.
func (n *node) pod(ctx context.Context, job *batchv1.Job, msg runner.Message) error {
	pod := testnode.PodFor(job)
	if err := n.c.Create(ctx, pod); err != nil {
		return fmt.Errorf("create pod: %w", err)
	}
	pod.Status.Phase = corev1.PodSucceeded
	for _, c := range pod.Spec.InitContainers {
		pod.Status.InitContainerStatuses = append(pod.Status.InitContainerStatuses, testnode.Terminated(c, 0, ""))
	}
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{testnode.Terminated(*mainContainer(job), 0, string(msg.Encode()))}
	if err := n.c.Status().Update(ctx, pod); err != nil {
		return fmt.Errorf("pod status: %w", err)
	}
	return nil
}

// mainContainer is the runner container of a Job, the first one.
func mainContainer(job *batchv1.Job) *corev1.Container {
	return &job.Spec.Template.Spec.Containers[0]
}

// refreshJobs returns how many refresh Jobs the node completed.
func (n *node) refreshJobs() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.refreshes
}
