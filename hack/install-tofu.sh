#!/usr/bin/env bash
# install-tofu.sh prints the path of an OpenTofu binary for the tests,
# building it from the Go module proxy into the cache on first use.
set -euo pipefail
exec "$(dirname "$0")/build-module-binary.sh" github.com/opentofu/opentofu "${TOFU_VERSION:-v1.12.6}" ./cmd/tofu tofu \
  "-X github.com/opentofu/opentofu/version.dev=no"
