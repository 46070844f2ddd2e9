output "failure_domains" {
  value = {
    a = { control_plane = "yes" }
  }
}
