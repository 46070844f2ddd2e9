#!/usr/bin/env bash
# chaos.sh runs the whole fault matrix of the manager (test/chaos, issue 9):
# every flow, every write of it, every fault kind, plus a SIGKILL after
# every write and the webhook unreachable, each run against the real
# kube-apiserver and etcd, the manager binary, the runner and terraform.
# It prints the figures (fault points × kinds, runs, violations per
# invariant) and every violation found; it fails when there is one.
#
# Environment: CAPTF_CHAOS_FLOWS, CAPTF_CHAOS_FAULTS, CAPTF_CHAOS_POINTS
# (comma-separated names, fault points as the report spells them: "POST
# jobs #1"; to narrow the run), CAPTF_CHAOS_TIMEOUT (default 6h).
set -euo pipefail
cd "$(dirname "$0")/.."

export CAPTF_TERRAFORM="${CAPTF_TERRAFORM:-$(hack/install-terraform.sh)}"
export KUBEBUILDER_ASSETS="${KUBEBUILDER_ASSETS:-$(hack/install-envtest.sh)}"
# Cluster API's CRDs, which the flows of TerraformMachines need.
export CAPTF_CAPI_CRDS="${CAPTF_CAPI_CRDS:-$(hack/install-capi-crds.sh)}"
echo "terraform: $CAPTF_TERRAFORM ($(TF_CLI_CONFIG_FILE=/dev/null "$CAPTF_TERRAFORM" version | head -1))"
echo "envtest:   $KUBEBUILDER_ASSETS"

log="$(mktemp -t captf-chaos.XXXXXX)"
echo "full output: $log"
status=0
CAPTF_CHAOS=full go test -count=1 -v -timeout "${CAPTF_CHAOS_TIMEOUT:-6h}" -run '^TestChaos$' ./test/chaos >"$log" 2>&1 || status=$?
grep '^chaos: ' "$log" || tail -40 "$log" >&2
exit "$status"
