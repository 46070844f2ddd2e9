#!/usr/bin/env bash
# test.sh runs every test of the repository with the real parts they need,
# installing what is missing first: terraform (on the machine image),
# OpenTofu, kube-apiserver and etcd (built from the Go module proxy and
# cached outside the repository), moto_server (on the machine image, else
# pip), the Pub/Sub and Spanner emulators (on the machine image),
# fake-gcs-server (built from the Go module proxy and cached), curl and jq
# for the CI examples and Chromium for the review page's browser tests (apt
# when missing), and a real node's parts: kubelet, kube-controller-manager
# and kube-scheduler (built and cached like kube-apiserver), containerd,
# runc and the CNI loopback plugin (from Debian's packages), and krew (built
# from the Go module proxy and cached) for the plugin's install. A missing part
# fails the run; no test skips.
set -euo pipefail
cd "$(dirname "$0")/.."

export CAPTF_TERRAFORM="${CAPTF_TERRAFORM:-$(hack/install-terraform.sh)}"
export CAPTF_TOFU="${CAPTF_TOFU:-$(hack/install-tofu.sh)}"
export KUBEBUILDER_ASSETS="${KUBEBUILDER_ASSETS:-$(hack/install-envtest.sh)}"
export CAPTF_MOTO_SERVER="${CAPTF_MOTO_SERVER:-$(hack/install-moto.sh)}"
export CAPTF_PUBSUB_EMULATOR="${CAPTF_PUBSUB_EMULATOR:-$(hack/install-gcloud-emulator.sh pubsub)}"
export CAPTF_SPANNER_EMULATOR="${CAPTF_SPANNER_EMULATOR:-$(hack/install-gcloud-emulator.sh spanner)}"
export CAPTF_FAKE_GCS_SERVER="${CAPTF_FAKE_GCS_SERVER:-$(hack/install-fake-gcs.sh)}"
hack/install-ci-tools.sh
export CAPTF_CAPI_CRDS="${CAPTF_CAPI_CRDS:-$(hack/install-capi-crds.sh)}"
export CAPTF_CHROMIUM="$(hack/install-chromium.sh)"
export CAPTF_KUBENODE="${CAPTF_KUBENODE:-$(hack/install-kubenode.sh)}"
export CAPTF_KREW="${CAPTF_KREW:-$(hack/install-krew.sh)}"
echo "terraform: $CAPTF_TERRAFORM ($(TF_CLI_CONFIG_FILE=/dev/null "$CAPTF_TERRAFORM" version | head -1))"
echo "tofu:      $CAPTF_TOFU ($(TF_CLI_CONFIG_FILE=/dev/null "$CAPTF_TOFU" version | head -1))"
echo "envtest:   $KUBEBUILDER_ASSETS"
echo "moto:      $CAPTF_MOTO_SERVER"
echo "pubsub:    $CAPTF_PUBSUB_EMULATOR"
echo "spanner:   $CAPTF_SPANNER_EMULATOR"
echo "fake-gcs:  $CAPTF_FAKE_GCS_SERVER"
echo "capi:      $CAPTF_CAPI_CRDS"
echo "chromium:  $CAPTF_CHROMIUM ($("$CAPTF_CHROMIUM" --version 2>/dev/null | head -1))"
echo "kubenode:  $CAPTF_KUBENODE"
echo "krew:      $CAPTF_KREW"

unformatted="$(gofmt -l .)"
if [[ -n "$unformatted" ]]; then
  echo "not gofmt-ed:" $unformatted >&2
  exit 1
fi
hack/verify-generated.sh
go vet ./...
# The manager's packages run for minutes against a real API server:
# more than go test's default 10 minutes per package on a busy machine
# (internal/controller/terraformcluster took 37 minutes of a fresh
# clone's 50 with other tests beside it).
go test -count=1 -timeout 60m "$@" ./...
