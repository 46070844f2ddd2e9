# The root module of the Kubernetes quickstart: what a module image holds at
# /captf/module. It needs no provider download (terraform_data and outputs
# are built into terraform and OpenTofu), so it runs anywhere; a real one
# would create a network and a load balancer for the workload cluster.

variable "environment" {
  type        = string
  description = "Name of the environment."
}

variable "replicas" {
  type        = number
  description = "How many workers to run."
}

variable "api_token" {
  type        = string
  sensitive   = true
  description = "A secret from a Kubernetes Secret: terraform hides it in the Job's log, captf everywhere."
}

resource "terraform_data" "network" {
  input = {
    name = "${var.environment}-net"
    cidr = "10.0.0.0/16"
  }
}

resource "terraform_data" "worker" {
  count = var.replicas
  input = {
    name    = "${var.environment}-worker-${count.index}"
    network = terraform_data.network.id
    token   = var.api_token
  }
}

# What Cluster API reads from the TerraformCluster: where the workload
# cluster's API server answers, and where its machines may run.
output "control_plane_endpoint_host" {
  value = "api.${var.environment}.example.com"
}

output "control_plane_endpoint_port" {
  value = 6443
}

output "failure_domains" {
  value = ["${var.environment}-a", "${var.environment}-b"]
}

# What the cluster's machines get as var.captf_exports.
output "exports" {
  value = { network = terraform_data.network.output.name }
}
