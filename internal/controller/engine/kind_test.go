package engine

import (
	"context"

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
type testKind struct{}

var _ Kind = testKind{}

func (testKind) Name() string  { return "TerraformCluster" }
func (testKind) Short() string { return "tfc" }
func (testKind) New() Object   { return &infrav1.TerraformCluster{} }

func (testKind) ListReading(ctx context.Context, c client.Reader, namespace, key string) ([]Object, error) {
	return ListReading(ctx, c, &infrav1.TerraformClusterList{}, namespace, key)
}

func (testKind) CopyStatus(dst, src Object) {
	dst.(*infrav1.TerraformCluster).Status = *src.(*infrav1.TerraformCluster).Status.DeepCopy()
}

func (testKind) Applied(_ Object, msg *runner.Message) []Step {
	if msg.Endpoint == nil {
		return nil
	}
	return []Step{published{Host: msg.Endpoint.Host}}
}

func (testKind) Signs(Object) []string { return nil }

func (testKind) DeletionWaits(context.Context, client.Reader, Object) (*Wait, error) { return nil, nil }

func (testKind) FromState(Object, func(string) (tfstate.Output, error)) {}

func (testKind) Frozen() bool { return false }
func (testKind) Plans() bool  { return true }

func (testKind) Inputs(context.Context, client.Reader, Object) (map[string]render.Variable, *Wait, error) {
	return nil, nil, nil
}

func (testKind) Gate(context.Context, client.Reader, client.Reader, Object) (*Wait, error) {
	return nil, nil
}

func (testKind) Watch(b *builder.Builder, _ ctrl.Manager) *builder.Builder { return b }

// published is testKind's step after an apply; it does nothing.
type published struct{ Host string }

func (published) Apply(context.Context, *Reconciler, *StepContext) error { return nil }
