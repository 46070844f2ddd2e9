#!/usr/bin/env bash
# build-module-binary.sh MODULE VERSION PACKAGE NAME [LDFLAGS]
#
# Builds the command PACKAGE of Go module MODULE@VERSION from the Go module
# proxy into a cache outside the repository, keyed by name, version and
# platform, and prints the binary's path. A cached binary is reused. Modules
# whose go.mod has replace directives (OpenTofu) refuse a plain
# `go install`, so the module is downloaded, copied and built in place.
set -euo pipefail
module="$1" version="$2" pkg="$3" name="$4" ldflags="${5:-}"
cache="${CAPTF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/captf}"
dest="$cache/$name/$version/$(go env GOOS)-$(go env GOARCH)"
bin="$dest/$name"

if [[ -x "$bin" ]] && TF_CLI_CONFIG_FILE=/dev/null "$bin" version >/dev/null 2>&1; then
  echo "$bin"
  exit 0
fi

echo "building $name $version from the Go module proxy (10-20 minutes cold)" >&2
dir="$(go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[[ -n "$dir" ]] || { echo "build-module-binary: cannot download $module@$version" >&2; exit 1; }

work="$(mktemp -d)"
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
cp -r "$dir" "$work/src"
chmod -R u+w "$work/src"
mkdir -p "$dest"
(cd "$work/src" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $ldflags" -o "$dest/$name.tmp" "$pkg")
mv "$dest/$name.tmp" "$bin"
TF_CLI_CONFIG_FILE=/dev/null "$bin" version >&2
echo "$bin"
