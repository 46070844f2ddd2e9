#!/usr/bin/env bash
# install-capi-crds.sh prints the folder of Cluster API's own CRDs (Cluster,
# ClusterClass, Machine, …) of the release captf's contract tests run
# against, fetching the sigs.k8s.io/cluster-api module through the Go
# module proxy into the module cache when it is not there yet. The tests
# install them into the test API server beside captf's CRDs.
set -euo pipefail
version="${CAPI_VERSION:-v1.14.2}"
dir="$(cd "$(dirname "$0")/.." && go mod download -json "sigs.k8s.io/cluster-api@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
crds="$dir/core/config/crd/bases"
[[ -f "$crds/cluster.x-k8s.io_clusters.yaml" ]] || { echo "no Cluster CRD in $crds" >&2; exit 1; }
echo "$crds"
