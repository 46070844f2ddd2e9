#!/usr/bin/env bash
# install-gcloud-emulator.sh pubsub|spanner prints the path of Google's
# Pub/Sub or Spanner emulator, which the gcp-apply tests run as real REST
# servers on 127.0.0.1. Both come with the Google Cloud CLI's Debian
# packages (google-cloud-cli-pubsub-emulator, which needs Java, and
# google-cloud-cli-spanner-emulator), which the machine image carries.
# Debian's own archive does not have them and Google's package repository
# is not reachable from here, so where they are missing the script tries
# apt-get (which works only where Google's repository is configured) and
# fails otherwise: the tests need them.
set -euo pipefail
case "${1:-}" in
  pubsub)
    bin=/usr/lib/google-cloud-sdk/platform/pubsub-emulator/bin/cloud-pubsub-emulator
    pkg=google-cloud-cli-pubsub-emulator ;;
  spanner)
    bin=/usr/lib/google-cloud-sdk/bin/cloud_spanner_emulator/gateway_main
    pkg=google-cloud-cli-spanner-emulator ;;
  *)
    echo "usage: $0 pubsub|spanner" >&2
    exit 2 ;;
esac
if [[ ! -x "$bin" ]]; then
  echo "$bin not found: trying apt-get install $pkg" >&2
  apt-get install -y -q "$pkg" >&2 || { echo "install-gcloud-emulator: $pkg cannot be installed here; the gcp-apply tests need it" >&2; exit 1; }
fi
if [[ "$1" == pubsub ]] && ! command -v java >/dev/null; then
  echo "java not found: installing default-jre-headless for the Pub/Sub emulator" >&2
  apt-get install -y -q default-jre-headless >&2
fi
echo "$bin"
