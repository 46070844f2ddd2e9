#!/usr/bin/env bash
# build-test-provider.sh builds captftest, the terraform provider of captf's
# tests (internal/testprovider), into a filesystem mirror in the cache outside
# the repository, and prints the mirror directory. The tests build the same
# mirror themselves (tftest.Provider); this script is for a shell, e.g.
#
#   mirror="$(hack/build-test-provider.sh)"
#   cat > terraform.rc <<EOF
#   provider_installation {
#     filesystem_mirror {
#       path    = "$mirror"
#       include = ["example.com/captf/captftest"]
#     }
#   }
#   EOF
#   TF_CLI_CONFIG_FILE=terraform.rc terraform init
#
# An unchanged binary is not written again.
set -euo pipefail
cd "$(dirname "$0")/.."
source=example.com/captf/captftest
version=0.1.0
cache="${CAPTF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/captf}"
mirror="$cache/provider-mirror"
dest="$mirror/$source/$version/$(go env GOOS)_$(go env GOARCH)"
mkdir -p "$dest"
# The same lock as tftest.Provider's.
exec 9>"$mirror/.lock"
flock 9
CGO_ENABLED=0 go build -trimpath -o "$dest/terraform-provider-captftest_v$version" ./cmd/terraform-provider-captftest
echo "$mirror"
