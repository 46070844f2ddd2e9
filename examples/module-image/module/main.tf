# A module a TerraformCluster runs from its module image: it needs no
# provider download (terraform_data is built into terraform and OpenTofu)
# and gives Cluster API the control plane's endpoint through the two
# outputs the manager forwards to spec.controlPlaneEndpoint.

variable "cluster_name" {
  type        = string
  description = "Name of the cluster."
  default     = "demo"
}

resource "terraform_data" "control_plane" {
  input = {
    name = var.cluster_name
  }
}

output "control_plane_endpoint_host" {
  value = "api.${terraform_data.control_plane.output.name}.example.test"
}

output "control_plane_endpoint_port" {
  value = 6443
}
