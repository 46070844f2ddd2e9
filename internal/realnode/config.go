package realnode

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// kubeletConfig is the KubeletConfiguration this sandbox needs (measured
// in ../shared/design/TESTING.md): cgroups v1 through cgroupfs, no
// eviction, no node allocatable enforcement, no OOM score changes (the
// sandbox refuses them), TLS with the node's certificates, any client the
// CA signed allowed (the API server, for logs and exec), and every file
// under the node's folder. It listens on every address: it registers the
// node with the host's own address when it finds one (else realnode sets
// 127.0.0.1), and the API server calls it there.
func (n *Node) kubeletConfig() string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 0.0.0.0
port: %d
readOnlyPort: 0
healthzPort: 0
tlsCertFile: %s
tlsPrivateKeyFile: %s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %s}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://%s
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
oomScoreAdj: 0
enforceNodeAllocatable: []
evictionHard: {}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
podLogsDirectory: %s
serializeImagePulls: false
staticPodPath: ""
`, n.ports.kubelet, n.pki.path(servingCert), n.pki.path(servingKey), n.pki.path(caFile),
		n.path(containerdSocket), n.path("pod-logs"))
}

// containerdConfig is containerd's configuration: root, state and socket
// under the node's folder, runc with cgroupfs, no AppArmor, OOM scores only
// lowered, network namespaces mounted under the state folder, the CNI
// folders of the node, the pause image from the node's registry, and that
// registry over plain HTTP.
func (n *Node) containerdConfig() string {
	reg := n.Registry
	return fmt.Sprintf(`version = 2
root = %q
state = %q
[grpc]
  address = %q
[ttrpc]
  address = %q
[plugins."io.containerd.internal.v1.opt"]
  path = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  disable_apparmor = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = %q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors.%q]
    endpoint = [%q]
`, n.path("containerd", "root"), n.path("containerd", "state"), n.path(containerdSocket), n.path(containerdSocket+".ttrpc"),
		n.path("containerd", "opt"), n.PauseImage, filepath.Join(n.assets.node, "runc"),
		n.path("cni", "bin"), n.path("cni", "conf"), reg, "http://"+reg)
}

// podIPPlugin is a CNI plugin that gives a pod a made-up address and
// touches nothing: with the loopback plugin before it, the node is Ready
// without a pod network. Every pod the node runs shares the host's
// network (hostNetworkPolicy), so no address it reports is ever used.
const podIPPlugin = `#!/bin/sh
# captf-pod-ip: a CNI plugin that reports a made-up pod address.
case "$CNI_COMMAND" in
ADD)
  cat >/dev/null
  printf '{"cniVersion":"0.4.0","interfaces":[{"name":"%s","sandbox":"%s"}],"ips":[{"version":"4","address":"10.88.0.2/24","interface":0}]}' "$CNI_IFNAME" "$CNI_NETNS"
  ;;
VERSION)
  printf '{"cniVersion":"0.4.0","supportedVersions":["0.3.0","0.3.1","0.4.0"]}'
  ;;
*)
  cat >/dev/null
  ;;
esac
`

const cniConfig = `{
  "cniVersion": "0.4.0",
  "name": "captf-realnode",
  "plugins": [{"type": "loopback"}, {"type": "captf-pod-ip"}]
}
`

// writeCNI writes the CNI configuration and plugins of the node.
func (n *Node) writeCNI() error {
	bin, conf := n.path("cni", "bin"), n.path("cni", "conf")
	for _, d := range []string{bin, conf} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := os.Symlink(filepath.Join(n.assets.node, "loopback"), filepath.Join(bin, "loopback")); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(bin, "captf-pod-ip"), []byte(podIPPlugin), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(conf, "10-captf.conflist"), []byte(cniConfig), 0o644)
}

// HostNetworkPolicy names the MutatingAdmissionPolicy (and its binding)
// that puts every pod on the host's network, with KUBERNETES_SERVICE_HOST
// and KUBERNETES_SERVICE_PORT naming the API server on 127.0.0.1: the
// node has no pod network, so a pod reaches the API server (terraform's
// kubernetes backend, in-cluster) only there.
const HostNetworkPolicy = "captf-realnode-host-network"

func hostNetworkPolicy(apiPort int) (*admissionregistrationv1.MutatingAdmissionPolicy, *admissionregistrationv1.MutatingAdmissionPolicyBinding) {
	port := strconv.Itoa(apiPort)
	policy := &admissionregistrationv1.MutatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: HostNetworkPolicy},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
				}}},
			},
			FailurePolicy:      ptr.To(admissionregistrationv1.Fail),
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
			Mutations: []admissionregistrationv1.Mutation{{
				PatchType: admissionregistrationv1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionregistrationv1.ApplyConfiguration{Expression: `Object{spec: Object.spec{
  hostNetwork: true,
  containers: object.spec.containers.map(c, Object.spec.containers{
    name: c.name,
    env: [
      Object.spec.containers.env{name: "KUBERNETES_SERVICE_HOST", value: "127.0.0.1"},
      Object.spec.containers.env{name: "KUBERNETES_SERVICE_PORT", value: "` + port + `"}
    ]
  })
}}`},
			}},
		},
	}
	binding := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: HostNetworkPolicy},
		Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: HostNetworkPolicy},
	}
	return policy, binding
}
