#!/usr/bin/env bash
# build-kube.sh DEST COMMAND... builds the named commands of
# k8s.io/kubernetes (kube-apiserver, kubelet, …) at $KUBE_VERSION from the
# Go module proxy into DEST, in one go build so that they share its work.
# `go install` is refused (the module replaces its staging modules with
# folders): the module is copied, those replaces are dropped and the
# staging modules required at their published versions. The recipe is the
# one measured in ../shared/design/TESTING.md.
set -euo pipefail
kube="${KUBE_VERSION:-v1.36.3}"
dest="$1"
shift
[[ $# -gt 0 ]] || { echo "usage: build-kube.sh DEST COMMAND..." >&2; exit 2; }
for tool in go python3; do
  command -v "$tool" >/dev/null || { echo "build-kube: $tool is not installed" >&2; exit 1; }
done
mkdir -p "$dest"
work="$(mktemp -d)"
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

echo "building $* $kube from the Go module proxy" >&2
dir="$(go mod download -json "k8s.io/kubernetes@$kube" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[[ -n "$dir" ]] || { echo "build-kube: cannot download k8s.io/kubernetes@$kube" >&2; exit 1; }
cp -r "$dir" "$work/kubernetes"
chmod -R u+w "$work/kubernetes"
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
pkgs=()
for cmd in "$@"; do pkgs+=("./cmd/$cmd"); done
mkdir -p "$work/out"
GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath \
  -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$kube -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${kube#v1.}" \
  -o "$work/out/" "${pkgs[@]}"
# A binary appears under its name whole, or not at all.
for cmd in "$@"; do
  cp "$work/out/$cmd" "$dest/$cmd.tmp"
  mv "$dest/$cmd.tmp" "$dest/$cmd"
done
