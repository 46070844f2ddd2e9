#!/usr/bin/env bash
# scale.sh N... runs the scale benchmark of the manager (test/scale) once
# for each number of TerraformClusters, with the real kube-apiserver and
# etcd and the manager binary, and prints one block of figures per N:
# approval to apply Job latency, API requests per object per hour while
# idle, and the manager's memory; then the same for the clusters'
# TerraformMachines and TerraformMachinePools; where the manager's heap
# goes, by kind; a restart of the idle manager (the time until it
# re-checked every object, its requests, the Jobs it started); drift
# checks. Default: 100 500.
#
# Environment: CAPTF_SCALE_MACHINES (TerraformMachines per cluster,
# default 2; 0 for clusters only), CAPTF_SCALE_POOLS (TerraformMachinePools
# per cluster, default 1; 0: none), CAPTF_SCALE_IDLE (idle window, default 2m),
# CAPTF_SCALE_RECHECK (--recheck-interval during the run, default 1m),
# CAPTF_SCALE_TIMEOUT (longest phase, default 20m), CAPTF_SCALE_STATE_KIB
# (size of each state Secret the node writes, default 4), CAPTF_SCALE_BREAKDOWN
# (1: requests of each phase by method and resource), CAPTF_SCALE_POOL_SETTLE
# (the pools idle that long before their idle window), CAPTF_SCALE_MANAGER_ARGS
# (more manager flags), CAPTF_SCALE_RESTART_SIGNAL (TERM, the default, as a
# rollout stops the manager; or KILL).
set -euo pipefail
cd "$(dirname "$0")/.."

export KUBEBUILDER_ASSETS="${KUBEBUILDER_ASSETS:-$(hack/install-envtest.sh)}"
export CAPTF_CAPI_CRDS="${CAPTF_CAPI_CRDS:-$(hack/install-capi-crds.sh)}"
[[ $# -gt 0 ]] || set -- 100 500
for n in "$@"; do
  if ! [[ "$n" =~ ^[1-9][0-9]*$ ]]; then
    echo "scale.sh: $n is not a number of TerraformClusters" >&2
    exit 2
  fi
done
for n in "$@"; do
  log="$(mktemp -t captf-scale-"$n".XXXXXX)"
  echo "N=$n (full output: $log)"
  if ! CAPTF_SCALE_N="$n" go test -count=1 -v -timeout 120m -run '^TestScale$' ./test/scale >"$log" 2>&1; then
    tail -40 "$log" >&2
    exit 1
  fi
  grep '^scale: ' "$log"
done
