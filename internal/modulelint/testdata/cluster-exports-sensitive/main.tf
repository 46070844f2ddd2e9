output "exports" {
  value     = { network_id = "net-1" }
  sensitive = true
}
