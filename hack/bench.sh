#!/usr/bin/env bash
# bench.sh runs the fingerprint benchmarks and prints, from one run on the
# same bytes, the fingerprint's throughput as a ratio of crypto/sha256's
# (goal: at least 0.5) and the peak memory of fingerprinting the generated
# 100,000-change plan (goal: at most 64 MB).
set -euo pipefail
cd "$(dirname "$0")/.."
out="$(go test -run '^$' -bench . -benchtime "${BENCHTIME:-5x}" ./pkg/fingerprint)"
echo "$out"
echo
echo "$out" | awk '
  /^Benchmark/ { name = $1; sub(/-[0-9]+$/, "", name)
    for (i = 2; i < NF; i++) {
      if ($(i+1) == "MB/s") speed[name] = $i
      if ($(i+1) == "peak-RSS-MB") rss[name] = $i
    } }
  END {
    for (plan in speed) {
      if (plan !~ /\/fingerprint$/) continue
      base = plan; sub(/\/fingerprint$/, "", base)
      printf "%-40s fingerprint %8.1f MB/s  sha256 %8.1f MB/s  ratio %.2f (goal >= 0.50)\n", base, speed[plan], speed[base "/sha256"], speed[plan] / speed[base "/sha256"]
    }
    for (r in rss) printf "%-40s peak RSS %.1f MB (goal <= 64)\n", r, rss[r]
  }'
