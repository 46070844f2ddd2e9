# The pool module of the Kubernetes quickstart: the infrastructure of many
# nodes at once (an autoscaling group, a managed node group, a scale set).
# Like the others it needs no provider download; a real one would create
# the group with the bootstrap data as its instances' user data, and read
# its instances' IDs with a data source, so members an autoscaler adds
# reach the MachinePool through the manager's membership refresh.

# Set by the manager for every TerraformMachinePool (captf lint --role pool).
variable "captf_exports" {
  type        = any
  description = "What the cluster's module exports: here the network's name."
}

variable "captf_pool_name" {
  type        = string
  description = "The Cluster API MachinePool's name."
}

variable "captf_replicas" {
  type        = number
  description = "How many nodes the MachinePool asks for."
}

variable "captf_failure_domains" {
  type        = list(string)
  description = "The MachinePool's failure domains, [] when it has none."
}

variable "captf_kubernetes_version" {
  type        = string
  description = "The MachinePool template's spec.version: a real module picks the node image by it."
}

variable "captf_bootstrap_data" {
  type        = string
  sensitive   = true
  description = "The bootstrap data every node joins the cluster with."
}

resource "terraform_data" "node" {
  count = var.captf_replicas
  input = {
    pool      = var.captf_pool_name
    network   = var.captf_exports.network
    zone      = length(var.captf_failure_domains) > 0 ? var.captf_failure_domains[count.index % length(var.captf_failure_domains)] : ""
    image     = "node-${var.captf_kubernetes_version}"
    user_data = var.captf_bootstrap_data
  }
}

# What Cluster API reads from the TerraformMachinePool.
output "provider_id" {
  value = "example:///${var.captf_pool_name}"
}

output "provider_ids" {
  value = [for n in terraform_data.node : "example:///${var.captf_pool_name}/${n.id}"]
}
