#!/usr/bin/env bash
# install-kubenode.sh installs what a real one-node cluster needs beside
# kube-apiserver and etcd (hack/install-envtest.sh): kubelet,
# kube-controller-manager and kube-scheduler built from the Go module
# proxy, and containerd, its runc shim, runc and the CNI loopback plugin
# unpacked from Debian's packages (not installed). Everything goes into one
# folder of the cache outside the repository, keyed by the Kubernetes and
# Go versions and the Debian release; cached files are reused. It prints
# the folder (internal/realnode reads it as $CAPTF_KUBENODE).
#
# The node runs as root on Linux with cgroups: those and every host tool
# are checked first, and a missing one fails with its cause. The recipe is
# the one measured in ../shared/design/TESTING.md ("A real node").
set -euo pipefail
fail() { echo "install-kubenode: $*" >&2; exit 1; }

kube="${KUBE_VERSION:-v1.36.3}"
[[ "$(uname -s)" == Linux ]] || fail "a node needs Linux, this is $(uname -s)"
[[ "$(id -u)" == 0 ]] || fail "a node runs as root (containerd, kubelet, mounts, cgroups); this is uid $(id -u)"
[[ -d /sys/fs/cgroup/memory || -f /sys/fs/cgroup/cgroup.controllers ]] ||
  fail "no cgroup filesystem under /sys/fs/cgroup (neither v1's memory controller nor v2)"
for tool in go python3 apt-get dpkg-deb sh; do
  command -v "$tool" >/dev/null || fail "$tool is not installed"
done
# Debian's runc is linked against libseccomp.
if ! ldconfig -p | grep -q 'libseccomp\.so\.2'; then
  echo "installing libseccomp2 (runc needs it)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libseccomp2 >&2 || fail "cannot install libseccomp2 with apt-get"
fi

gover="$(go env GOVERSION)"
codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-unknown}")"
cache="${CAPTF_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/captf}"
dest="$cache/kubenode/kube-$kube-$gover-debian-$codename-$(go env GOOS)-$(go env GOARCH)"
mkdir -p "$dest"

debbins=(containerd containerd-shim-runc-v2 ctr runc loopback)
need=0
for b in "${debbins[@]}"; do
  [[ -x "$dest/$b" ]] || need=1
done
if [[ $need == 1 ]]; then
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  chmod 755 "$work" # apt's download user writes here
  pkgs=(containerd runc containernetworking-plugins)
  echo "downloading ${pkgs[*]} from Debian's packages" >&2
  if ! (cd "$work" && apt-get download -qq "${pkgs[@]}" >&2 2>/dev/null); then
    apt-get update -qq >&2 || fail "apt-get update failed"
    (cd "$work" && apt-get download -qq "${pkgs[@]}" >&2) || fail "apt-get download ${pkgs[*]} failed"
  fi
  : >"$work/versions"
  for deb in "$work"/*.deb; do
    dpkg-deb -x "$deb" "$work/root"
    echo "$(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version)" >>"$work/versions"
  done
  for f in usr/bin/containerd usr/bin/containerd-shim-runc-v2 usr/bin/ctr usr/sbin/runc usr/lib/cni/loopback; do
    [[ -x "$work/root/$f" ]] || fail "the packages hold no $f"
    cp "$work/root/$f" "$dest/$(basename "$f").tmp"
    mv "$dest/$(basename "$f").tmp" "$dest/$(basename "$f")"
  done
  cp "$work/versions" "$dest/debian-packages"
fi

kubebins=(kubelet kube-controller-manager kube-scheduler)
missing=()
for b in "${kubebins[@]}"; do
  [[ -x "$dest/$b" ]] || missing+=("$b")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  KUBE_VERSION="$kube" "$(dirname "$0")/build-kube.sh" "$dest" "${missing[@]}"
fi

"$dest/kubelet" --version >&2
"$dest/containerd" --version >&2
"$dest/runc" --version | head -1 >&2
echo "$dest"
