#!/usr/bin/env bash
# bench.sh runs the fingerprint benchmarks and prints, from one run on the
# same bytes, the fingerprint's throughput as a ratio of crypto/sha256's
# (a floor: at least 0.2), without and with Detail (what the CLI runs), and
# the peak memory of working on the generated 100,000-change plan (goal: at
# most 64 MB): fingerprinting it as a stream, with Detail, and all that
# `captf plan` and a refused `captf apply` do with it (internal/planstore).
# Then hack/bench-plan.sh: what a user waits for, `captf plan` against a
# plain `terraform plan` of the same root (goal: at most 1.2 times).
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(go test -run '^$' -bench . -benchtime "${BENCHTIME:-5x}" ./pkg/fingerprint ./internal/planstore)"
echo "$out"
echo
echo "$out" | awk '
  /^pkg: / { pkg = $2; sub(/.*\/captf\/captf\//, "", pkg) }
  /^Benchmark/ { name = $1; sub(/-[0-9]+$/, "", name)
    for (i = 2; i < NF; i++) {
      if ($(i+1) == "MB/s") speed[name] = $i
      if ($(i+1) == "peak-RSS-MB") rss[pkg " " name] = $i
    } }
  END {
    for (plan in speed) {
      if (plan !~ /\/(fingerprint|detail)$/) continue
      base = plan; sub(/\/[a-z]+$/, "", base)
      kind = plan; sub(/.*\//, "", kind)
      printf "%-40s %-11s %8.1f MB/s  sha256 %8.1f MB/s  ratio %.2f (floor >= 0.20)\n", base, kind, speed[plan], speed[base "/sha256"], speed[plan] / speed[base "/sha256"]
    }
    for (r in rss) printf "%-70s peak RSS %.1f MB (goal <= 64)\n", r, rss[r]
  }' | sort
echo
hack/bench-plan.sh
