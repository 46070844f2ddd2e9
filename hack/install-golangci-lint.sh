#!/usr/bin/env bash
# install-golangci-lint.sh prints the path of golangci-lint, installing it
# from the Go module proxy into the cache on first use.
set -euo pipefail
version="${GOLANGCI_LINT_VERSION:-v2.15.0}"
cache="${CAPTF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/captf}"
dest="$cache/golangci-lint/$version"
if [[ ! -x "$dest/golangci-lint" ]]; then
  echo "installing golangci-lint $version" >&2
  GOBIN="$dest" go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$version"
fi
echo "$dest/golangci-lint"
