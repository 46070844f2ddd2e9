#!/usr/bin/env bash
# install-kubectl.sh builds kubectl from the Go module proxy into a cache
# outside the repository, keyed by its version and Go's, and prints the
# binary's path. A cached binary is reused. kubectl's own main lives in
# k8s.io/kubernetes, which go install refuses (replace directives); its
# command is the published module k8s.io/kubectl, so a three-line main
# around it builds with plain go build (about a minute with a warm module cache on 2 cores).
# Any kubectl works against the sandbox (make sandbox); this is one way to
# get one that matches its API server.
set -euo pipefail
kube="${KUBE_VERSION:-v1.36.3}"
gover="$(go env GOVERSION)"
cache="${CAPTF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/captf}"
dest="$cache/kubectl/$kube-$gover-$(go env GOOS)-$(go env GOARCH)"

if [[ -x "$dest/kubectl" ]]; then
  echo "$dest/kubectl"
  exit 0
fi
mkdir -p "$dest"
work="$(mktemp -d)"
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

echo "building kubectl $kube from the Go module proxy" >&2
cd "$work"
cat >main.go <<'GO'
// Command kubectl is kubectl's own main, built from the Go module proxy.
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	if err := cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand()); err != nil {
		util.CheckErr(err)
	}
}
GO
go mod init captf.test/kubectl >/dev/null 2>&1
minor="${kube#v1.}"
minor="${minor%%.*}"
staged="v0.${kube#v1.}"
go mod edit -require="k8s.io/kubectl@$staged" -require="k8s.io/component-base@$staged"
GOFLAGS=-mod=mod go mod tidy >/dev/null
GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath \
  -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$kube -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor" \
  -o "$dest/kubectl.tmp" .
mv "$dest/kubectl.tmp" "$dest/kubectl"
"$dest/kubectl" version --client >&2
echo "$dest/kubectl"
