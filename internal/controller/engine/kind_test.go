package engine

import (
	"context"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/render"
	"github.com/captf/captf/internal/runner"
	"github.com/captf/captf/internal/tfstate"
)

// testKind is the kind of the engine's own tests: TerraformClusters as the
// engine sees them, publishing nothing of the cluster kind's (its tests
// are in internal/controller/terraformcluster). What it publishes after
// an apply is a step of its own, so a test sees where the engine puts it.
type testKind struct {
	Basics
	// refresh is the interval of its refresh Jobs (0: none), maxRefresh
	// the longest. The last one's end is kept in the annotation
	// refreshedAt, the last change in changedAt; expecting is
	// RefreshSchedule's.
	refresh, maxRefresh time.Duration
	expecting           bool
}

// refreshedAt is where testKind keeps the end of the last refresh Job,
// changedAt when a refresh last found a change.
const (
	refreshedAt = "test.captf.io/refreshed-at"
	changedAt   = "test.captf.io/changed-at"
)

// theTestKind is testKind with its basics.
var theTestKind = testKind{Basics: NewBasics("TerraformCluster", "tfc", &infrav1.TerraformCluster{}, &infrav1.TerraformClusterList{})}

// indexedTestKind is a kind of TerraformMachines listed by their cluster's
// name, as the machine kind declares.
var indexedTestKind = testKind{Basics: NewBasics("TerraformMachine", "tfm", &infrav1.TerraformMachine{}, &infrav1.TerraformMachineList{}).IndexedBy(infrav1.LabelClusterName)}

func (testKind) Applied(_ Object, msg *runner.Message) []Step {
	if msg.Endpoint == nil {
		return nil
	}
	return []Step{published{Host: msg.Endpoint.Host}}
}

func (testKind) Signs(Object) []string { return nil }

func (k testKind) Refresh(_ context.Context, _ client.Reader, obj Object) (RefreshSchedule, error) {
	at := func(key string) *metav1.Time {
		t, err := time.Parse(time.RFC3339, obj.GetAnnotations()[key])
		if err != nil {
			return nil
		}
		return &metav1.Time{Time: t}
	}
	return RefreshSchedule{Interval: k.refresh, MaxInterval: k.maxRefresh, Last: at(refreshedAt), ChangedAt: at(changedAt), Expecting: k.expecting}, nil
}

func (testKind) Refreshed(view Object, now metav1.Time) {
	a := view.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[refreshedAt] = now.Format(time.RFC3339)
	view.SetAnnotations(a)
}

func (testKind) DeletionWaits(context.Context, client.Reader, Object) (*Wait, error) { return nil, nil }

func (testKind) FromState(Object, func(string) (tfstate.Output, error)) []Step { return nil }

func (testKind) Frozen() bool { return false }
func (testKind) Held() string { return "" }
func (testKind) Plans() bool  { return true }

func (testKind) Inputs(context.Context, client.Reader, Object) (map[string]render.Variable, *Wait, error) {
	return nil, nil, nil
}

func (testKind) Gate(context.Context, client.Reader, Object, []batchv1.Job) (*Wait, error) {
	return nil, nil
}

func (testKind) Watch(b *builder.Builder, _ ctrl.Manager) (*builder.Builder, error) { return b, nil }

// published is testKind's step after an apply; it does nothing.
type published struct{ Host string }

func (published) Apply(context.Context, *Reconciler, *StepContext) error { return nil }

// TestBasics: CopyStatus copies the whole status, a kind's own fields
// too, deeply and nothing else; New and ListReading's lists are fresh
// objects of the kind's types.
func TestBasics(t *testing.T) {
	b := NewBasics("TerraformMachine", "tfm", &infrav1.TerraformMachine{}, &infrav1.TerraformMachineList{})
	src := &infrav1.TerraformMachine{Spec: infrav1.TerraformMachineSpec{ProviderID: "src"}}
	src.Status.Addresses = []infrav1.MachineAddress{{Type: "Hostname", Address: "a"}}
	src.Status.ObservedGeneration = 3
	dst := b.New().(*infrav1.TerraformMachine)
	dst.Name, dst.Spec.ProviderID = "dst", "dst"
	b.CopyStatus(dst, src)
	src.Status.Addresses[0].Address = "changed"
	if dst.Status.ObservedGeneration != 3 || len(dst.Status.Addresses) != 1 || dst.Status.Addresses[0].Address != "a" {
		t.Errorf("status copied as %+v, want a deep copy of the source's", dst.Status)
	}
	if dst.Name != "dst" || dst.Spec.ProviderID != "dst" {
		t.Errorf("CopyStatus changed more than the status: name %q, providerID %q", dst.Name, dst.Spec.ProviderID)
	}
	if again := b.New(); again == Object(dst) || again.GetName() != "" {
		t.Errorf("New returned %v, want a fresh empty object", again)
	}
	if b.Name() != "TerraformMachine" || b.Short() != "tfm" {
		t.Errorf("names %q, %q", b.Name(), b.Short())
	}
	if _, ok := b.NewList().(*infrav1.TerraformMachineList); !ok {
		t.Errorf("NewList is a %T", b.NewList())
	}
	if got := b.IndexedLabels(); len(got) != 0 {
		t.Errorf("labels indexed %v, none declared", got)
	}
	if got := b.IndexedBy("a", "b").IndexedLabels(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("labels indexed %v, want those declared", got)
	}
}
