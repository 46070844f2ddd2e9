package terraformmachinepool

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
	"github.com/captf/captf/internal/modulecontract"
	"github.com/captf/captf/internal/predicatetest"
	"github.com/captf/captf/internal/render"
	"github.com/captf/captf/internal/tfstate"
)

// TestFromState: the provider_ids output reaches spec.providerIDList
// (sorted, through a step) and its length status.replicas; a missing,
// sensitive or malformed output changes neither, and MembersPublished
// names it, never a value.
func TestFromState(t *testing.T) {
	const canary = "CANARY-MEMBER-77"
	many := make([]string, infrav1.MaxProviderIDs+1)
	for i := range many {
		many[i] = `"id-` + strconv.Itoa(i) + `"`
	}
	tests := []struct {
		name   string
		out    tfstate.Output
		err    error
		list   []string // the list the step publishes; nil: no step
		reason string
	}{
		{name: "published, sorted", out: tfstate.Output{Found: true, Value: json.RawMessage(`["p://b", "p://a"]`)},
			list: []string{"p://a", "p://b"}, reason: infrav1.ReasonMembersPublished},
		{name: "unchanged: no step", out: tfstate.Output{Found: true, Value: json.RawMessage(`["old-1","old-0"]`)},
			reason: infrav1.ReasonMembersPublished},
		{name: "no members", out: tfstate.Output{Found: true, Value: json.RawMessage(`[]`)},
			list: []string{}, reason: infrav1.ReasonMembersPublished},
		{name: "missing", reason: infrav1.ReasonMembersMissing},
		{name: "sensitive", out: tfstate.Output{Found: true, Sensitive: true, Value: json.RawMessage(`["` + canary + `"]`)},
			reason: infrav1.ReasonMembersSensitive},
		{name: "not a list", out: tfstate.Output{Found: true, Value: json.RawMessage(`"` + canary + `"`)},
			reason: infrav1.ReasonMembersInvalid},
		{name: "an entry not a string", out: tfstate.Output{Found: true, Value: json.RawMessage(`["a", {"x": "` + canary + `"}]`)},
			reason: infrav1.ReasonMembersInvalid},
		{name: "an empty entry", out: tfstate.Output{Found: true, Value: json.RawMessage(`["a", ""]`)},
			reason: infrav1.ReasonMembersInvalid},
		{name: "a repeated entry", out: tfstate.Output{Found: true, Value: json.RawMessage(`["` + canary + `", "` + canary + `"]`)},
			reason: infrav1.ReasonMembersInvalid},
		{name: "too long an entry", out: tfstate.Output{Found: true, Value: json.RawMessage(`["` + canary + strings.Repeat("x", maxProviderID) + `"]`)},
			reason: infrav1.ReasonMembersInvalid},
		{name: "too many", out: tfstate.Output{Found: true, Value: json.RawMessage("[" + strings.Join(many, ",") + "]")},
			reason: infrav1.ReasonMembersInvalid},
		{name: "unreadable", err: fmt.Errorf("%w: not JSON at byte 7", tfstate.ErrCorrupt),
			reason: infrav1.ReasonMembersInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &infrav1.TerraformMachinePool{}
			p.Spec.ProviderIDList, p.Status.Replicas = []string{"old-0", "old-1"}, 2
			steps := Kind.FromState(p, func(name string) (tfstate.Output, error) {
				switch name {
				case modulecontract.OutputProviderIDs:
					return tt.out, tt.err
				case modulecontract.OutputProviderID, modulecontract.OutputMemberAddresses, render.ReplacedOutput:
					return tfstate.Output{}, nil
				}
				t.Errorf("read output %q", name)
				return tfstate.Output{}, nil
			})
			c := meta.FindStatusCondition(p.Status.Conditions, infrav1.ConditionMembersPublished)
			if c == nil || c.Reason != tt.reason || (c.Status == metav1.ConditionTrue) != (tt.reason == infrav1.ReasonMembersPublished) {
				t.Fatalf("MembersPublished %+v, want reason %s", c, tt.reason)
			}
			if strings.Contains(c.Message, canary) {
				t.Errorf("the message shows a value: %s", c.Message)
			}
			var got []string
			switch {
			case len(steps) == 1:
				got = steps[0].(publishMembers).IDs
			case len(steps) > 1:
				t.Fatalf("%d steps", len(steps))
			}
			if diff := cmp.Diff(tt.list, got); diff != "" {
				t.Errorf("published list (-want +got):\n%s", diff)
			}
			replicas := int32(2)
			if tt.list != nil {
				replicas = int32(len(tt.list))
			}
			if p.Status.Replicas != replicas {
				t.Errorf("status.replicas %d, want %d", p.Status.Replicas, replicas)
			}
		})
	}
}

// TestPublished: a pool is reported provisioned only when its published
// IDs are its own state's outputs: a list or an ID it was created with
// that the state does not hold keeps it unprovisioned, with a reason
// that says so and no value.
func TestPublished(t *testing.T) {
	publisher, ok := Kind.(engine.Publisher)
	if !ok {
		t.Fatal("the pool kind is no engine.Publisher: a pool is reported provisioned whatever IDs it publishes")
	}
	const victim = "CANARY-VICTIM-NODE"
	state := func(id, ids string) func(string) (tfstate.Output, error) {
		return func(name string) (tfstate.Output, error) {
			v := map[string]string{modulecontract.OutputProviderID: id, modulecontract.OutputProviderIDs: ids}[name]
			if v == "" {
				return tfstate.Output{}, nil
			}
			return tfstate.Output{Found: true, Value: json.RawMessage(v)}, nil
		}
	}
	tests := []struct {
		name   string
		id     string
		list   []string
		state  func(string) (tfstate.Output, error)
		reason string // "" when it may be reported provisioned
	}{
		{name: "the state's own", id: "asg-1", list: []string{"p://a", "p://b"}, state: state(`"asg-1"`, `["p://b","p://a"]`)},
		{name: "no members, none published", state: state("", `[]`)},
		{name: "a list it was created with, and no provider_ids output", list: []string{victim}, state: state("", ""), reason: infrav1.ReasonMembersMissing},
		{name: "a list other than the state's", list: []string{victim}, state: state("", `["p://a"]`), reason: infrav1.ReasonMembersMismatch},
		{name: "an ID it was created with, and no provider_id output", id: victim, state: state("", `[]`), reason: infrav1.ReasonProviderIDMismatch},
		{name: "an ID other than the state's", id: victim, state: state(`"asg-1"`, `[]`), reason: infrav1.ReasonProviderIDMismatch},
		{name: "a sensitive provider_id", state: func(name string) (tfstate.Output, error) {
			return tfstate.Output{Found: true, Sensitive: name == modulecontract.OutputProviderID, Value: json.RawMessage(`["` + victim + `"]`)}, nil
		}, reason: infrav1.ReasonProviderIDInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &infrav1.TerraformMachinePool{}
			p.Spec.ProviderID, p.Spec.ProviderIDList = tt.id, tt.list
			wait := publisher.Published(p, tt.state)
			switch {
			case tt.reason == "" && wait != nil:
				t.Errorf("not published: %+v", wait)
			case tt.reason != "" && (wait == nil || wait.Reason != tt.reason):
				t.Errorf("wait %+v, want reason %s", wait, tt.reason)
			case wait != nil && strings.Contains(wait.Message, victim):
				t.Errorf("the message shows an ID: %s", wait.Message)
			}
		})
	}
}

// TestMachinePoolChanged: of a MachinePool's updates, only those of what
// its pool's inputs are read from bring the pool back; what Cluster API
// copies from the pool and writes in the status does not.
func TestMachinePoolChanged(t *testing.T) {
	base := func() *clusterv1.MachinePool {
		mp := &clusterv1.MachinePool{ObjectMeta: metav1.ObjectMeta{Name: "fleet-pool", Namespace: "default"}}
		mp.Spec.Replicas = ptr.To(int32(1))
		mp.Spec.Template.Spec.Bootstrap.DataSecretName = ptr.To("fleet-pool-bootstrap")
		mp.Spec.Template.Labels = map[string]string{"role": "pool"}
		return mp
	}
	predicatetest.Check(t, machinePoolChanged, base, []predicatetest.Update[*clusterv1.MachinePool]{
		{Name: "members and status", Change: func(mp *clusterv1.MachinePool) {
			mp.Spec.ProviderIDList = []string{"p://a"}
			mp.Status.Replicas = ptr.To(int32(1))
			mp.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
		}, Want: false},
		{Name: "replicas unset: Cluster API's default, the same 1", Change: func(mp *clusterv1.MachinePool) {
			mp.Spec.Replicas = nil
		}, Want: false},
		{Name: "scaled", Change: func(mp *clusterv1.MachinePool) { mp.Spec.Replicas = ptr.To(int32(3)) }, Want: true},
		{Name: "bootstrap data", Change: func(mp *clusterv1.MachinePool) { mp.Spec.Template.Spec.Bootstrap.DataSecretName = ptr.To("other") }, Want: true},
		{Name: "failure domains", Change: func(mp *clusterv1.MachinePool) { mp.Spec.FailureDomains = []string{"a"} }, Want: true},
		{Name: "labels", Change: func(mp *clusterv1.MachinePool) { mp.Spec.Template.Labels["role"] = "other" }, Want: true},
		{Name: "taints", Change: func(mp *clusterv1.MachinePool) {
			mp.Spec.Template.Spec.Taints = []clusterv1.MachineTaint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
		}, Want: true},
		{Name: "an autoscaler takes the replicas", Change: func(mp *clusterv1.MachinePool) {
			mp.Annotations = map[string]string{clusterv1.ReplicasManagedByAnnotation: "external-autoscaler"}
		}, Want: true},
		{Name: "an annotation of no concern", Change: func(mp *clusterv1.MachinePool) {
			mp.Annotations = map[string]string{"team": "a"}
		}, Want: false},
	})
}
