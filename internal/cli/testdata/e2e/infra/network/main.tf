variable "namespace" {
  type = string
}

variable "release" {
  type = string
}

variable "db_password" {
  type      = string
  sensitive = true
}

resource "terraform_data" "network" {
  input = {
    cidr    = "10.0.0.0/16"
    release = var.release
  }
}

resource "terraform_data" "credentials" {
  input = var.db_password
}

output "namespace" {
  value = var.namespace
}

output "release" {
  value = var.release
}
