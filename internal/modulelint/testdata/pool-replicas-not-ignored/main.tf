resource "terraform_data" "group" {
  input = {
    name    = var.captf_pool_name
    desired = var.captf_replicas
  }
}

resource "terraform_data" "ignored" {
  input = var.captf_replicas
  lifecycle {
    ignore_changes = [input]
  }
}

resource "terraform_data" "node" {
  count = var.captf_replicas
  input = var.captf_bootstrap_data
}

output "provider_ids" {
  value = [for n in terraform_data.node : "example://${n.id}"]
}
