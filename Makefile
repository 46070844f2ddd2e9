# captf: make build, make test, make lint, make sandbox, make bench, make chaos.
.PHONY: all build generate test lint sandbox bench scale chaos fuzz testplans release-manifests images plugin release clean

all: build

build:
	go build -o bin/captf ./cmd/captf
	go build -o bin/captf-preview ./cmd/captf-preview
	go build -o bin/kubectl-captf ./cmd/kubectl-captf

# Deepcopy, CRDs, RBAC and webhook configurations from the markers in api/ (never edited by hand).
generate:
	go tool controller-gen object:headerFile="" paths=./api/...
	go tool controller-gen crd paths=./api/... output:crd:dir=config/crd/bases
	go tool controller-gen rbac:roleName=manager-role paths=./internal/controller/... output:rbac:dir=config/rbac
	go tool controller-gen webhook paths=./internal/webhook/... output:webhook:dir=config/webhook

# Every test, with the real terraform, tofu, kube-apiserver and etcd
# (installed by hack/ when missing). This is what CI runs (.ci/run).
test:
	hack/test.sh

lint:
	go vet ./...
	"$$(hack/install-golangci-lint.sh)" run ./...

# captf's Kubernetes flow on this machine, with no cluster: a real
# kube-apiserver and etcd, the manager binary and a node for the runner
# Jobs, examples/kubernetes applied. The node is a real one (kubelet,
# containerd, runc: pods from images) where the machine allows it (root,
# Linux; hack/install-kubenode.sh), else a local stand-in that runs the
# Jobs as processes; it says which. It prints the KUBECONFIG and the next
# commands; Ctrl-C stops it and removes what it made. The first run builds
# kube-apiserver, etcd and the node's binaries (hack/, cached). See
# docs/quickstart-kubernetes.md.
sandbox:
	@terraform="$${CAPTF_TERRAFORM:-$$(hack/install-terraform.sh)}" && \
	assets="$${KUBEBUILDER_ASSETS:-$$(hack/install-envtest.sh)}" && \
	capi="$${CAPTF_CAPI_CRDS:-$$(hack/install-capi-crds.sh)}" && \
	kubenode="$${CAPTF_KUBENODE:-$$(hack/install-kubenode.sh || true)}" && \
	go build -o bin/captf-sandbox ./cmd/captf-sandbox && \
	KUBEBUILDER_ASSETS="$$assets" CAPTF_KUBENODE="$$kubenode" exec bin/captf-sandbox --terraform "$$terraform" --capi-crds "$$capi"

# Throughput ratio to crypto/sha256, peak memory, and captf plan against
# terraform plan; see hack/bench.sh and hack/bench-plan.sh.
bench:
	hack/bench.sh

# The manager with many TerraformClusters under Manual, on the real API
# server: SCALE_N="100 500" by default; see hack/scale.sh and docs/dev/scale.md.
scale:
	hack/scale.sh $(SCALE_N)

# The whole fault matrix of the manager (test/chaos): every flow, every
# write, every fault kind; make test runs a bounded subset. See hack/chaos.sh.
chaos:
	hack/chaos.sh

# Fuzz the fingerprint, captf lint's reader and the log's redaction, for FUZZTIME (default 60s)
# each. Seeds are small, and a new input is minimized for at most
# FUZZMINIMIZETIME, so the time goes to fuzzing; failing inputs land in the
# package's testdata/fuzz and then run with every go test.
fuzz:
	go test ./pkg/fingerprint -run '^$$' -fuzz '^FuzzCompute$$' -fuzztime $${FUZZTIME:-60s} -fuzzminimizetime $${FUZZMINIMIZETIME:-10s}
	go test ./internal/modulelint -run '^$$' -fuzz '^FuzzCheck$$' -fuzztime $${FUZZTIME:-60s} -fuzzminimizetime $${FUZZMINIMIZETIME:-10s}
	go test ./internal/redact -run '^$$' -fuzz '^FuzzWriter$$' -fuzztime $${FUZZTIME:-60s} -fuzzminimizetime $${FUZZMINIMIZETIME:-10s}

# Regenerate the real plans in pkg/fingerprint/testdata/plans.
testplans:
	hack/gen-testplans.sh

# The files clusterctl reads from a release (infrastructure-components.yaml,
# metadata.yaml, the cluster templates of each flavor) in $(RELEASE_DIR), naming the images
# $(REGISTRY)/captf-manager:$(VERSION) and $(REGISTRY)/captf-runner:$(VERSION).
VERSION ?= v0.1.0
REGISTRY ?= ghcr.io/captf
RELEASE_DIR ?= dist
release-manifests:
	go run ./cmd/captf-release manifests --version $(VERSION) --registry $(REGISTRY) --out $(RELEASE_DIR)

# The manager and runner images, built with no container engine: static
# binaries stamped with $(VERSION) on scratch, one per platform of
# $(PLATFORMS), as OCI layouts in $(IMAGES_DIR)/captf-manager and
# $(IMAGES_DIR)/captf-runner, each index with its SBOM (SPDX JSON) attached
# as a referrer, also written as $(IMAGES_DIR)/<image>.spdx.json.
# Reproducible: every file, image and SBOM carries SOURCE_DATE_EPOCH (the
# last commit's time by default).
PLATFORMS ?= linux/amd64,linux/arm64
IMAGES_DIR ?= $(RELEASE_DIR)/images
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
export SOURCE_DATE_EPOCH
images:
	go run ./cmd/captf-release images --version $(VERSION) --platforms $(PLATFORMS) --out $(IMAGES_DIR)

# kubectl-captf's krew plugin in $(RELEASE_DIR)/plugin: a tar.gz per
# platform of $(PLUGIN_PLATFORMS) (the binary and the LICENSE) and
# captf.yaml, krew's manifest naming each archive under $(RELEASE_URL) with
# its sha256. Users install it with kubectl krew install --manifest-url
# (docs/kubectl-captf.md#install).
PLUGIN_PLATFORMS ?= linux/amd64,linux/arm64,darwin/amd64,darwin/arm64,windows/amd64
RELEASE_URL ?= https://github.com/captf/captf/releases/download/$(VERSION)
plugin:
	go run ./cmd/captf-release plugin --version $(VERSION) --url-base $(RELEASE_URL) --platforms $(PLUGIN_PLATFORMS) --out $(RELEASE_DIR)/plugin

# A whole release: the images pushed to $(REGISTRY) as
# $(REGISTRY)/captf-manager:$(VERSION) and $(REGISTRY)/captf-runner:$(VERSION)
# (over the registry API, with the credentials of docker login or crane
# auth login), each with its SBOM as a referrer, and the release files in
# $(RELEASE_DIR), the plugin in $(RELEASE_DIR)/plugin. Signing is by hand, with cosign: docs/dev/release.md#signing.
release: images release-manifests plugin
	go run ./cmd/captf-release push --version $(VERSION) --registry $(REGISTRY) --in $(IMAGES_DIR)

clean:
	rm -rf bin
