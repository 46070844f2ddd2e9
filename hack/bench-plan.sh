#!/usr/bin/env bash
# bench-plan.sh measures what a user waits for: `captf plan` against a plain
# `terraform plan` of the same root, each run as a whole process. It builds
# captf, generates roots of N terraform_data resources (built in: no
# provider, no network; an empty state, so every resource is a create),
# initialises each once, runs one warm-up of each command, then RUNS (7)
# of each, alternating so both see the same load, and prints the medians
# and their ratio (goal: at most 1.2), and the same of their CPU time.
# It exits 1 when the wall-time ratio of a size is over the goal (GOAL).
#
#   SIZES="300 2000" RUNS=7 GOAL=1.2 CAPTF_TERRAFORM=/usr/local/bin/terraform hack/bench-plan.sh
set -euo pipefail
cd "$(dirname "$0")/.."
sizes="${SIZES:-300 2000}"
runs="${RUNS:-7}"
goal="${GOAL:-1.2}"
failed=""
tf="${CAPTF_TERRAFORM:-$(hack/install-terraform.sh)}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
go build -o "$work/captf" ./cmd/captf
printf 'disable_checkpoint = true\n' >"$work/cli.rc"
export TF_CLI_CONFIG_FILE="$work/cli.rc" CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1 TF_INPUT=0

root() { # dir n
  mkdir -p "$1"
  cat >"$1/main.tf" <<TF
variable "gen" {
  type    = number
  default = 1
}
resource "terraform_data" "r" {
  count = $2
  input = {
    name  = "r-\${count.index}"
    gen   = var.gen
    tags  = { env = "prod", team = "t\${count.index % 7}" }
    ports = [80, 443, 8000 + count.index]
  }
  triggers_replace = count.index % 10 == 0 ? var.gen : 0
}
output "count" { value = length(terraform_data.r) }
TF
  (cd "$1" && "$tf" init -input=false >/dev/null)
}

# seconds runs the command in dir as a whole process and prints its wall
# time and its CPU time (user and system, its children's included): on a
# loaded machine the CPU time varies less than the wall time.
seconds() { # dir command...
  local dir="$1" t
  shift
  t="$( { TIMEFORMAT='%R %U %S'; time (cd "$dir" && "$@" >/dev/null 2>&1) || { echo "failed: $*" >&3; exit 1; }; } 2>&1)"
  awk -v t="$t" 'BEGIN { split(t, f, " "); printf "%.3f %.3f\n", f[1], f[2] + f[3] }'
}

exec 3>&2
median() { # column
  awk -v c="$1" '{ print $c }' | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

echo "plan speed: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), $("$tf" version | head -1), $runs runs each after one warm-up"
for n in $sizes; do
  dir="$work/root-$n"
  root "$dir" "$n"
  plain=(env "$tf" plan -input=false)
  ours=(env "$work/captf" plan --binary "$tf" .)
  seconds "$dir" "${plain[@]}" >/dev/null
  seconds "$dir" "${ours[@]}" >/dev/null
  : >"$work/tf.txt"
  : >"$work/captf.txt"
  for _ in $(seq "$runs"); do
    seconds "$dir" "${plain[@]}" >>"$work/tf.txt"
    seconds "$dir" "${ours[@]}" >>"$work/captf.txt"
  done
  t="$(median 1 <"$work/tf.txt")"
  c="$(median 1 <"$work/captf.txt")"
  tc="$(median 2 <"$work/tf.txt")"
  cc="$(median 2 <"$work/captf.txt")"
  awk -v n="$n" -v t="$t" -v c="$c" -v tc="$tc" -v cc="$cc" -v goal="$goal" -v load="$(cut -d' ' -f1 /proc/loadavg)" \
    -v tr="$(awk '{ printf "%s ", $1 }' "$work/tf.txt")" -v cr="$(awk '{ printf "%s ", $1 }' "$work/captf.txt")" 'BEGIN {
    printf "plan %5d resources: terraform plan %7.2f s  captf plan %7.2f s  ratio %.2f (goal <= %.2f) %s\n", n, t, c, c / t, goal, (c / t <= goal ? "met" : "NOT MET")
    printf "  CPU time (user+sys):  terraform plan %7.2f s  captf plan %7.2f s  ratio %.2f\n", tc, cc, cc / tc
    printf "  terraform plan runs: %s\n  captf plan runs:     %s\n  load at the end: %s\n", tr, cr, load }'
  if ! awk -v t="$t" -v c="$c" -v goal="$goal" 'BEGIN { exit !(c / t <= goal) }'; then
    failed="$failed $n"
  fi
done
if [ -n "$failed" ]; then
  echo "plan speed: goal (ratio <= $goal) not met at$failed resources"
  exit 1
fi
