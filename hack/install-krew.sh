#!/usr/bin/env bash
# install-krew.sh prints the path of krew (kubectl's plugin manager),
# building it from the Go module proxy into the cache on first use. The
# release test installs kubectl-captf's plugin with it, as a user does.
set -euo pipefail
version="${KREW_VERSION:-v0.4.3}"
cache="${CAPTF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/captf}"
dest="$cache/krew/$version"
if [[ ! -x "$dest/krew" ]]; then
  echo "installing krew $version" >&2
  GOBIN="$dest" go install "sigs.k8s.io/krew/cmd/krew@$version"
fi
echo "$dest/krew"
