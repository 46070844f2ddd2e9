#!/usr/bin/env bash
# install-envtest.sh builds kube-apiserver and etcd from the Go module proxy
# into a cache outside the repository, keyed by their versions and Go's, and
# prints the folder to use as KUBEBUILDER_ASSETS. Cached binaries are reused.
# envtest's usual download is not reachable here; the recipe is the one
# measured in ../shared/design/TESTING.md (10-23 minutes cold on 2 cores).
set -euo pipefail
kube="${KUBE_VERSION:-v1.36.3}"
etcd="${ETCD_VERSION:-v3.6.8}"
gover="$(go env GOVERSION)"
cache="${CAPTF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/captf}"
dest="$cache/envtest/kube-$kube-etcd-$etcd-$gover-$(go env GOOS)-$(go env GOARCH)"

if [[ -x "$dest/kube-apiserver" && -x "$dest/etcd" ]]; then
  echo "$dest"
  exit 0
fi
mkdir -p "$dest"
work="$(mktemp -d)"
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

if [[ ! -x "$dest/kube-apiserver" ]]; then
  KUBE_VERSION="$kube" "$(dirname "$0")/build-kube.sh" "$dest" kube-apiserver
fi

if [[ ! -x "$dest/etcd" ]]; then
  echo "building etcd $etcd from the Go module proxy" >&2
  mkdir -p "$work/etcd"
  (
    cd "$work/etcd"
    cat >main.go <<'GO'
// Command etcd is etcd's own main, built from the Go module proxy.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
    go mod init captf.test/etcd >/dev/null 2>&1
    go mod edit -require="go.etcd.io/etcd/server/v3@$etcd" \
      -require="go.etcd.io/etcd/api/v3@$etcd" \
      -require="go.etcd.io/etcd/client/pkg/v3@$etcd" \
      -require="go.etcd.io/etcd/client/v3@$etcd" \
      -require="go.etcd.io/etcd/pkg/v3@$etcd"
    GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 || true
    GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$dest/etcd.tmp" .
  )
  mv "$dest/etcd.tmp" "$dest/etcd"
fi
"$dest/kube-apiserver" --version >&2
"$dest/etcd" --version | head -1 >&2
echo "$dest"
