# A root module that needs no provider download: terraform_data and outputs
# are built into terraform and OpenTofu. Edit terraform.tfvars to watch an
# approved plan move.

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
  description = "A secret: it never appears in captf's output or files."
  default     = "example-token-not-a-real-secret"
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

output "workers" {
  value = [for w in terraform_data.worker : w.input.name]
}
