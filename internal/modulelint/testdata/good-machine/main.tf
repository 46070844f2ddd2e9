resource "terraform_data" "machine" {
  input = {
    name      = var.captf_machine_name
    network   = var.captf_exports.network_id
    user_data = var.captf_bootstrap_data
  }
}

output "provider_id" {
  value = "example://${terraform_data.machine.id}"
}

output "addresses" {
  value = [
    { type = "InternalIP", address = "10.0.0.4" },
    { type = "Hostname", address = var.captf_machine_name },
  ]
}

output "failure_domain" {
  value = var.captf_failure_domain
}

output "health" {
  value = "running"
}
