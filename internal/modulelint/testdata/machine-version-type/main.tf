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
