#!/usr/bin/env bash
# install-ci-tools.sh makes sure the tools the CI examples' script
# (examples/ci/captf-preview.sh) calls are on PATH — bash, curl, jq, git,
# base64 — installing the missing ones from Debian's packages. test/ci runs
# that script as the runners would.
set -euo pipefail
missing=()
for tool in curl jq git base64; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0
echo "installing ${missing[*]} with apt-get" >&2
pkgs=()
for tool in "${missing[@]}"; do
  case "$tool" in base64) pkgs+=(coreutils) ;; *) pkgs+=("$tool") ;; esac
done
apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >&2
