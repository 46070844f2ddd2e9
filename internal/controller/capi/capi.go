// Package capi is what the kinds of the run engine that Cluster API owns
// (clusters, machines, pools) share: reads of its objects — the owner
// Cluster, Machine or MachinePool, the Cluster by the cluster-name label, the exports of the
// cluster's TerraformCluster, bootstrap data, whether a Job of the
// cluster runs — the watches of Clusters and TerraformClusters that bring
// them back (watch.go), and the step that publishes spec.providerID once
// (providerid.go). Each read that finds something missing says what the
// object waits for, as an engine.Wait, never as an error.
package capi

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	infrav1 "github.com/captf/captf/api/v1alpha1"
	"github.com/captf/captf/internal/controller/engine"
)

// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines,verbs=get;list;watch

// BootstrapKey is the key of a bootstrap data Secret that holds the data
// (Cluster API's bootstrap contract).
const BootstrapKey = "value"

// OwnerMachine is obj's controller owner, a Cluster API Machine, read
// through c; a Wait when obj has no cluster-name label, no such owner, or
// the Machine is not there.
func OwnerMachine(ctx context.Context, c client.Reader, obj client.Object) (*clusterv1.Machine, *engine.Wait, error) {
	return owner[clusterv1.Machine](ctx, c, obj, "Machine")
}

// OwnerMachinePool is obj's controller owner, a Cluster API MachinePool,
// read through c; a Wait as OwnerMachine's.
func OwnerMachinePool(ctx context.Context, c client.Reader, obj client.Object) (*clusterv1.MachinePool, *engine.Wait, error) {
	return owner[clusterv1.MachinePool](ctx, c, obj, "MachinePool")
}

// owner is obj's controller owner, a Cluster API object of kind (of Go
// type T); a Wait when obj has no cluster-name label (the owner's
// controller sets it), no such owner, or the owner is not there.
func owner[T any, P interface {
	*T
	client.Object
}](ctx context.Context, c client.Reader, obj client.Object, kind string) (P, *engine.Wait, error) {
	if obj.GetLabels()[clusterv1.ClusterNameLabel] == "" {
		return nil, &engine.Wait{Reason: infrav1.ReasonWaitingForOwner, Message: "The object has no " + clusterv1.ClusterNameLabel + " label yet; Cluster API's " + kind + " controller sets it."}, nil
	}
	ref := metav1.GetControllerOf(obj)
	if ref == nil || ref.Kind != kind || GroupOf(ref.APIVersion) != clusterv1.GroupVersion.Group {
		return nil, &engine.Wait{Reason: infrav1.ReasonWaitingForOwner, Message: "No Cluster API " + kind + " is the object's controller owner yet."}, nil
	}
	into := P(new(T))
	err := c.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: ref.Name}, into)
	if apierrors.IsNotFound(err) || (err == nil && into.GetUID() != ref.UID) {
		return nil, &engine.Wait{Reason: infrav1.ReasonWaitingForOwner, Message: fmt.Sprintf("The owner %s %s is not there.", kind, ref.Name)}, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s %s: %w", kind, ref.Name, err)
	}
	return into, nil, nil
}

// Served says whether mapper serves Cluster API's kind (v1beta2), as the
// kind of captf it owns needs: such an object waits for its owner, and a
// watch of a kind that is not served would stop the manager. The error
// says why not.
func Served(mapper meta.RESTMapper, kind string) error {
	_, err := mapper.RESTMapping(clusterv1.GroupVersion.WithKind(kind).GroupKind(), clusterv1.GroupVersion.Version)
	return err
}

// GroupOf is the API group of apiVersion ("" for the core group or one
// that does not parse).
func GroupOf(apiVersion string) string {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return ""
	}
	return gv.Group
}

// ProvisionedCluster is the Cluster obj's cluster-name label names; a Wait
// while it is not there or its infrastructure is not provisioned.
func ProvisionedCluster(ctx context.Context, c client.Reader, obj client.Object) (*clusterv1.Cluster, *engine.Wait, error) {
	name := obj.GetLabels()[clusterv1.ClusterNameLabel]
	var cluster clusterv1.Cluster
	err := c.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}, &cluster)
	if apierrors.IsNotFound(err) {
		return nil, &engine.Wait{Reason: infrav1.ReasonWaitingForClusterInfrastructure, Message: fmt.Sprintf("The Cluster %s is not there.", name)}, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("Cluster %s: %w", name, err)
	}
	if !ptr.Deref(cluster.Status.Initialization.InfrastructureProvisioned, false) {
		return nil, &engine.Wait{Reason: infrav1.ReasonWaitingForClusterInfrastructure, Message: fmt.Sprintf("The infrastructure of Cluster %s is not provisioned yet.", name)}, nil
	}
	return &cluster, nil, nil
}

// Exports are the exports the TerraformCluster of cluster published (its
// status.exports), "{}" when it publishes none or cluster's
// infrastructure is not a TerraformCluster; a Wait while its condition
// ExportsPublished is not True.
func Exports(ctx context.Context, c client.Reader, cluster *clusterv1.Cluster) (json.RawMessage, *engine.Wait, error) {
	ref := cluster.Spec.InfrastructureRef
	if ref.Kind != "TerraformCluster" || ref.APIGroup != infrav1.GroupVersion.Group {
		return json.RawMessage(`{}`), nil, nil
	}
	var tc infrav1.TerraformCluster
	err := c.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: ref.Name}, &tc)
	if apierrors.IsNotFound(err) {
		return nil, &engine.Wait{Reason: infrav1.ReasonWaitingForExports, Message: fmt.Sprintf("The TerraformCluster %s is not there.", ref.Name)}, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("TerraformCluster %s: %w", ref.Name, err)
	}
	cond := meta.FindStatusCondition(tc.Status.Conditions, infrav1.ConditionExportsPublished)
	if cond == nil || cond.Status != metav1.ConditionTrue {
		why := "it has not read them from its state yet"
		if cond != nil {
			why = "its condition " + infrav1.ConditionExportsPublished + " is " + string(cond.Status) + " (" + cond.Reason + ")"
		}
		return nil, &engine.Wait{Reason: infrav1.ReasonWaitingForExports, Message: fmt.Sprintf("The TerraformCluster %s has not published its exports: %s.", ref.Name, why)}, nil
	}
	if tc.Status.Exports == nil {
		return json.RawMessage(`{}`), nil, nil
	}
	return json.RawMessage(tc.Status.Exports.Raw), nil, nil
}

// BootstrapData is the bootstrap data of m: the key value of the Secret
// its spec.bootstrap.dataSecretName names; a Wait while there is none.
func BootstrapData(ctx context.Context, c client.Reader, m *clusterv1.Machine) ([]byte, *engine.Wait, error) {
	return bootstrapData(ctx, c, m.Namespace, "Machine "+m.Name, "spec.bootstrap.dataSecretName", m.Spec.Bootstrap.DataSecretName)
}

// PoolBootstrapData is the bootstrap data of mp: the key value of the
// Secret its spec.template.spec.bootstrap.dataSecretName names; a Wait
// while there is none. rotated says whether a bootstrap provider made
// that Secret for mp's cluster (BootstrapProvided): only then may a new
// value apply without a new approval.
func PoolBootstrapData(ctx context.Context, c client.Reader, mp *clusterv1.MachinePool) (data []byte, rotated bool, wait *engine.Wait, err error) {
	s, wait, err := bootstrapSecret(ctx, c, mp.Namespace, "MachinePool "+mp.Name, "spec.template.spec.bootstrap.dataSecretName", mp.Spec.Template.Spec.Bootstrap.DataSecretName)
	if s == nil {
		return nil, false, wait, err
	}
	return s.Data[BootstrapKey], BootstrapProvided(s, mp.Spec.ClusterName), nil, nil
}

// BootstrapProvided reports whether s looks made by a bootstrap provider
// for cluster, as Cluster API's kubeadm bootstrap provider makes one: it
// is labelled with the cluster's name and has a controller owner (the
// bootstrap config). Not a proof against whoever can write Secrets,
// who can write the bootstrap data itself; it keeps someone who can only
// edit a MachinePool from naming an unrelated Secret as data that
// applies without approval.
func BootstrapProvided(s *corev1.Secret, cluster string) bool {
	return cluster != "" && s.Labels[clusterv1.ClusterNameLabel] == cluster && metav1.GetControllerOf(s) != nil
}

// bootstrapData is the key value of the Secret secret in namespace, which
// owner names in its field; a Wait while there is none.
func bootstrapData(ctx context.Context, c client.Reader, namespace, owner, field string, secret *string) ([]byte, *engine.Wait, error) {
	s, wait, err := bootstrapSecret(ctx, c, namespace, owner, field, secret)
	if s == nil {
		return nil, wait, err
	}
	return s.Data[BootstrapKey], nil, nil
}

// bootstrapSecret is the Secret secret in namespace, which owner names in
// its field, when it holds the key BootstrapKey; a Wait while there is
// none.
func bootstrapSecret(ctx context.Context, c client.Reader, namespace, owner, field string, secret *string) (*corev1.Secret, *engine.Wait, error) {
	name := ptr.Deref(secret, "")
	if name == "" {
		return nil, &engine.Wait{Reason: infrav1.ReasonWaitingForBootstrapData, Message: fmt.Sprintf("The %s names no bootstrap data Secret yet (%s).", owner, field)}, nil
	}
	var s corev1.Secret
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &s)
	if apierrors.IsNotFound(err) {
		return nil, &engine.Wait{Reason: infrav1.ReasonWaitingForBootstrapData, Message: fmt.Sprintf("The bootstrap data Secret %s is not there.", name)}, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("bootstrap data Secret %s: %w", name, err)
	}
	if _, ok := s.Data[BootstrapKey]; !ok {
		return nil, &engine.Wait{Reason: infrav1.ReasonWaitingForBootstrapData, Message: fmt.Sprintf("The bootstrap data Secret %s has no key %s.", name, BootstrapKey)}, nil
	}
	return &s, nil, nil
}

// TerraformClustersOf are the TerraformClusters in namespace whose
// cluster (engine.ClusterName) is cluster; the objects are c's own: read
// only.
func TerraformClustersOf(ctx context.Context, c client.Reader, namespace, cluster string) ([]*infrav1.TerraformCluster, error) {
	var list infrav1.TerraformClusterList
	if err := c.List(ctx, &list, client.InNamespace(namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list TerraformClusters: %w", err)
	}
	var out []*infrav1.TerraformCluster
	for i := range list.Items {
		if engine.ClusterName(&list.Items[i]) == cluster {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// ClusterJob is a Wait while the outcome of an apply or destroy Job of a
// TerraformCluster of obj's cluster (its cluster-name label) is not
// recorded (the Job runs, or ended a moment ago): Jobs of related state
// never run at once, and a machine renders no exports of a cluster apply
// whose outcome its TerraformCluster has not recorded. jobs are the Jobs of obj's cluster
// (their captf.io/cluster label), every one of them (the engine reads
// them so that one created a moment ago counts): a TerraformCluster of
// the cluster labels its Jobs the same. Its Jobs are also taken by their
// owner from c (the cache), for one made under an earlier cluster label.
// The TerraformClusters come from c too.
func ClusterJob(ctx context.Context, c client.Reader, obj client.Object, jobs []batchv1.Job) (*engine.Wait, error) {
	cluster := obj.GetLabels()[clusterv1.ClusterNameLabel]
	if cluster == "" {
		return nil, nil
	}
	tcs, err := TerraformClustersOf(ctx, c, obj.GetNamespace(), cluster)
	if err != nil {
		return nil, err
	}
	for _, tc := range tcs {
		owner := client.MatchingLabels{infrav1.LabelOwnerKind: "TerraformCluster", infrav1.LabelOwnerName: engine.NameLabel(tc.Name)}
		var cached batchv1.JobList
		if err := c.List(ctx, &cached, client.InNamespace(tc.Namespace), owner); err != nil {
			return nil, fmt.Errorf("Jobs of TerraformCluster %s: %w", tc.Name, err)
		}
		of := cached.Items
		sel := labels.SelectorFromSet(labels.Set(owner))
		for _, j := range jobs {
			if sel.Matches(labels.Set(j.Labels)) {
				of = append(of, j)
			}
		}
		if j := running(of, func(j *batchv1.Job) bool { return recorded(tc, j) }); j != nil {
			return &engine.Wait{Reason: infrav1.ReasonClusterJobRuns, Message: fmt.Sprintf("The %s Job %s of TerraformCluster %s %s; a Job of this object starts when its outcome is recorded.", j.Labels[engine.LabelOperation], j.Name, tc.Name, runs(j))}, nil
		}
	}
	return nil, nil
}
