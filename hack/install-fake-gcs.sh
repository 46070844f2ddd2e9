#!/usr/bin/env bash
# install-fake-gcs.sh prints the path of fake-gcs-server, which the
# gcp-apply tests run as a real Cloud Storage JSON API on 127.0.0.1,
# building it from the Go module proxy into the cache on first use
# (about 7 minutes cold on 2 cores, 50 MB).
set -euo pipefail
version="${FAKE_GCS_VERSION:-v1.56.1}"
dir="${XDG_CACHE_HOME:-$HOME/.cache}/captf/fake-gcs-server/$version"
bin="$dir/fake-gcs-server"
if [[ -x "$bin" ]]; then
  echo "$bin"
  exit 0
fi
echo "fake-gcs-server $version not in $dir: building it with go install" >&2
mkdir -p "$dir"
GOBIN="$dir" GOFLAGS=-mod=mod go install -ldflags "-s -w" "github.com/fsouza/fake-gcs-server@$version" >&2
[[ -x "$bin" ]] || { echo "install-fake-gcs: $bin is missing after go install" >&2; exit 1; }
echo "$bin"
