package engine

import (
	"os"
	"regexp"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// TestAlertsNameMetrics: config/prometheus builds with kustomize, and
// every captf_ metric its alerts use is one the manager registers.
func TestAlertsNameMetrics(t *testing.T) {
	if _, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), "../../../config/prometheus"); err != nil {
		t.Fatalf("kustomize build config/prometheus: %v", err)
	}
	registered := map[string]bool{}
	descs := make(chan *prometheus.Desc, 100)
	for _, c := range []prometheus.Collector{runsTotal, planChangedTotal, guardBlocksTotal, driftFoundTotal,
		backupsFailedTotal, stateLostTotal, approvalSeconds, approvalToJobSeconds, plansAwaiting} {
		c.Describe(descs)
	}
	close(descs)
	name := regexp.MustCompile(`fqName: "([a-z_]+)"`)
	for d := range descs {
		registered[name.FindStringSubmatch(d.String())[1]] = true
	}
	alerts, err := os.ReadFile("../../../config/prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	used := regexp.MustCompile(`\bcaptf_[a-z_]+`).FindAllString(string(alerts), -1)
	if len(used) == 0 {
		t.Fatal("the alerts use no captf_ metric")
	}
	for _, m := range used {
		if !registered[m] {
			t.Errorf("alerts.yaml uses %s, which the manager does not register (it registers %v)", m, registered)
		}
	}
	// Registered with controller-runtime's registry: served on its endpoint.
	if err := ctrlmetrics.Registry.Register(runsTotal); err == nil {
		t.Error("captf_runs_total was not in controller-runtime's registry")
	}
}
