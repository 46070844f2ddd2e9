#!/usr/bin/env bash
# install-tofu.sh builds OpenTofu from the Go module proxy into a cache outside
# the repository, keyed by version, and prints the binary's path. A cached
# binary is reused. A plain `go install` is refused (tofu's go.mod replaces
# hashicorp/hcl/v2), so the module is downloaded, copied and built in place.
set -euo pipefail

version="${TOFU_VERSION:-v1.12.6}"
cache="${CAPTF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/captf}"
dest="$cache/tofu/$version/$(go env GOOS)-$(go env GOARCH)"
bin="$dest/tofu"

if [[ -x "$bin" ]] && "$bin" version >/dev/null 2>&1; then
  echo "$bin"
  exit 0
fi

echo "building OpenTofu $version (15-20 minutes cold)" >&2
dir="$(go mod download -json "github.com/opentofu/opentofu@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
[[ -n "$dir" ]] || { echo "install-tofu: cannot download github.com/opentofu/opentofu@$version" >&2; exit 1; }

work="$(mktemp -d)"
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
cp -r "$dir" "$work/src"
chmod -R u+w "$work/src"
mkdir -p "$dest"
(cd "$work/src" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/opentofu/opentofu/version.dev=no" -o "$dest/tofu.tmp" ./cmd/tofu)
mv "$dest/tofu.tmp" "$bin"
"$bin" version >&2
echo "$bin"
