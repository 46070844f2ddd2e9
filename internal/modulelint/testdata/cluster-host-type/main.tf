output "control_plane_endpoint_host" {
  value = ["api.example.com"]
}

output "control_plane_endpoint_port" {
  value = 6443
}
