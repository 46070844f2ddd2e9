#!/usr/bin/env bash
# gen-testplans.sh regenerates the real plan documents in
# pkg/fingerprint/testdata/plans: the fuzz seeds and the benchmark's real
# 2,000-resource plan. They are made by the real terraform (and tofu), from
# roots that hold no secret. Run it when the roots change; it takes about
# two minutes (terraform applies 2,000 terraform_data resources).
set -euo pipefail
cd "$(dirname "$0")/.."
out=pkg/fingerprint/testdata/plans
mkdir -p "$out"
tofu="$(hack/install-tofu.sh)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
printf 'disable_checkpoint = true\n' >"$work/cli.rc"
export TF_CLI_CONFIG_FILE="$work/cli.rc" CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1 TF_INPUT=0

golden() { # binary name
  local dir="$work/golden-$2"
  cp -r internal/cli/testdata/roots/golden/v1 "$dir"
  (cd "$dir" && "$1" init -input=false >/dev/null && "$1" apply -auto-approve -input=false >/dev/null)
  cp internal/cli/testdata/roots/golden/v2/main.tf "$dir/main.tf"
  (cd "$dir" && "$1" plan -input=false -out=plan.bin >/dev/null && "$1" show -json plan.bin) >"$out/golden-$2.json"
}
golden terraform terraform
golden "$tofu" tofu

canary="$work/canary"
cp -r internal/cli/testdata/roots/canary "$canary"
(cd "$canary" && terraform init -input=false >/dev/null && terraform plan -input=false -out=plan.bin >/dev/null && terraform show -json plan.bin) >"$out/canary-terraform.json"

# 2,000 resources applied, then a plan that updates, replaces and deletes.
big="$work/big"
mkdir -p "$big"
cat >"$big/main.tf" <<'TF'
variable "gen" {
  type    = number
  default = 1
}
variable "n" {
  type    = number
  default = 2000
}
resource "terraform_data" "r" {
  count = var.n
  input = {
    name  = "r-${count.index}"
    gen   = var.gen
    tags  = { env = "prod", team = "t${count.index % 7}", gen = tostring(var.gen) }
    ports = [80, 443, 8000 + count.index]
  }
  triggers_replace = count.index % 10 == 0 ? var.gen : 0
}
output "count" { value = length(terraform_data.r) }
TF
(cd "$big" && terraform init -input=false >/dev/null && terraform apply -auto-approve -input=false >/dev/null &&
  terraform plan -input=false -var gen=2 -var n=1900 -out=plan.bin >/dev/null && terraform show -json plan.bin) | gzip -9 >"$out/real-2000.json.gz"
ls -la "$out"
