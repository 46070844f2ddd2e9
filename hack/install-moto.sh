#!/usr/bin/env bash
# install-moto.sh prints the path of a moto_server (moto 5.2.1, which the
# cfn-deploy tests run as a real CloudFormation endpoint on 127.0.0.1),
# installing it with pip when it is missing. The machine image has it.
set -euo pipefail
want=5.2.1
if bin="$(command -v moto_server 2>/dev/null)"; then
  echo "$bin"
  exit 0
fi
echo "moto_server not found: installing moto[server]==$want with pip" >&2
python3 -m pip install --quiet "moto[server]==$want" >&2
bin="$(command -v moto_server)" || { echo "moto_server still not on PATH after pip install" >&2; exit 1; }
echo "$bin"
