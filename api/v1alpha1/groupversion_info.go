// Package v1alpha1 holds the captf API types of the Cluster API
// infrastructure group: TerraformCluster, TerraformClusterTemplate,
// TerraformClusterIdentity and their constants. Types, markers and constants only: no clients, no logic.
// It imports only the standard library and k8s.io API packages.
//
// +kubebuilder:object:generate=true
// +groupName=infrastructure.cluster.x-k8s.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version of these types.
var GroupVersion = schema.GroupVersion{Group: "infrastructure.cluster.x-k8s.io", Version: "v1alpha1"}

var schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

// AddToScheme adds the types of this group version to a scheme.
var AddToScheme = schemeBuilder.AddToScheme

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&TerraformCluster{}, &TerraformClusterList{},
		&TerraformClusterTemplate{}, &TerraformClusterTemplateList{},
		&TerraformMachine{}, &TerraformMachineList{},
		&TerraformMachineTemplate{}, &TerraformMachineTemplateList{},
		&TerraformMachinePool{}, &TerraformMachinePoolList{},
		&TerraformMachinePoolTemplate{}, &TerraformMachinePoolTemplateList{},
		&TerraformMachinePoolMachine{}, &TerraformMachinePoolMachineList{},
		&TerraformClusterIdentity{}, &TerraformClusterIdentityList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
