// Package modulecontract names what the manager reads from a user's
// terraform module and what it sets on it, for each role the module can
// play: the outputs it reads, the variables it sets, their kinds, and
// which of them a module must declare. It is data only, so that the
// manager, the runner and `captf lint` share one set of names; it imports
// nothing but the standard library.
package modulecontract

import "slices"

// Role is what a module provides for: a whole cluster's infrastructure, one
// machine, or a pool of machines.
type Role string

// The roles.
const (
	RoleCluster Role = "cluster"
	RoleMachine Role = "machine"
	RolePool    Role = "pool"
)

// Outputs the manager reads.
const (
	OutputEndpointHost   = "control_plane_endpoint_host"
	OutputEndpointPort   = "control_plane_endpoint_port"
	OutputFailureDomains = "failure_domains"
	OutputExports        = "exports"
	OutputHealth         = "health"
	OutputProviderID     = "provider_id"
	OutputAddresses      = "addresses"
	OutputFailureDomain  = "failure_domain"
	OutputProviderIDs    = "provider_ids"
	// OutputMemberAddresses maps each of a pool's members' provider IDs
	// to the address, in the module, of the resource that makes the
	// member: what terraform replaces when the member's Machine is
	// deleted.
	OutputMemberAddresses = "member_addresses"
)

// Variables the manager sets.
const (
	VariableExports        = "captf_exports"
	VariableMachineName    = "captf_machine_name"
	VariableFailureDomain  = "captf_failure_domain"
	VariableControlPlane   = "captf_control_plane"
	VariableBootstrapData  = "captf_bootstrap_data"
	VariablePoolName       = "captf_pool_name"
	VariableReplicas       = "captf_replicas"
	VariableFailureDomains = "captf_failure_domains"
	VariableNodeLabels     = "captf_node_labels"
	VariableNodeTaints     = "captf_node_taints"
	// VariableKubernetesVersion is the Kubernetes version a machine or
	// a pool's machines run: a module picks its image by it.
	VariableKubernetesVersion = "captf_kubernetes_version"
)

// Health states: the words the health output's state may hold. Any other
// value reads as HealthUnknown.
const (
	HealthRunning = "running"
	HealthPending = "pending"
	HealthFailed  = "failed"
	HealthUnknown = "unknown"
)

// AddressTypes are the types a machine address may have (Cluster API's
// MachineAddressType).
var AddressTypes = []string{"Hostname", "ExternalIP", "InternalIP", "ExternalDNS", "InternalDNS"}

// Kind is the shape of a value the manager reads or sets.
type Kind int

// The kinds.
const (
	KindString Kind = iota
	KindNumber
	KindBool
	// KindStringList is a list of strings.
	KindStringList
	// KindObject is an object or a map of anything.
	KindObject
	// KindPort is a port number, or a string of its digits.
	KindPort
	// KindFailureDomains is a list of names, a list of objects with name,
	// control_plane (bool, default true) and attributes (strings), or an
	// object of such objects by name.
	KindFailureDomains
	// KindHealth is an object whose state is a health state, or the state
	// alone.
	KindHealth
	// KindAddresses is a list of objects with a type (one of AddressTypes)
	// and an address.
	KindAddresses
	// KindStringMap is a map of strings.
	KindStringMap
	// KindTaints is a list of objects with key, value and effect (a
	// Kubernetes taint's fields).
	KindTaints
)

// String says what a value of the kind is, to complete "the manager reads …".
func (k Kind) String() string {
	switch k {
	case KindString:
		return "a string"
	case KindNumber:
		return "a number"
	case KindBool:
		return "a bool"
	case KindStringList:
		return "a list of strings"
	case KindObject:
		return "an object"
	case KindPort:
		return "a port number, or a string of its digits"
	case KindFailureDomains:
		return "a list of names, a list of objects with name, control_plane and attributes, or an object of such objects"
	case KindHealth:
		return `an object whose state is "running", "pending", "failed" or "unknown", or that word alone`
	case KindAddresses:
		return "a list of objects with type and address"
	case KindStringMap:
		return "a map of strings"
	case KindTaints:
		return "a list of objects with key, value and effect"
	}
	return "an unknown kind"
}

// Output is an output the manager reads after an apply. Every one it
// reads is published in the object's status or spec, so none may be
// sensitive: the runner never reports a sensitive value.
type Output struct {
	Name string
	Kind Kind
	// Required: a module of the role must declare it.
	Required bool
	// ReadFor says what the manager reads it for, to complete "the manager
	// reads it for …".
	ReadFor string
}

// Variable is a variable the manager sets. A module may leave out one it
// does not use, unless it is Required.
type Variable struct {
	Name     string
	Kind     Kind
	Required bool
	// Sensitive: the value is secret, so the module must declare the
	// variable with sensitive = true.
	Sensitive bool
	// Holds says what the manager sets it to, to complete "the manager
	// sets it to …".
	Holds string
}

// Contract is what the manager reads from and sets on a module of one role.
type Contract struct {
	Role      Role
	Outputs   []Output
	Variables []Variable
	// Pairs are outputs read only together: a module declares both or
	// neither.
	Pairs [][2]string
}

var health = Output{Name: OutputHealth, Kind: KindHealth, ReadFor: "the InfrastructureHealthy condition"}

var exports = Variable{Name: VariableExports, Kind: KindObject, Holds: "the exports output of the cluster's module"}

var bootstrap = Variable{Name: VariableBootstrapData, Kind: KindString, Required: true, Sensitive: true, Holds: "the bootstrap data the machine joins the cluster with"}

var contracts = []Contract{
	{
		Role: RoleCluster,
		Outputs: []Output{
			{Name: OutputEndpointHost, Kind: KindString, ReadFor: "the Cluster's spec.controlPlaneEndpoint"},
			{Name: OutputEndpointPort, Kind: KindPort, ReadFor: "the Cluster's spec.controlPlaneEndpoint"},
			{Name: OutputFailureDomains, Kind: KindFailureDomains, ReadFor: "the cluster's status.failureDomains"},
			{Name: OutputExports, Kind: KindObject, ReadFor: "var.captf_exports of the cluster's machines and pools"},
			health,
		},
		Pairs: [][2]string{{OutputEndpointHost, OutputEndpointPort}},
	},
	{
		Role: RoleMachine,
		Outputs: []Output{
			{Name: OutputProviderID, Kind: KindString, Required: true, ReadFor: "the Machine's spec.providerID"},
			{Name: OutputAddresses, Kind: KindAddresses, ReadFor: "the machine's status.addresses"},
			{Name: OutputFailureDomain, Kind: KindString, ReadFor: "the machine's spec.failureDomain"},
			health,
		},
		Variables: []Variable{
			exports,
			{Name: VariableMachineName, Kind: KindString, Required: true, Holds: "the Machine's name"},
			{Name: VariableFailureDomain, Kind: KindString, Holds: "the Machine's failure domain"},
			{Name: VariableControlPlane, Kind: KindBool, Holds: "whether the Machine is a control plane machine"},
			{Name: VariableKubernetesVersion, Kind: KindString, Holds: "the Machine's spec.version, the Kubernetes version it runs (empty when it names none)"},
			bootstrap,
		},
	},
	{
		Role: RolePool,
		Outputs: []Output{
			{Name: OutputProviderIDs, Kind: KindStringList, Required: true, ReadFor: "the pool's spec.providerIDList and status.replicas"},
			{Name: OutputProviderID, Kind: KindString, ReadFor: "the pool's spec.providerID"},
			{Name: OutputMemberAddresses, Kind: KindStringMap, ReadFor: "replacing the member whose Machine is deleted (the address of each member's resource, by provider ID)"},
			health,
		},
		Variables: []Variable{
			exports,
			{Name: VariablePoolName, Kind: KindString, Required: true, Holds: "the MachinePool's name"},
			{Name: VariableReplicas, Kind: KindNumber, Required: true, Holds: "how many machines the pool should run"},
			{Name: VariableFailureDomains, Kind: KindStringList, Holds: "the failure domains the pool may use"},
			{Name: VariableNodeLabels, Kind: KindStringMap, Holds: "the labels of the MachinePool's machine template"},
			{Name: VariableNodeTaints, Kind: KindTaints, Holds: "the taints of the MachinePool's machine template"},
			{Name: VariableKubernetesVersion, Kind: KindString, Holds: "the spec.version of the MachinePool's machine template, the Kubernetes version its machines run (empty when it names none)"},
			bootstrap,
		},
	},
}

// Roles lists the roles, in the order of the contracts.
func Roles() []Role {
	roles := make([]Role, len(contracts))
	for i, c := range contracts {
		roles[i] = c.Role
	}
	return roles
}

// For returns the contract of role, and false for a role that has none.
func For(role Role) (Contract, bool) {
	i := slices.IndexFunc(contracts, func(c Contract) bool { return c.Role == role })
	if i < 0 {
		return Contract{}, false
	}
	// A copy: the contracts are shared, and no caller may change one.
	c := contracts[i]
	c.Outputs = slices.Clone(c.Outputs)
	c.Variables = slices.Clone(c.Variables)
	c.Pairs = slices.Clone(c.Pairs)
	return c, true
}
