package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TerraformClusterIdentitySpec names a Secret of credentials and the
// namespaces whose objects may use it.
type TerraformClusterIdentitySpec struct {
	// SecretRef is the Secret holding the credentials, in any namespace
	// (usually the manager's). Its keys reach the runner Job as
	// environment variables and as files.
	SecretRef SecretReference `json:"secretRef"`
	// AllowedNamespaces says which namespaces' objects may use this
	// identity. Omitted: none. Empty ({}): every namespace. Otherwise the
	// namespaces listed, and those whose labels match the selector.
	// +optional
	AllowedNamespaces *AllowedNamespaces `json:"allowedNamespaces,omitempty"`
}

// SecretReference names a Secret in a namespace.
type SecretReference struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
}

// AllowedNamespaces selects namespaces by name or by label.
type AllowedNamespaces struct {
	// +kubebuilder:validation:MaxItems=256
	// +listType=set
	// +optional
	List []string `json:"list,omitempty"`
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// TerraformClusterIdentity is a set of cloud credentials a platform team
// shares with the TerraformClusters of chosen namespaces.
//
// The label clusterctl.cluster.x-k8s.io/move-hierarchy on the CRD makes
// clusterctl move copy every identity, with the Secret it names (which the
// manager makes the identity's dependent), and keep both on the source,
// as it does for Cluster API AWS's identities.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=tfci,categories=captf;cluster-api
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io="
// +kubebuilder:metadata:labels="clusterctl.cluster.x-k8s.io/move-hierarchy=true"
// +kubebuilder:printcolumn:name="Secret",type=string,JSONPath=`.spec.secretRef.name`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TerraformClusterIdentity struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec TerraformClusterIdentitySpec `json:"spec"`
}

// TerraformClusterIdentityList is a list of TerraformClusterIdentities.
//
// +kubebuilder:object:root=true
type TerraformClusterIdentityList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TerraformClusterIdentity `json:"items"`
}
