package preview

// planKinds are the step kinds of spec 003's table: true for a kind that
// can plan, false for one that cannot. A kind with plan is served by a
// registered Capability; one without plan is a step without plan.
var planKinds = map[string]bool{
	"attest-provenance": false, "docker-build": false, "ensure-secret": false,
	"generate-sbom": false, "health-gate": false, "jvm-build": false,
	"r2-sync": false, "scan-vulnerabilities": false, "shell": false,
	"sign": false, "verify": false, "vuln-gate": false,
	"wait-cluster-healthy": false, "wait-endpoint": false,
	"wrangler-deploy": false, "wrangler-versions-promote": false,
	"zip-package":    false,
	"cdn-invalidate": false, "cfn-deploy": true, "code-deploy": false,
	"copy-to-host": false, "ecs-update-service": false,
	"emr-start-job-run": false, "emr-submit-step": false,
	"extract-config-bom": false, "lambda-deploy": false,
	"load-image-on-host": false, "publish-artifact": false,
	"publish-image": false, "remote-exec": false, "rollback-previous": false,
	"run-migration": false, "s3-sync": false, "snapshot-before": false,
	"wait-for-stack": false, "wait-job": false, "wait-steady-state": false,
	"arm-deploy":  true,
	"fly-release": false, "fly-rollback": false, "run-agent": false,
	"gcp-apply":    true,
	"helm-upgrade": false,
	"argo-app":     false, "flux-reconcile": false, "kubectl-apply": true,
	"kustomize-apply": false,
	"terraform-apply": true,
}

// deployFields are the inputs of spec 003's field table that name a local
// file or directory a step deploys from, by kind; boundFields apply to any
// step.
var (
	boundFields  = []string{"template", "manifest", "values"}
	deployFields = map[string][]string{
		"helm-upgrade":              {"chart"},
		"kustomize-apply":           {"dir"},
		"fly-release":               {"plan"},
		"fly-rollback":              {"plan"},
		"s3-sync":                   {"from"},
		"r2-sync":                   {"from"},
		"copy-to-host":              {"from"},
		"wrangler-deploy":           {"config"},
		"wrangler-versions-promote": {"config"},
		"docker-build":              {"context"},
		"zip-package":               {"source"},
		"jvm-build":                 {"path"},
	}
)

// unboundKinds run content their inputs do not list: each such step is a
// hole whose reason starts "unbound:".
var unboundKinds = map[string]bool{"shell": true, "run-agent": true}

// ShellKind is the one kind without plan that captf applies: it runs a
// command in the repository root.
const ShellKind = "shell"
