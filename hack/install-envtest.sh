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
  echo "building kube-apiserver $kube from the Go module proxy" >&2
  dir="$(go mod download -json "k8s.io/kubernetes@$kube" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
  [[ -n "$dir" ]] || { echo "install-envtest: cannot download k8s.io/kubernetes@$kube" >&2; exit 1; }
  cp -r "$dir" "$work/kubernetes"
  chmod -R u+w "$work/kubernetes"
  (
    cd "$work/kubernetes"
    rm -rf vendor go.work go.work.sum
    # The staging modules are published on their own as v0.<minor>.<patch>:
    # drop the replaces that point into ./staging and require those.
    staged="v0.${kube#v1.}"
    go mod edit -json >"$work/gomod.json"
    python3 - "$work/gomod.json" "$staged" >"$work/edits" <<'PY'
import json, sys
mod = json.load(open(sys.argv[1]))
staged = sys.argv[2]
for r in mod.get("Replace") or []:
    new = r.get("New", {})
    if new.get("Path", "").startswith("./staging/"):
        print(f"-dropreplace={r['Old']['Path']}")
for q in mod.get("Require") or []:
    if q["Path"].startswith("k8s.io/") and q["Version"] == "v0.0.0":
        print(f"-require={q['Path']}@{staged}")
PY
    xargs go mod edit <"$work/edits"
    GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$kube -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${kube#v1.}" \
      -o "$dest/kube-apiserver.tmp" ./cmd/kube-apiserver
  )
  mv "$dest/kube-apiserver.tmp" "$dest/kube-apiserver"
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
