# The machine module of the Kubernetes quickstart: one node's
# infrastructure. Like the cluster module it needs no provider download; a
# real one would create a virtual machine that boots with the bootstrap
# data and joins the workload cluster.

# Set by the manager for every TerraformMachine (captf lint --role machine).
variable "captf_exports" {
  type        = any
  description = "What the cluster's module exports: here the network's name."
}

variable "captf_machine_name" {
  type        = string
  description = "The Cluster API Machine's name."
}

variable "captf_failure_domain" {
  type        = string
  description = "The Machine's failure domain, \"\" when it has none."
}

variable "captf_control_plane" {
  type        = bool
  description = "Whether the Machine belongs to the control plane."
}

variable "captf_kubernetes_version" {
  type        = string
  description = "The Machine's spec.version: a real module picks the node image by it."
}

variable "captf_bootstrap_data" {
  type        = string
  sensitive   = true
  description = "The bootstrap data the node joins the cluster with."
}

resource "terraform_data" "vm" {
  input = {
    name          = var.captf_machine_name
    network       = var.captf_exports.network
    zone          = var.captf_failure_domain
    control_plane = var.captf_control_plane
    image         = "node-${var.captf_kubernetes_version}"
    user_data     = var.captf_bootstrap_data
  }
}

# What Cluster API reads from the TerraformMachine.
output "provider_id" {
  value = "example:///${var.captf_machine_name}/${terraform_data.vm.id}"
}

output "addresses" {
  value = [
    { type = "Hostname", address = var.captf_machine_name },
    { type = "InternalIP", address = "10.0.1.10" },
  ]
}

output "failure_domain" {
  value = var.captf_failure_domain
}
