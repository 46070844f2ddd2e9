resource "terraform_data" "node" {
  count = var.captf_replicas
  input = {
    name      = "${var.captf_pool_name}-${count.index}"
    user_data = var.captf_bootstrap_data
  }
}

output "provider_ids" {
  value = [for n in terraform_data.node : "example://${n.id}"]
}

