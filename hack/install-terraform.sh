#!/usr/bin/env bash
# install-terraform.sh prints the path of the terraform binary for the tests.
# The machine image carries terraform v1.11.4 at /usr/local/bin/terraform.
# It cannot be built here instead: terraform's module on the Go module proxy
# leaves out the nested backend modules its go.mod replaces (measured with
# v1.11.4), and its release downloads are not reachable.
set -euo pipefail
if p="$(command -v terraform)"; then
  echo "$p"
  exit 0
fi
echo "install-terraform: terraform is not on PATH; the tests need it (docs/dev/README.md)" >&2
exit 1
