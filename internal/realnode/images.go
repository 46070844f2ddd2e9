package realnode

import (
	"context"
	"fmt"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/image"
)

// ModuleImage assembles a module image for this node's platform as
// examples/kubernetes/Dockerfile lays one out: captf's base files (the
// non-root user, CA certificates), the module folder at /captf/module,
// terraform at /captf/runtime/terraform, run as the non-root user; extra
// files are added on top.
func ModuleImage(module, terraform string, extra ...image.File) (v1.ImageIndex, error) {
	created := time.Unix(0, 0).UTC()
	base, err := image.Layer(image.Base(), created)
	if err != nil {
		return nil, err
	}
	files, err := image.Tree(module, infrav1.PathModule)
	if err != nil {
		return nil, err
	}
	files = append(files, image.File{Path: infrav1.PathRuntime + "/terraform", Mode: 0o755, Source: terraform})
	files = append(files, extra...)
	layer, err := image.Layer(files, created)
	if err != nil {
		return nil, err
	}
	img, err := image.Build(image.Spec{Platform: HostPlatform, Created: created, Layers: []v1.Layer{base, layer}, User: image.User, WorkingDir: "/"})
	if err != nil {
		return nil, err
	}
	return image.Index(img)
}

// StateRole names the Role (and RoleBinding) GrantState makes.
const StateRole = "captf-runner-state"

// GrantState lets the default ServiceAccount of namespace, which runner
// pods run as unless spec.jobs.serviceAccountName says otherwise, keep
// terraform state in terraform's kubernetes backend: its Secrets and its
// lock Lease.
func (n *Node) GrantState(ctx context.Context, namespace string) error {
	verbs := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: StateRole, Namespace: namespace},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: verbs},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: verbs},
		},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: StateRole, Namespace: namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: namespace}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := n.Client.Create(ctx, o); err != nil {
			return fmt.Errorf("grant state to %s's runner pods: %w", namespace, err)
		}
	}
	return nil
}
