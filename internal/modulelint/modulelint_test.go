package modulelint

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/captf/captf/internal/modulecontract"
	"github.com/captf/captf/internal/planconfig"
)

// lines renders findings as captf lint prints them, run in the module's
// directory.
func lines(findings []Finding) []string {
	var out []string
	for _, f := range findings {
		out = append(out, f.Format("."))
	}
	return out
}

// TestCheck: each fixture under testdata breaks one rule (or none), and
// Check reports exactly that, at its file and line.
func TestCheck(t *testing.T) {
	const (
		cluster = modulecontract.RoleCluster
		machine = modulecontract.RoleMachine
		pool    = modulecontract.RolePool
	)
	const (
		fdKind     = "a list of names, a list of objects with name, control_plane and attributes, or an object of such objects"
		healthKind = `an object whose state is "running", "pending", "failed" or "unknown", or that word alone`
	)
	cases := []struct {
		fixture string
		role    modulecontract.Role
		want    []string
	}{
		// A module of each role that keeps its contract; one in JSON syntax.
		{"good-cluster", cluster, nil},
		{"good-machine", machine, nil},
		{"good-pool", pool, nil},
		{"good-json", machine, nil},

		// What the runner owns or cannot bind, whatever the role.
		{"parse-error", cluster, []string{
			"main.tf:1: error: Unclosed configuration block: There is no closing brace for this block before the end of the file. This may be caused by incorrect brace nesting elsewhere in this file.",
		}},
		{"backend", cluster, []string{
			`main.tf:2: error: backend "s3": the runner owns the backend; remove the block`,
		}},
		{"backend-json", cluster, []string{
			`main.tf.json:4: error: backend "s3": the runner owns the backend; remove the block`,
		}},
		{"cloud", cluster, []string{
			`main.tf:2: error: cloud: the runner owns the backend; remove the block`,
		}},
		{"provider-version", cluster, []string{
			`main.tf:3: warning: required_providers "aws" has no version constraint: each runner Job's init installs the newest release, so the plan that is approved and the apply that checks it can run different versions; add version`,
		}},
		{"provisioner", cluster, []string{
			`main.tf:2: warning: provisioner "local-exec" of terraform_data.a runs at apply, outside the plan: the p2: hash does not bind what it does (see docs/fingerprint.md)`,
		}},
		{"provisioner-removed", cluster, []string{
			`main.tf:4: warning: provisioner "local-exec" of a removed block runs at apply, outside the plan: the p2: hash does not bind what it does (see docs/fingerprint.md)`,
		}},
		{"prevent-destroy", cluster, []string{
			`main.tf:3: warning: terraform_data.a has prevent_destroy = true: terraform refuses any plan that destroys or replaces it, so deleting the object (deletionPolicy Destroy) fails its destroy Job, and the finalizer stays until the destroy runs a module without it`,
		}},
		{"credential", cluster, []string{
			`main.tf:1: warning: variable "db_password" looks like a credential but is not sensitive: terraform would show its value in the Job's log; add sensitive = true`,
			`main.tf:7: warning: variable "client_secret" looks like a credential but is not sensitive: terraform would show its value in the Job's log; add sensitive = true`,
		}},

		// The cluster's outputs.
		{"cluster-endpoint-alone", cluster, []string{
			`main.tf:1: error: output "control_plane_endpoint_host" is declared without "control_plane_endpoint_port": the manager reads them only together`,
		}},
		{"cluster-host-type", cluster, []string{
			`main.tf:2: error: output "control_plane_endpoint_host": the value is a list; for the Cluster's spec.controlPlaneEndpoint the manager reads a string`,
		}},
		{"cluster-port", cluster, []string{
			`main.tf:6: error: output "control_plane_endpoint_port": the value is a string that is not a port number; for the Cluster's spec.controlPlaneEndpoint the manager reads a port number, or a string of its digits`,
		}},
		{"cluster-exports-sensitive", cluster, []string{
			`main.tf:3: error: output "exports" is sensitive: the manager never reads a sensitive output, and reads this one for var.captf_exports of the cluster's machines and pools; keep secrets out of it and remove sensitive = true`,
		}},
		{"cluster-exports-type", cluster, []string{
			`main.tf:2: error: output "exports": the value is a string; for var.captf_exports of the cluster's machines and pools the manager reads an object`,
		}},
		{"cluster-failure-domains-mixed", cluster, []string{
			`main.tf:2: error: output "failure_domains": the value mixes names and objects; for the cluster's status.failureDomains the manager reads ` + fdKind,
		}},
		{"cluster-failure-domains-name", cluster, []string{
			`main.tf:2: error: output "failure_domains": entry 0 has no name; for the cluster's status.failureDomains the manager reads ` + fdKind,
		}},
		{"cluster-failure-domains-control-plane", cluster, []string{
			`main.tf:2: error: output "failure_domains": entry "a"'s control_plane is a string; for the cluster's status.failureDomains the manager reads ` + fdKind,
		}},
		{"cluster-health", cluster, []string{
			`main.tf:2: error: output "health": its state is not "running", "pending", "failed" or "unknown"; for the InfrastructureHealthy condition the manager reads ` + healthKind,
		}},

		// The machine's outputs and variables.
		{"machine-provider-id-missing", machine, []string{
			`.: error: output "provider_id" is missing: the manager reads it for the Machine's spec.providerID, and a machine module must declare it`,
		}},
		{"machine-provider-id-sensitive", machine, []string{
			`main.tf:11: error: output "provider_id" is sensitive: the manager never reads a sensitive output, and reads this one for the Machine's spec.providerID; keep secrets out of it and remove sensitive = true`,
		}},
		{"machine-override", machine, []string{
			`main_override.tf:2: error: output "provider_id" is sensitive: the manager never reads a sensitive output, and reads this one for the Machine's spec.providerID; keep secrets out of it and remove sensitive = true`,
		}},
		{"machine-addresses", machine, []string{
			`main.tf:14: error: output "addresses": entry 0's type is not one of Hostname, ExternalIP, InternalIP, ExternalDNS, InternalDNS; for the machine's status.addresses the manager reads a list of objects with type and address`,
		}},
		{"machine-bootstrap-missing", machine, []string{
			`.: error: variable "captf_bootstrap_data" is missing: the manager sets it to the bootstrap data the machine joins the cluster with, and a machine module must declare it`,
		}},
		{"machine-bootstrap-not-sensitive", machine, []string{
			`variables.tf:19: error: variable "captf_bootstrap_data" is not sensitive: the manager sets it to the bootstrap data the machine joins the cluster with, which terraform would show in the Job's log; add sensitive = true`,
		}},
		{"machine-name-type", machine, []string{
			`variables.tf:6: error: variable "captf_machine_name": type is number; the manager sets a string: the Machine's name`,
		}},
		{"machine-control-plane-type", machine, []string{
			`variables.tf:15: error: variable "captf_control_plane": type is string; the manager sets a bool: whether the Machine is a control plane machine`,
		}},
		{"machine-version-type", machine, []string{
			`variables.tf:25: error: variable "captf_kubernetes_version": type is number; the manager sets a string: the Machine's spec.version, the Kubernetes version it runs (empty when it names none)`,
		}},
		{"machine-type-parse", machine, []string{
			`variables.tf:2: error: variable "captf_exports": Invalid type specification: Keyword "objekt" is not a valid type constructor.`,
		}},

		// The pool's outputs and variables.
		{"pool-provider-ids", pool, []string{
			`main.tf:10: error: output "provider_ids": the value is a string; for the pool's spec.providerIDList and status.replicas the manager reads a list of strings`,
		}},
		{"pool-replicas-not-ignored", pool, []string{
			`main.tf:2: warning: terraform_data.group sets input from var.captf_replicas: while an autoscaler owns the MachinePool's replicas (cluster.x-k8s.io/replicas-managed-by), the module gets those of its last apply, and every apply sets the size back to them; add input to lifecycle { ignore_changes }`,
		}},
		{"pool-node-types", pool, []string{
			`variables.tf:17: error: variable "captf_node_labels": type is map(number); the manager sets a map of strings: the labels of the MachinePool's machine template`,
			`variables.tf:21: error: variable "captf_node_taints": type is list(string); the manager sets a list of objects with key, value and effect: the taints of the MachinePool's machine template`,
		}},
		{"pool-failure-domains-type", pool, []string{
			`variables.tf:17: error: variable "captf_failure_domains": type is string; the manager sets a list of strings: the failure domains the pool may use`,
		}},
		{"pool-exports-type", pool, []string{
			`variables.tf:2: error: variable "captf_exports": type is list(string); the manager sets an object: the exports output of the cluster's module`,
		}},
	}
	for _, tc := range cases {
		t.Run(tc.fixture, func(t *testing.T) {
			findings, err := Check(context.Background(), filepath.Join("testdata", tc.fixture), tc.role)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, lines(findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCheckTheRoleMatters: the module that keeps the cluster's contract
// breaks the pool's; what it lacks is reported for the module as a whole,
// sorted.
func TestCheckTheRoleMatters(t *testing.T) {
	findings, err := Check(context.Background(), filepath.Join("testdata", "good-cluster"), modulecontract.RolePool)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`.: error: output "provider_ids" is missing: the manager reads it for the pool's spec.providerIDList and status.replicas, and a pool module must declare it`,
		`.: error: variable "captf_bootstrap_data" is missing: the manager sets it to the bootstrap data the machine joins the cluster with, and a pool module must declare it`,
		`.: error: variable "captf_pool_name" is missing: the manager sets it to the MachinePool's name, and a pool module must declare it`,
		`.: error: variable "captf_replicas" is missing: the manager sets it to how many machines the pool should run, and a pool module must declare it`,
	}
	if diff := cmp.Diff(want, lines(findings)); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
}

// TestCheckRefuses: an unknown role, a directory without configuration
// files and a missing directory are errors, not findings.
func TestCheckRefuses(t *testing.T) {
	cases := []struct {
		reason string
		dir    string
		role   modulecontract.Role
		want   error
	}{
		{"unknown role", filepath.Join("testdata", "good-cluster"), "node", ErrUnknownRole},
		{"no configuration", filepath.Join("testdata", "empty"), modulecontract.RoleCluster, ErrNoConfig},
		{"no directory", filepath.Join("testdata", "missing"), modulecontract.RoleCluster, fs.ErrNotExist},
	}
	for _, tc := range cases {
		findings, err := Check(context.Background(), tc.dir, tc.role)
		if !errors.Is(err, tc.want) || findings != nil {
			t.Errorf("%s: Check = %v, %v; want the error %v", tc.reason, findings, err, tc.want)
		}
	}
}

// TestExamples: every module under examples/ keeps the contract of the
// role it plays, so that the examples stay clean. A new example needs a
// role here.
func TestExamples(t *testing.T) {
	roles := map[string]modulecontract.Role{
		// What a module image holds for the TerraformCluster of
		// examples/kubernetes/cluster.yaml.
		"kubernetes/module": modulecontract.RoleCluster,
		// A root module for the CLI; as a cluster module it sets no
		// contract output, which the cluster role allows.
		"quickstart": modulecontract.RoleCluster,
		// The Kubernetes quickstart's machine and pool modules.
		"kubernetes/machine": modulecontract.RoleMachine,
		"kubernetes/pool":    modulecontract.RolePool,
	}
	root := filepath.Join("..", "..", "examples")
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		files, err := planconfig.ConfigFiles(path)
		if err != nil || len(files) == 0 {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		seen[rel] = true
		role, ok := roles[rel]
		if !ok {
			t.Errorf("examples/%s: a module with no role in TestExamples", rel)
			return nil
		}
		findings, err := Check(context.Background(), path, role)
		if err != nil {
			return err
		}
		if got := lines(findings); len(got) > 0 {
			t.Errorf("examples/%s (role %s) is not clean:\n%v", rel, role, got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for rel := range roles {
		if !seen[rel] {
			t.Errorf("examples/%s: no module there any more", rel)
		}
	}
}

// TestStrict: Strict makes every warning an error and leaves its input
// alone.
func TestStrict(t *testing.T) {
	in := []Finding{{File: "a.tf", Line: 1, Severity: Warning, Rule: RuleProvisioner, Message: "m"}, {Severity: Error, Rule: RuleOutputMissing, Message: "n"}}
	want := []Finding{{File: "a.tf", Line: 1, Severity: Error, Rule: RuleProvisioner, Message: "m"}, {Severity: Error, Rule: RuleOutputMissing, Message: "n"}}
	if diff := cmp.Diff(want, Strict(in)); diff != "" {
		t.Errorf("Strict (-want +got):\n%s", diff)
	}
	if in[0].Severity != Warning {
		t.Error("Strict changed its input")
	}
}

// TestFormat: a finding with no file names the module's directory, one
// with no line names the file alone.
func TestFormat(t *testing.T) {
	cases := []struct {
		f    Finding
		want string
	}{
		{Finding{File: "main.tf", Line: 12, Severity: Error, Message: "m"}, "main.tf:12: error: m"},
		{Finding{File: "main.tf", Severity: Warning, Message: "m"}, "main.tf: warning: m"},
		{Finding{Severity: Error, Message: "m"}, "mod: error: m"},
	}
	for _, tc := range cases {
		if got := tc.f.Format("mod"); got != tc.want {
			t.Errorf("Format(%+v) = %q, want %q", tc.f, got, tc.want)
		}
	}
}
