#!/usr/bin/env bash
# bench.sh runs the fingerprint benchmarks and prints the fingerprint's
# throughput as a ratio of crypto/sha256's on the same bytes (a floor: at
# least 0.2), and for information the same with Detail (what the CLI runs,
# which has no floor), and the peak memory of working on the generated
# 100,000-change plan (goal: at most 64 MB): fingerprinting it as a stream,
# with Detail, and all that `captf plan` and a refused `captf apply` do
# with it (internal/planstore). Each benchmark runs COUNT (3) times; a
# throughput is the best of them and a peak the worst, so that a moment of
# load on a shared machine does not decide a ratio.
# Then hack/bench-plan.sh: what a user waits for, `captf plan` against a
# plain `terraform plan` of the same root, at 300 and 2,000 resources
# (goal: at most 1.2 times, in wall time).
# It runs everything, then exits 1 when a floor or goal is not met, naming
# it.
set -euo pipefail
cd "$(dirname "$0")/.."
# -p 1: one package's benchmarks at a time, so that neither runs beside the
# other on this machine's two cores.
out="$(go test -p 1 -run '^$' -bench . -benchtime "${BENCHTIME:-5x}" -count "${COUNT:-3}" ./pkg/fingerprint ./internal/planstore)"
echo "$out"
echo
summary="$(echo "$out" | awk '
  /^pkg: / { pkg = $2; sub(/.*\/captf\/captf\//, "", pkg) }
  /^Benchmark/ { name = $1; sub(/-[0-9]+$/, "", name)
    for (i = 2; i < NF; i++) {
      if ($(i+1) == "MB/s" && $i > speed[name]) speed[name] = $i
      if ($(i+1) == "peak-RSS-MB" && $i > rss[pkg " " name]) rss[pkg " " name] = $i
    } }
  END {
    for (plan in speed) {
      if (plan !~ /\/(fingerprint|detail)$/) continue
      base = plan; sub(/\/[a-z]+$/, "", base)
      kind = plan; sub(/.*\//, "", kind)
      ratio = speed[plan] / speed[base "/sha256"]
      verdict = "(for information)"
      if (kind == "fingerprint") verdict = (ratio >= 0.2 ? "(floor >= 0.20) met" : "(floor >= 0.20) NOT MET")
      printf "%-40s %-11s %8.1f MB/s  sha256 %8.1f MB/s  ratio %.2f %s\n", base, kind, speed[plan], speed[base "/sha256"], ratio, verdict
    }
    for (r in rss) printf "%-70s peak RSS %.1f MB (goal <= 64) %s\n", r, rss[r], (rss[r] <= 64 ? "met" : "NOT MET")
  }' | sort)"
echo "$summary"
failed=""
if ! grep -q "floor" <<<"$summary" || ! grep -q "peak RSS" <<<"$summary"; then
  failed="the fingerprint benchmarks printed no ratio or no peak"
elif grep -q "NOT MET" <<<"$summary"; then
  failed="fingerprint speed or memory"
fi
echo
if ! hack/bench-plan.sh; then
  failed="${failed:+$failed, }plan speed"
fi
echo
if [ -n "$failed" ]; then
  echo "make bench: not met: $failed"
  exit 1
fi
echo "make bench: every floor and goal met"
