#!/usr/bin/env bash
# verify-generated.sh fails when a generated file (deepcopy, CRDs) is not
# what controller-gen makes from the markers: generated files are never
# edited by hand (make generate).
set -euo pipefail
cd "$(dirname "$0")/.."
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp -r api config "$tmp/"
make -s generate
if ! diff -r "$tmp/api" api >/dev/null || ! diff -r "$tmp/config" config >/dev/null; then
  diff -r "$tmp/api" api || true
  diff -r "$tmp/config" config || true
  rm -rf api config && cp -r "$tmp/api" "$tmp/config" .
  echo "generated files are stale: run make generate and commit" >&2
  exit 1
fi
