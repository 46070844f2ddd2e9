output "control_plane_endpoint_host" {
  value = "api.example.com"
}
