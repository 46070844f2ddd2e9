output "control_plane_endpoint_host" {
  value = "api.${var.environment}.example.com"
}

output "control_plane_endpoint_port" {
  value = "6443"
}

output "failure_domains" {
  value = [
    { name = "${var.environment}-a", control_plane = true, attributes = { zone = "a" } },
    { name = "${var.environment}-b", control_plane = false },
  ]
}

output "exports" {
  value = {
    network_id = terraform_data.network.id
    region     = "eu-west-1"
  }
}

output "health" {
  value = { state = terraform_data.network.output == null ? "pending" : "running" }
}

output "something_else" {
  value     = var.api_token
  sensitive = true
}
