#!/usr/bin/env bash
# install-chromium.sh prints the path of a Chromium for the browser tests
# of kubectl captf review (test/review), installing Debian's package with
# apt-get when none is there. $CAPTF_CHROMIUM, when set, is used as given.
set -euo pipefail
if [[ -n "${CAPTF_CHROMIUM:-}" ]]; then
  echo "$CAPTF_CHROMIUM"
  exit 0
fi
for path in /usr/bin/chromium /usr/bin/chromium-browser; do
  if [[ -x "$path" ]]; then
    echo "$path"
    exit 0
  fi
done
echo "installing chromium with apt-get" >&2
apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >&2
echo /usr/bin/chromium
